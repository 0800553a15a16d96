"""One path for a received OTLP trace ``Export``, whatever the transport (gRPC or HTTP) and encoding.

From the received request on, every transport calls :class:`TraceExport`: whether the
service takes calls now, the size checks before and after decoding, decoding (binary
protobuf, or OTLP/JSON through the project's OTLP/JSON reader), the intake
reservation, the span id checks and the partial-success response. A transport only
maps an :class:`ExportRefused` to its own status (``refusal.kind``):

=============== ============================================ ===================================
kind            gRPC (OTLP/gRPC)                             HTTP (OTLP/HTTP)
=============== ============================================ ===================================
``RETRY_LATER`` ``UNAVAILABLE`` with a ``RetryInfo`` delay   ``503`` with ``Retry-After``
``TOO_LARGE``   ``RESOURCE_EXHAUSTED`` (no ``RetryInfo``)    ``413 Content Too Large``
``UNDECODABLE`` ``INVALID_ARGUMENT``                         ``400 Bad Request``
=============== ============================================ ===================================

These follow the OTLP specification ("Failures", "OTLP/gRPC Throttling", "OTLP/HTTP
Throttling", "Bad Data"): the first is retried by OTLP clients, the other two never.
"""

from __future__ import annotations

import enum
import logging
from typing import Any, Callable, Sequence

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from otel_tracefence.core.value_text import capped
from otel_tracefence.normalize import SpanView
from otel_tracefence.readers.errors import InputError, UnreadableInput, decode_utf8
from otel_tracefence.otlp.json_reader import read_otlp_json_request
from otel_tracefence.otlp.json_span_count import count_json_spans
from otel_tracefence.service.intake import Intake, IntakeRefusal
from otel_tracefence.service.otlp_bytes import MIN_SPAN_BYTES, LazyRequest, SpanHead, encoded_span_count
from otel_tracefence.service.otlp_spans import Orphan, OtlpItem, lazy_request, orphan, read_request, request_span_count, traces_by_span_id, under_parent
from otel_tracefence.service.span_decoding import sift_undecodable

_log = logging.getLogger("otel_tracefence.service")
_MAX_LISTED = 10  # problems listed in a refusal of a body that does not decode
MIN_JSON_SPAN_BYTES = 2  # the smallest element of an OTLP/JSON spans array and its comma ("0,"): a shorter body cannot
# hold more spans than the bound, so it is not counted before it is parsed


class RefusalKind(enum.Enum):
    """Why a whole Export call is refused."""

    RETRY_LATER = "retry_later"
    """Shutting down or a queue near full: retry after ``retry_delay_s``."""
    TOO_LARGE = "too_large"
    """The request alone exceeds a bound (message size, intake queue): never retry it as it is."""
    UNDECODABLE = "undecodable"
    """The bytes are not an ``ExportTraceServiceRequest``: never retry them."""


