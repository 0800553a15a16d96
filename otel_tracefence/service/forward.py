"""Forwarding decided spans: a bounded queue per target, drained by one worker thread each.

Targets: upstream OTLP/gRPC endpoints, sent through the OpenTelemetry SDK's own
``OTLPSpanExporter`` (its TLS, headers, compression and retry on the
OTLP-retryable status codes, honouring the server's ``RetryInfo`` delay), or,
with no upstream, an OTLP/JSON lines file.

What an upstream answers decides what happens to a batch, as the OTLP
specification's table of gRPC codes says ("OTLP/gRPC Response", "Failures"):

* retryable (``CANCELLED``, ``DEADLINE_EXCEEDED``, ``ABORTED``, ``OUT_OF_RANGE``,
  ``UNAVAILABLE``, ``DATA_LOSS``; ``RESOURCE_EXHAUSTED`` only with a
  ``RetryInfo``): the exporter retries within its deadline; after that the batch
  stays at the head of its queue and is tried again after a pause (0.5 s,
  doubling up to 30 s, or the server's ``RetryInfo`` delay; new work does not cut
  it short, a shutdown's drain does);
* too large (``RESOURCE_EXHAUSTED`` without ``RetryInfo``: the upstream's
  receive limit, or our own send limit): the batch is split in two, down to
  single spans; a single span still refused can never be delivered;
* any other code is permanent: the batch is dropped.

Batches are sized under the upstream's ``max_message_bytes`` up front, so a
split is only needed when that setting is above the upstream's real limit; a
span that alone exceeds it is dropped before any attempt. Every dropped span is
counted (``dropped_spans``, ``tracefence.forward.dropped`` by ``reason``) and
logged with its trace id. Past the queue bound (in spans) the oldest batches are
dropped and counted; at shutdown, whatever the drain could not send is counted
too (``reason=shutdown``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol, Union

import grpc
from google.rpc import error_details_pb2
from opentelemetry.exporter.otlp.proto.grpc.exporter import _RETRYABLE_ERROR_CODES as _SDK_RETRYABLE_CODES
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.core.log_rate import RateLog, rate_limit_logger
from otel_tracefence.core.config import UpstreamSettings
from otel_tracefence.otlp.json_writer import request_to_json
from otel_tracefence.service.otlp_bytes import LazyRequest, SpanHead, lazy_spans
from otel_tracefence.service.otlp_spans import lazy_request, request_span_count, split_request

_log = logging.getLogger("otel_tracefence.service")
RATE_WEIGHT = 0.2  # weight of the latest send in ``Forwarder.send_rate``
PAUSE_AFTER_FAILURE_S = (0.5, 30.0)  # first and longest pause before a failed batch is tried again
DRAIN_RETRY_PAUSE_S = 0.25  # the longest pause after a failure while a shutdown drains
MAX_BATCH_SPANS = 8192  # queued requests are merged into one send up to this many spans (the Collector's and rotel's default)...
MAX_BATCH_BYTES = 4 * 1024 * 1024  # ...and this size, for a target with no message size limit of its own
MIN_BATCH_BYTES = 64 * 1024  # an upstream refusing batches as too large never shrinks merging below this
# Retried by the exporter within one attempt: the SDK's set less RESOURCE_EXHAUSTED, which the OTLP
# specification makes retryable only with a RetryInfo; that case (and every other outcome) is decided here.
RETRYABLE_CODES = frozenset(_SDK_RETRYABLE_CODES - {grpc.StatusCode.RESOURCE_EXHAUSTED})


@dataclass(frozen=True)
class Outcome:
    """What became of one send: ``sent``; ``retry`` (keep it, try again, after ``retry_after_s`` if the server
    said); ``too_large`` (split it); ``rejected`` (permanent: drop it). ``reason`` says why, for the logs."""

    kind: str
    reason: str = ""
    retry_after_s: float | None = None
    rejected_spans: int = 0  # sent, but the upstream refused this many through OTLP partial success


SENT = Outcome("sent")
RETRY = Outcome("retry")
SendResult = Union[bool, Outcome]  # a bare bool means sent (True) or retry (False)
# A queued request: encoded bytes (what the service puts), the encoded parts of a merged batch (joined when
# sent), or a message (a full ExportTraceServiceRequest or a LazyRequest, as put).
Request = Union[bytes, list, ExportTraceServiceRequest, LazyRequest]


class Target(Protocol):
    name: str
    max_message_bytes: int | None  # the largest request the target takes; None: no limit of its own

    def send(self, request: Request) -> SendResult: ...

    def close(self) -> None: ...


def classify(error: grpc.RpcError | None) -> Outcome:
    """The outcome of a failed export from the last gRPC error the exporter saw (OTLP specification's table)."""
    if error is None:  # the exporter gave up without a call (shut down): keep the batch
        return RETRY
    code = error.code()
    reason = f"{code.name}: {error.details()}"
    if code in RETRYABLE_CODES:
        return Outcome("retry", reason, _retry_delay(error))
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        delay = _retry_delay(error)
        return Outcome("retry", reason, delay) if delay is not None else Outcome("too_large", reason)
    return Outcome("rejected", reason)


def _retry_delay(error: grpc.RpcError) -> float | None:
    raw = dict(error.trailing_metadata() or ()).get("google.rpc.retryinfo-bin")
    if raw is None:
        return None
    try:
        return error_details_pb2.RetryInfo.FromString(raw).retry_delay.ToNanoseconds() / 1e9
    except Exception:  # noqa: BLE001 - a malformed trailer is no delay
        return None


EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
SDK_EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.grpc.exporter"  # where the SDK's OTLP/gRPC exporter logs a failed export


class _RecordingStub:
    """The exporter's gRPC stub, sending encoded requests as they are (no serializer: the bytes go on the wire
    unparsed) and keeping the last error and response of ``Export`` for :func:`classify`."""

    def __init__(self, channel: grpc.Channel, owner: "_RequestExporter") -> None:
        self._export = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString)
        self._owner = owner

    def Export(self, request: bytes, **kwargs):
        try:
            response = self._export(request, **kwargs)
        except grpc.RpcError as error:
            self._owner.last_error = error
            raise
        self._owner.last_response = response
        return response


@dataclass(frozen=True, slots=True)
class Encoded:
    """An encoded ``ExportTraceServiceRequest`` and its span count, as the exporter takes it."""

    data: bytes
    spans: int


class _RequestExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC span exporter (its retries, backoff, ``RetryInfo`` delays and reconnects), fed encoded
    requests (:class:`Encoded`) instead of SDK spans and sending their bytes unparsed; it keeps the last gRPC
    error and response, so the forwarder can tell a retryable failure from a permanent one."""

    last_error: grpc.RpcError | None = None
    last_response = None

    def _initialize_channel_and_stub(self):
        super()._initialize_channel_and_stub()
        self._client = _RecordingStub(self._channel, self)

    def _translate_data(self, data: Encoded) -> bytes:  # type: ignore[override]
        return data.data

    def _count_data(self, data: Encoded) -> int:  # type: ignore[override]
        return data.spans


def encode(request: Request) -> bytes:
    """A queued request as the bytes sent: itself when encoded already, the parts of a merged batch joined
    (concatenated encodings of ``ExportTraceServiceRequest`` merge into one), a message serialized."""
    if isinstance(request, bytes):
        return request
    if isinstance(request, list):
        return b"".join(request)
    return request.SerializeToString()


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


class UpstreamTarget:
    """An upstream OTLP/gRPC endpoint (a Collector, Jaeger, Tempo, another tracefence).

    ``max_message_bytes``: the largest request sent (default: the upstream's ``max_message_bytes`` setting);
    gRPC refuses to send a larger one (``RESOURCE_EXHAUSTED``), and the forwarder sizes batches under it.
    """

    def __init__(self, settings: UpstreamSettings, max_message_bytes: int | None = None) -> None:
        # The SDK exporter logs one line per failed export: a throttling upstream refusing every span alone made one
        # a span. The forwarder counts and logs each outcome itself; the exporter's lines pass once per 10 s each.
        rate_limit_logger(SDK_EXPORTER_LOGGER)
        self.name = settings.endpoint
        self.max_message_bytes = max_message_bytes or settings.max_message_bytes
        credentials = None
        if settings.certificate_file or settings.client_certificate_file:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(settings.certificate_file),
                private_key=_read(settings.client_key_file),
                certificate_chain=_read(settings.client_certificate_file),
            )
        self._exporter = _RequestExporter(
            endpoint=settings.endpoint,
            insecure=settings.insecure,
            credentials=credentials,
            headers=dict(settings.headers) or None,
            timeout=settings.timeout_s,
            compression=grpc.Compression.Gzip if settings.compression == "gzip" else grpc.Compression.NoCompression,
            channel_options=(("grpc.max_send_message_length", self.max_message_bytes),),
            retryable_error_codes=RETRYABLE_CODES,
        )

    def send(self, request: Request) -> Outcome:
        """Send one request (encoded bytes, merged parts, or a message) through the exporter."""
        exporter = self._exporter
        exporter.last_error = exporter.last_response = None
        data = encode(request)
        spans = request_span_count(lazy_request(data))  # the exporter's own metric counts spans
        if exporter.export(Encoded(data, spans)) is SpanExportResult.SUCCESS:  # type: ignore[arg-type]
            partial = getattr(exporter.last_response, "partial_success", None)
            if partial is not None and partial.rejected_spans:
                return Outcome("sent", partial.error_message, rejected_spans=partial.rejected_spans)
            return SENT
        return classify(exporter.last_error)

    def close(self) -> None:
        self._exporter.shutdown(timeout_millis=1000)


class FileTarget:
    """OTLP/JSON lines appended to a file: the embedded default when no upstream is configured.

    The file holds spans' raw attribute values, as the persistent queue does: one this creates is private to its
    owner (``0600``), as the queue's and the review database's are; an existing file keeps its permissions.
    """

    def __init__(self, path: str) -> None:
        self.name = f"file:{path}"
        self.max_message_bytes = None
        self._stream = open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a", encoding="utf-8")

    def send(self, request: Request) -> Outcome:
        full = request if isinstance(request, ExportTraceServiceRequest) else ExportTraceServiceRequest.FromString(encode(request))
        self._stream.write(request_to_json(full) + "\n")
        self._stream.flush()
        return SENT

    def close(self) -> None:
        self._stream.close()


def _trace_ids(request: Request, limit: int = 20) -> list[str]:
    seen: dict[str, None] = {}
    for span in lazy_spans(lazy_request(encode(request))):
        seen.setdefault(SpanHead.FromString(span).trace_id.hex())
        if len(seen) >= limit:
            break
    return list(seen)


def _describe(span: bytes) -> str:
    ids = SpanHead.FromString(span)
    return f"span {ids.span_id.hex()} of trace {ids.trace_id.hex()}"


class Forwarder:
    """A bounded queue of requests for one target, drained by a worker thread.

    ``put`` never blocks. A request larger than the target's ``max_message_bytes``
    is cut into pieces under it first (a span that alone exceeds it is dropped).
    A request put behind one that is not being sent yet is merged into it (up to
    ``MAX_BATCH_SPANS`` spans, a sixteenth of the bound, and the target's
    message size), so a trace-at-a-time producer still makes few, large upstream
    calls. ``batch_wait_s``: how long the worker lets a batch under those sizes
    fill before sending it (as the Collector's batch processor ``timeout``; 0:
    send at once); a full batch, a second one queued behind it, or a drain sends
    at once. ``depth`` is the number of spans waiting. ``put`` returns a ticket:
    :meth:`wait_attempted` waits until the request has had its first attempt (the
    router of ``serve --workers N`` paces its clients by its workers so). Counters are attributes
    (``sent_spans``, ``dropped_spans``, ``failures``) and are also reported
    through the service's telemetry: ``on_drop(spans, reason)`` with reason
    ``queue_full``, ``too_large``, ``rejected``, ``upstream_rejected`` or ``shutdown``.
    """

    def __init__(
        self, target: Target, max_spans: int, on_drop: Callable[..., None] | None = None, on_failure=None,
        on_settled: Callable[[Iterable[bytes]], None] | None = None, *, batch_wait_s: float = 0.0,
    ) -> None:
        # ``on_settled(spans)``: spans this queue is done with, sent or dropped for good (the persistent queue
        # deletes them); spans left at shutdown are not settled, and with ``on_settled`` they are kept, not dropped.
        self.target = target
        self._on_settled = on_settled
        self.kept_spans = 0  # left at shutdown in the persistent queue, for the next start
        self.max_spans = max_spans
        self.batch_wait_s = batch_wait_s
        self.max_bytes = getattr(target, "max_message_bytes", None)
        # Each entry: [request (see Request), spans, bytes (an upper bound of its serialized size), end]; ``end``:
        # ``put_spans`` once its last part was put (entries are sent in order, so it orders the tickets).
        self._queue: deque[list] = deque()
        self.put_spans = 0  # spans put so far (the tickets' count)
        self.attempted_spans = 0  # every span put up to this ticket has had an attempt (or is settled)
        # Batches stay small beside the bound, so dropping past it stays fine-grained.
        self._batch_spans = max(1, min(MAX_BATCH_SPANS, max_spans // 16))
        self._batch_bytes = self.max_bytes or MAX_BATCH_BYTES
        self.depth = 0
        # Spans per second of sending, while sending (an exponentially weighted mean of the successful sends):
        # how fast this target takes what is queued. None until the first send succeeds.
        self.send_rate: float | None = None
        self.sent_spans = 0
        self.dropped_spans = 0
        self.failures = 0
        # An upstream answering RESOURCE_EXHAUSTED without RetryInfo (throttling, or a real size limit) has every batch
        # split down to single spans and each dropped: counted one by one, logged as a rate (issue 30), not per span.
        self._too_large_drops = RateLog(
            _log, f"dropped %d span(s) for {target.name} in %.0fs, each too large on its own (larger than its "
            "max_message_bytes, or refused alone with RESOURCE_EXHAUSTED without RetryInfo: the OTLP specification says "
            "not to retry it)", level=logging.ERROR,
        )  # fmt: skip
        self._splits = RateLog(_log, f"{target.name} refused %d batch(es) in %.0fs as too large: sent again in halves")
        self._on_drop = on_drop or (lambda n, reason="": None)
        self._on_failure = on_failure or (lambda: None)
        self._cond = threading.Condition()
        self._closing = False
        self._draining = False  # drain() is waiting: a pause after a failure ends at once
        self._busy = False
        self._sending: list | None = None  # the queue entry the worker is sending
        self._sending_dropped = False  # it left the queue (past the bound) while being sent
        self._thread = threading.Thread(target=self._run, name=f"tracefence-forward-{target.name}", daemon=True)
        self._thread.start()

    def put(self, request: bytes | ExportTraceServiceRequest | LazyRequest, spans: int) -> int:
        """Queue ``request`` (``spans`` spans): an encoded ``ExportTraceServiceRequest`` (what the service
        puts), or a message, full or lazy (shared with other forwarders, never changed here). Returns its ticket,
        for :meth:`wait_attempted`."""
        size = len(request) if isinstance(request, bytes) else request.ByteSize()
        if self.max_bytes is not None and size > self.max_bytes:
            pieces, oversized = split_request(lazy_request(request), max_bytes=self.max_bytes, max_spans=self._batch_spans)
            with self._cond:
                self._settle_spans(oversized)
                for span in oversized:
                    self._count_drop(1, "too_large", f"{_describe(span)} is {len(span)} bytes, "
                                     f"more than {self.target.name} takes (max_message_bytes {self.max_bytes}): it can never be delivered")
            ticket = self.put_spans
            for piece, piece_spans, piece_bytes in pieces:
                ticket = self._put(piece.SerializeToString(), piece_spans, piece_bytes)
            return ticket
        return self._put(request, spans, size)

    def _put(self, request: Request, spans: int, size: int) -> int:
        with self._cond:
            if self._closing:  # after the shutdown drain: nothing will send it
                self._count_drop(spans, "shutdown", f"decided after the shutdown drain ended; not forwarded (traces {', '.join(_trace_ids(request))})")
                return self.attempted_spans
            self.put_spans += spans
            if not self._merge_into_tail(request, spans, size):
                self._queue.append([request, spans, size, self.put_spans])
            self.depth += spans
            while self.depth > self.max_spans and len(self._queue) > 1:
                oldest = self._queue.popleft()
                self.depth -= oldest[1]
                self._attempted(oldest[3])
                if self._busy and oldest is self._sending:
                    # Being sent right now: counted as dropped only if that attempt fails.
                    self._sending_dropped = True
                    continue
                self._settle(oldest[0])
                self._count_drop(oldest[1], "queue_full")
            self._cond.notify()
            return self.put_spans

    def _measure(self, spans: int, seconds: float) -> None:
        """Fold one successful send of ``spans`` spans in ``seconds`` into :attr:`send_rate` (caller holds the lock)."""
        if seconds <= 0:
            return
        sample = spans / seconds
        self.send_rate = sample if self.send_rate is None else self.send_rate + RATE_WEIGHT * (sample - self.send_rate)

    def _attempted(self, end: int) -> None:
        # Caller holds the lock: every span put up to ``end`` has had an attempt, or left the queue.
        if end > self.attempted_spans:
            self.attempted_spans = end
            self._cond.notify_all()

    def wait_attempted(self, ticket: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until the request whose :meth:`put` returned ``ticket`` has had its first attempt
        (whatever its outcome), or has left the queue; whether it has."""
        with self._cond:
            return self._cond.wait_for(lambda: self.attempted_spans >= ticket, timeout=timeout_s)

    def _merge_into_tail(self, request: Request, spans: int, size: int) -> bool:
        # Caller holds the lock. The head may be on the wire: only a tail that is not is merged into.
        if not self._queue:
            return False
        entry = self._queue[-1]
        tail, tail_spans, tail_bytes, _ = entry
        if tail_spans + spans > self._batch_spans or (self._busy and entry is self._sending):
            return False
        if tail_bytes + size > self._batch_bytes:
            return False
        # Merged as encodings: concatenated ExportTraceServiceRequests are one (their resource_spans appended),
        # so a batch is a list of parts joined when sent, and nothing is parsed or copied here.
        parts = tail if isinstance(tail, list) else [encode(tail)]
        parts.append(encode(request))
        self._queue[-1] = [parts, tail_spans + spans, tail_bytes + size, self.put_spans]
        return True

    def _settle(self, request: Request) -> None:
        if self._on_settled is not None:
            self._settle_spans(lazy_spans(lazy_request(encode(request))))

    def _settle_spans(self, spans: Iterable[bytes]) -> None:
        if self._on_settled is not None:
            try:
                self._on_settled(spans)
            except Exception as exc:  # noqa: BLE001 - at worst the spans are sent again after a restart
                _log.error("persistent queue: could not mark spans forwarded to %s: %r", self.target.name, exc)

    def _count_drop(self, spans: int, reason: str, detail: str = "") -> None:
        # Caller holds the lock.
        if reason == "shutdown" and self._on_settled is not None:  # on disk: sent at the next start
            self.kept_spans += spans
            _log.warning("kept %d span(s) for %s in the persistent queue, sent at the next start: %s", spans, self.target.name, detail)
            return
        self.dropped_spans += spans
        self._on_drop(spans, reason)
        if reason == "queue_full":
            _log.warning("forward queue for %s full: dropped %d spans (%d dropped so far)", self.target.name, spans, self.dropped_spans)
        elif reason == "too_large":
            self._too_large_drops.event(spans, f"last: {detail}; {self.dropped_spans} dropped so far")
        else:
            _log.error("dropped %d span(s) for %s (%s): %s; %d dropped so far", spans, self.target.name, reason, detail, self.dropped_spans)

    def _run(self) -> None:
        pause = PAUSE_AFTER_FAILURE_S[0]
        failed_in_a_row = 0
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                self._let_batch_fill()
                entry = self._queue[0]
                if isinstance(entry[0], list):  # a merged batch: joined once, not at every attempt
                    entry[0] = b"".join(entry[0])
                request, spans, size, end = entry
                self._busy = True
                self._sending, self._sending_dropped = entry, False
            started = time.monotonic()
            try:
                outcome = self.target.send(request)
            except Exception as exc:  # noqa: BLE001 - a target fault must not kill the worker
                _log.error("forwarding to %s failed: %r", self.target.name, exc)
                outcome = RETRY
            if isinstance(outcome, bool):
                outcome = SENT if outcome else RETRY
            with self._cond:
                self._busy = False
                self._attempted(end)
                # It left the queue while being sent: dropped past the bound, or counted by a drain that ended.
                left_queue = self._sending_dropped or not self._queue or self._queue[0] is not entry
                counted = left_queue and not self._sending_dropped  # a drain that ended counted it (shutdown)
                self._sending = None
                if outcome.kind != "retry":  # settled one way or another: it leaves the head
                    if not left_queue:
                        self._queue.popleft()
                        self.depth -= spans
                    if failed_in_a_row and outcome.kind == "sent":
                        _log.warning(
                            "forwarding to %s works again after %d failed attempt(s); %d spans still queued", self.target.name, failed_in_a_row, self.depth
                        )
                    failed_in_a_row = 0
                    pause = PAUSE_AFTER_FAILURE_S[0]
                if outcome.kind in ("sent", "rejected") or (outcome.kind == "retry" and self._sending_dropped):
                    self._settle(request)
                if outcome.kind == "sent":
                    self._measure(spans, time.monotonic() - started)
                    self.sent_spans += spans - outcome.rejected_spans
                    if outcome.rejected_spans:
                        self._count_drop(outcome.rejected_spans, "upstream_rejected", f"partial success: {outcome.reason} (traces {', '.join(_trace_ids(request))})")
                    self._cond.notify_all()
                    continue
                if outcome.kind == "too_large":
                    self._settle_too_large(request, spans, size, outcome, left_queue, end)
                    self._cond.notify_all()
                    continue
                if outcome.kind == "rejected":
                    if not counted:
                        self._count_drop(spans, "rejected", f"{outcome.reason}: a permanent error, not retried (traces {', '.join(_trace_ids(request))})")
                    self._cond.notify_all()
                    continue
                # retry
                if self._sending_dropped:  # dropped past the bound while this attempt ran, and it failed
                    self._count_drop(spans, "queue_full")
                self.failures += 1
                failed_in_a_row += 1
                self._on_failure()
                if self._closing:
                    self._cond.notify_all()
                    return
                wait = pause if outcome.retry_after_s is None else min(max(outcome.retry_after_s, 0.0), PAUSE_AFTER_FAILURE_S[1])
                if self._draining:  # a stop's time is short: its attempts follow each other closely (gRPC may still be reconnecting)
                    wait = min(wait, DRAIN_RETRY_PAUSE_S)
                # The exporter logs its own error; this says that nothing is lost yet, and what is held.
                _log.warning(
                    "forwarding %d spans to %s failed (%d in a row); they stay queued (%d/%d spans) and are tried again in %.1fs",
                    spans, self.target.name, failed_in_a_row, self.depth, self.max_spans, wait,
                )
                cut_short = self._pause(wait)
                pause = PAUSE_AFTER_FAILURE_S[0] if cut_short else min(pause * 2, PAUSE_AFTER_FAILURE_S[1])

    def _let_batch_fill(self) -> None:
        """Wait up to ``batch_wait_s`` while the head batch is under the batch sizes and nothing else is queued
        (caller holds the lock): requests put meanwhile are merged into it, so the upstream gets fewer, larger calls."""
        until = time.monotonic() + self.batch_wait_s
        while self.batch_wait_s > 0 and not self._closing and not self._draining and len(self._queue) == 1:
            _, spans, size, _ = self._queue[0]
            remaining = until - time.monotonic()
            if spans >= self._batch_spans or size >= self._batch_bytes or remaining <= 0:
                return
            self._cond.wait(timeout=remaining)

    def _settle_too_large(self, request: Request, spans: int, size: int, outcome: Outcome, left_queue: bool, end: int) -> None:
        """The target refused ``request`` as too large (caller holds the lock; the entry has left the head)."""
        if left_queue:  # dropped past the bound meanwhile (counted now), or counted by a drain that ended
            if self._sending_dropped:
                self._settle(request)
                self._count_drop(spans, "queue_full")
            return
        if spans <= 1:
            self._settle(request)
            span = lazy_spans(lazy_request(encode(request)))[0]
            self._count_drop(1, "too_large", f"{self.target.name} refused {_describe(span)} "
                             f"({len(span)} bytes) on its own ({outcome.reason}): it can never be delivered")
            return
        halves, _ = split_request(lazy_request(encode(request)), max_spans=(spans + 1) // 2)
        # Later batches are merged only up to half the refused size: the upstream's real limit is below it.
        self._batch_bytes = max(MIN_BATCH_BYTES, min(self._batch_bytes, size // 2))
        self._splits.event(
            1, f"last: {spans} spans ({size} bytes), {outcome.reason}; later batches merged up to {self._batch_bytes} bytes; "
            "set this upstream's max_message_bytes to its receive limit to size batches under it",
        )
        for piece, piece_spans, piece_bytes in reversed(halves):
            self._queue.appendleft([piece.SerializeToString(), piece_spans, piece_bytes, end])
            self.depth += piece_spans

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` after a failed attempt (caller holds the lock). New work does not cut the pause
        short, or a busy producer would retry a refusing upstream on every batch; a drain starting does,
        so a shutdown tries at once rather than sleeping through its deadline. True when cut short so."""
        until = time.monotonic() + seconds
        draining = self._draining
        while not self._closing and self._draining == draining:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.wait(timeout=remaining)
        return True

    def count_not_forwarded(self, spans: int, detail: str) -> None:
        """Count ``spans`` that never reached this queue and never will (shutdown), as dropped."""
        if spans:
            with self._cond:
                self._count_drop(spans, "shutdown", detail)

    def drain(self, timeout_s: float) -> bool:
        """Stop taking work once the queue is empty or ``timeout_s`` has passed; True when everything was sent.

        What is still queued then is counted as dropped (``reason=shutdown``) and logged.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._draining = True
            self._cond.notify_all()
            while (self._queue or self._busy) and time.monotonic() < deadline:
                self._cond.wait(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=max(0.1, deadline - time.monotonic()) + 1)
        with self._cond:  # after the join: an attempt under way at the deadline may have delivered
            drained = not self._queue
            left = self.depth
            if not drained:
                traces = sorted({t for entry in self._queue for t in _trace_ids(entry[0])})
                self._count_drop(left, "shutdown", f"still queued at shutdown after the {timeout_s:g}s drain; not forwarded (traces {', '.join(traces[:20])}"
                                 + (f" and {len(traces) - 20} more" if len(traces) > 20 else "") + ")")
                self._queue.clear()
                self.depth = 0
            self._attempted(self.put_spans)
        self._too_large_drops.flush()
        self._splits.flush()
        if not drained:
            _log.error("shutdown: %d spans still queued for %s were not forwarded", left, self.target.name)
        try:
            self.target.close()
        except Exception as exc:  # noqa: BLE001
            _log.error("closing %s failed: %r", self.target.name, exc)
        return drained