class ExportRefused(Exception):
    """A whole Export call refused: ``kind``, a message for the client, the retry delay (``RETRY_LATER`` only, in
    seconds) and, for ``UNDECODABLE``, the problems found as ``(field, description)`` pairs."""

    def __init__(self, kind: RefusalKind, message: str, *, retry_delay_s: float | None = None, problems: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_delay_s = retry_delay_s
        self.problems = tuple(problems)


class TraceExport:
    """Takes Export requests into an :class:`~otel_tracefence.service.intake.Intake` (acknowledged on receipt).

    ``refuse()`` returns a reason to refuse every call for now (shutting down, a queue near full) or ``None``;
    ``retry_delay_s`` is the delay then suggested to clients. ``on_rejected(n)`` counts spans refused for their ids,
    ``on_refused_too_large()`` calls refused as larger than a bound (one transport's metrics each).
    Every method raises :class:`ExportRefused` to refuse the whole call.
    """

    def __init__(
        self,
        intake: Intake,
        refuse: Callable[[], str | None],
        retry_delay_s: float,
        *,
        on_rejected: Callable[[int], None] | None = None,
        on_refused_too_large: Callable[[], None] | None = None,
        wire_reader: bool = False,
    ) -> None:
        self._intake = intake
        self._wire_reader = wire_reader  # read each span's ids with the wire reader (service.span_reader)
        self._refuse = refuse
        self._retry_delay_s = retry_delay_s
        self._on_rejected = on_rejected or (lambda n: None)
        self._on_refused_too_large = on_refused_too_large or (lambda: None)

    # -- whole calls ---------------------------------------------------------------------
    def export_protobuf(self, data: bytes, source: str = "") -> ExportTraceServiceResponse:
        """An encoded (binary protobuf) ``ExportTraceServiceRequest``: checked before it is decoded, then accepted."""
        self.admit()
        request, undecodable = self.decode_protobuf(data)
        return self.accept(request, len(data), unparsed=undecodable, source=source)

    def export_json(self, data: bytes, source: str = "") -> ExportTraceServiceResponse:
        """An OTLP/JSON ``ExportTraceServiceRequest`` (UTF-8, ids in hex). Spans that do not parse are rejected in the
        partial success, and stand in their trace as ``review`` steps when their trace id reads, as
        ``tracefence plan`` plans them; anything wrong outside a span refuses the call (``UNDECODABLE``)."""
        self.admit()
        try:
            text = decode_utf8(data)
            if len(data) > MIN_JSON_SPAN_BYTES * self._intake.max_spans:
                # It may hold more spans than the whole bound: count them first, one span in memory at a time, so a
                # body far past the bound is refused before it is parsed (JSON the count cannot walk: the reader says why).
                spans = count_json_spans(text)
                if spans is not None:
                    self._check(lambda: self._intake.check_size(spans=spans))
            read = read_otlp_json_request(text)
        except UnreadableInput as exc:
            _log.warning("refused an OTLP/JSON Export that does not decode: %s", exc)
            raise ExportRefused(RefusalKind.UNDECODABLE, f"not an OTLP/JSON ExportTraceServiceRequest: {exc}", problems=[("body", str(exc))]) from None
        outside = [error for error in read.errors if not error.span_id]
        if outside:
            listed = capped("; ".join(str(error) for error in outside[:_MAX_LISTED]))  # the answer and the log line capped
            _log.warning("refused an OTLP/JSON Export that does not decode: %s", listed)
            raise ExportRefused(
                RefusalKind.UNDECODABLE,
                f"not an OTLP/JSON ExportTraceServiceRequest: {listed}",
                problems=[(error.field, capped(error.message)) for error in outside[:_MAX_LISTED]],
            )
        # Held as the binary path holds spans (each parsed span encoded once); its protobuf size is what the byte
        # bound counts.
        encoded = read.request.SerializeToString()
        return self.accept(LazyRequest.FromString(encoded), len(encoded), unparsed=read.errors, source=source)

    # -- the steps -----------------------------------------------------------------------
    def admit(self) -> None:
        """Refuse every call for now (``RETRY_LATER``) while ``refuse()`` gives a reason: before decoding, a refused
        call costs no more than its bytes."""
        reason = self._refuse()
        if reason is not None:
            raise ExportRefused(RefusalKind.RETRY_LATER, reason, retry_delay_s=self._retry_delay_s)

    def decode_protobuf(self, data: bytes) -> tuple[Any, list[InputError]]:
        """Decode an encoded request into a :data:`~otel_tracefence.service.otlp_bytes.LazyRequest` (its spans
        left as bytes), its size and (when it may hold more spans than the whole bound) its span count checked
        first, without building any span; and the spans the full OTLP types cannot decode (a string that is not
        UTF-8, nesting past protobuf's recursion limit of 100), taken out of it and returned as errors for
        :meth:`accept`'s ``unparsed`` (:func:`~otel_tracefence.service.span_decoding.sift_undecodable`): one bad
        span is refused in the partial success, not its batch. The whole request is parsed once by upb (in C, no
        Python object per span); only when that fails is each span checked. Bytes that are not an
        ``ExportTraceServiceRequest`` at all (garbage, a broken frame) are ``UNDECODABLE``."""
        self._check(lambda: self._intake.check_size(size=len(data)))
        try:
            if len(data) > MIN_SPAN_BYTES * self._intake.max_spans:
                # It may hold more spans than the whole bound: count them first, without building them.
                spans = encoded_span_count(data)
                self._check(lambda: self._intake.check_size(spans=spans))
            request = LazyRequest.FromString(data)
        except DecodeError as exc:
            # protobuf names the message it parsed with, the service's own lazy reader's type: the client sent an
            # ExportTraceServiceRequest, so the message says so.
            why = str(exc).replace(LazyRequest.DESCRIPTOR.full_name, ExportTraceServiceRequest.DESCRIPTOR.full_name)
            _log.warning("refused an Export that does not decode: %s", why)
            raise ExportRefused(RefusalKind.UNDECODABLE, f"not an ExportTraceServiceRequest: {why}", problems=[("body", why)]) from None
        try:
            ExportTraceServiceRequest.FromString(data)
            return request, []
        except DecodeError:
            return sift_undecodable(request)

    def accept(self, request: Any, size: int, unparsed: Sequence[InputError] = (), source: str = "") -> ExportTraceServiceResponse:
        """Queue the request's valid spans in room reserved for ``size`` bytes (its spans and bytes are taken before
        any span is read) and answer: spans with invalid ids, and the ``unparsed`` spans of an OTLP/JSON body, are
        counted in ``partial_success.rejected_spans``, the rest of the request being kept. ``source``: the client
        (its connection's peer address); the intake reads sources in turns. A persistent queue that cannot take the
        request refuses it (``RETRY_LATER``): nothing unwritten is acknowledged."""
        request = lazy_request(request)  # a full ExportTraceServiceRequest is held as bytes too
        reservation = self._check(lambda: self._intake.reserve(request_span_count(request), size))
        try:
            rejected = 0
            first_error = ""
            stand_ins: list[SpanView] = []
            orphans: list[Orphan] = []  # refused, their parent not in the request: looked up where the buffer is (296)
            for error in unparsed:
                rejected += not error.repeat  # one span standing in two traces is one span rejected
                first_error = first_error or f"span {error.span_id}: {error.field}: {error.message}"
                if error.trace_id:  # it may have been a tool call: it stands in its trace as a review step
                    stand_ins.append(SpanView(error.trace_id, error.span_id, "", {}, unreadable=(error.field, error.message)))
            accepted, refused = read_request(request, wire=self._wire_reader)
            for error, view in refused:
                rejected += 1
                first_error = first_error or error
                if isinstance(view, Orphan):
                    orphans.append(view)
                elif view is not None:
                    stand_ins.append(view)
            for view in _under_parents([e for e in unparsed if e.parent_span_id], accepted):
                (orphans if isinstance(view, Orphan) else stand_ins).append(view)
        except BaseException:
            self._intake.release(reservation)
            raise
        self._check(lambda: self._intake.put(accepted, reservation, source=source, orphans=orphans))
        for view in stand_ins:
            self._intake.stand_in(view)
        response = ExportTraceServiceResponse()
        if rejected:
            self._on_rejected(rejected)
            response.partial_success.rejected_spans = rejected
            first_error = capped(first_error)  # a span's fault may quote what it holds: the answer and the log are capped
            response.partial_success.error_message = f"{rejected} span(s) rejected; first: {first_error}"
            _log.warning("rejected %d span(s): %s", rejected, first_error)
        return response

    def too_large(self, message: str) -> ExportRefused:
        """A refusal of a request past a bound a transport checks itself (an HTTP body past ``max_message_bytes``),
        counted and logged as the intake's own refusals are."""
        self._on_refused_too_large()
        _log.warning("refused an Export: %s", message)
        return ExportRefused(RefusalKind.TOO_LARGE, message)

    def _check(self, action: Callable[[], Any]) -> Any:
        """Run an intake bound check; a refusal refuses the call: ``TOO_LARGE`` when the request alone exceeds a bound,
        else ``RETRY_LATER``."""
        try:
            return action()
        except IntakeRefusal as refusal:
            if refusal.permanent:
                raise self.too_large(str(refusal)) from None
            raise ExportRefused(RefusalKind.RETRY_LATER, str(refusal), retry_delay_s=self._retry_delay_s) from None


def _under_parents(orphans: Sequence[InputError], accepted: Sequence[OtlpItem]) -> list[SpanView | Orphan]:
    """Stand-ins, in their parent's trace, for OTLP/JSON spans refused with no readable trace id whose parent is a span
    of the request (``otlp_spans.under_parent``, docs/DECISIONS.md 207); an :class:`Orphan` for each whose parent is
    not in it (looked up among the traces the buffer holds or remembers, 296)."""
    if not orphans:
        return []
    trace_of = traces_by_span_id(item.span for item in accepted)
    views = []
    for error in orphans:
        try:
            span_id = bytes.fromhex(error.span_id)
        except ValueError:  # a label such as "#3": the span gave no readable span id
            span_id = b""
        head = SpanHead(parent_span_id=bytes.fromhex(error.parent_span_id), span_id=span_id if len(span_id) == 8 else b"")
        problem = f"{error.field}: {error.message}"
        view = under_parent(head, problem, trace_of) or orphan(head, problem)
        if view is not None:
            views.append(view)
    return views

