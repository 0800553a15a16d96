"""The OTLP/HTTP trace receiver: ``POST /v1/traces``, as the Collector serves it on port 4318.

An ASGI (Starlette) application onto the transports' one path,
:class:`~otel_tracefence.service.export.TraceExport`; it does only what HTTP adds, following the
OTLP specification ("OTLP/HTTP Request", "OTLP/HTTP Response", "Failures", "OTLP/HTTP Throttling"):

* ``Content-Type``: ``application/x-protobuf`` (binary protobuf) or ``application/json``
  (OTLP/JSON: ids in hex, enums as integers); anything else gets ``415``.
* ``Content-Encoding``: none, ``identity`` or ``gzip``; anything else gets ``415``.
* The body is limited to ``service.max_message_bytes`` as sent and again after gunzip
  ("The server MUST limit the size of the request body ... including after decompression"):
  past it, ``413``; not read further. The bodies decompressed at once share ``service.http_inflate_budget_bytes``
  (:class:`InflateBudget`), past which a body gets ``503`` with a retry delay.
* ``Authorization: Bearer <service.bearer_token>`` when a token is set, else ``401`` with ``Connection: close``,
  answered as soon as the header is complete (no byte of the body read); counted and logged as a rate.
* CORS for pages on ``service.http_cors_allowed_origins`` (Starlette's ``CORSMiddleware``), none by default.
* Success and partial success: ``200`` with an ``ExportTraceServiceResponse``; failures: a
  ``google.rpc.Status``; both in the request's own encoding and ``Content-Type``.
* Slow and vanishing clients: a body not received in full within ``service.http_body_timeout_s`` gets ``408``
  (its slot is never taken: a request takes a decoding slot only once its body is read, so slow senders cannot
  stall the others); the bodies being received count against ``max_workers × max_message_bytes`` bytes, past
  which a request gets ``503``; a client that disconnects mid-body is one debug line, counted.
* Back-pressure and shutdown: ``503`` with ``Retry-After`` (whole seconds, rounded up) and a
  ``RetryInfo`` detail (the exact delay); a request that alone exceeds a bound: ``413``; a body
  that does not decode: ``400`` with a ``BadRequest`` detail. Only ``503`` is retried by clients.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import zlib
from typing import Any, Sequence

import anyio
from google.protobuf import duration_pb2, json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from otel_tracefence.core.log_rate import RateLog
from otel_tracefence.service.auth import BearerToken
from otel_tracefence.service.export import ExportRefused, RefusalKind, TraceExport

_log = logging.getLogger("otel_tracefence.service")

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: The answer to a request in neither OTLP encoding (a ``415``, or a ``401`` before it): the Status's message as text,
#: which a person with curl can read, since no OTLP client sends such a request.
TEXT = "text/plain; charset=utf-8"

_REFUSALS = {
    RefusalKind.RETRY_LATER: (503, code_pb2.UNAVAILABLE),
    RefusalKind.TOO_LARGE: (413, code_pb2.RESOURCE_EXHAUSTED),
    RefusalKind.UNDECODABLE: (400, code_pb2.INVALID_ARGUMENT),
}


class _BadBody(Exception):
    """A gzip body that does not decompress."""


INFLATE_STEP = 1 << 20
"""Bytes decompressed at a time: each step's output is counted in the budget before the next one is made."""


class InflateBudget:
    """The decompressed bytes of gzip bodies held at once, across the receiver's decoding threads: each body counts
    its bytes as they are decompressed (:meth:`take`) and gives them back once its request is decoded (:meth:`give`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Count ``size`` more bytes; False (nothing counted) when that would pass the limit."""
        with self._lock:
            if self.held + size > self.limit:
                return False
            self.held += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.held -= size


class _Busy(Exception):
    """The decompression budget is spent: the body is refused for now (retried later), not decompressed further."""


def gunzip(data: bytes, limit: int, budget: InflateBudget | None = None, taken: list[int] | None = None) -> bytes:
    """The decompressed bytes of a gzip body (one member or several, RFC 1952), at most ``limit`` of them.

    Raises ``OverflowError`` when the output would exceed ``limit`` (nothing past it is decompressed), and
    :class:`_BadBody` when it is not gzip or is cut short. With ``budget``, the output is decompressed
    :data:`INFLATE_STEP` bytes at a time, each step counted in it (and in ``taken[0]``, which the caller gives back)
    before the next, and the parts' joined copy too while it is made: :class:`_Busy` when it is spent.
    """
    out: list[bytes] = []
    total = 0
    taken = taken if taken is not None else [0]
    try:
        while data:
            member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            while True:
                step = limit - total + 1 if budget is None else min(INFLATE_STEP, limit - total + 1)
                try:
                    chunk = member.decompress(data, step)
                except zlib.error as exc:
                    raise _BadBody(f"the gzip body does not decompress: {exc}") from None
                total += len(chunk)
                if total > limit:
                    raise OverflowError(total)
                if budget is not None:
                    if not budget.take(len(chunk)):
                        raise _Busy(budget.held)
                    taken[0] += len(chunk)
                out.append(chunk)
                data = member.unconsumed_tail
                if member.eof or not (data or chunk):  # the member's end, or nothing more to come (it is cut short)
                    break
            if not member.eof:
                raise _BadBody("the gzip body is cut short")
            data = member.unused_data
    except BaseException:
        out.clear()  # the parts go now, not once the cyclic collector frees this frame from the exception's traceback
        raise
    if budget is None or len(out) < 2:
        return b"".join(out)
    if not budget.take(total):  # the joined copy is made while the parts are still held: both count, for that moment
        out.clear()
        raise _Busy(budget.held)
    try:
        joined = b"".join(out)
        out.clear()
    finally:
        budget.give(total)
    return joined


def encode(message: Message, media_type: str) -> bytes:
    """``message`` in the request's encoding: binary protobuf, or protobuf's JSON mapping (for a response or a
    ``Status`` it is OTLP/JSON too: neither holds a trace or span id)."""
    if media_type == JSON:
        return json_format.MessageToJson(message, indent=None).encode()
    return message.SerializeToString()


class OtlpHttpReceiver:
    """The ASGI application of the OTLP/HTTP receiver (:attr:`app`).

    ``export``: the one path every transport calls; ``token``: the ingest bearer token; ``max_body_bytes``: the
    largest body read, before and after gunzip (``service.max_message_bytes``); ``cors_allowed_origins``: web origins
    whose pages may send spans from a browser (``service.http_cors_allowed_origins``; none by default); ``max_workers``: requests decoded
    and queued at once, off the event loop (``service.max_workers``, as the gRPC receiver's threads).
    ``body_timeout_s``: the longest a body may take to arrive in full (``service.http_body_timeout_s``), past it ``408``.

    A request takes its decoding slot only once its body is read, so clients that send their bodies slowly (or never)
    hold no slot. The bytes of the bodies being received and held are bounded instead: at most ``max_workers ×
    max_body_bytes`` at once (the memory ceiling the slots gave before), counted as they arrive; a request whose
    bytes would pass it gets ``503`` with a retry delay. :attr:`disconnects` counts clients gone mid-body.
    """

    def __init__(
        self,
        export: TraceExport,
        *,
        token: BearerToken,
        max_body_bytes: int,
        max_workers: int,
        cors_allowed_origins: Sequence[str] = (),
        body_timeout_s: float = 30.0,
        retry_delay_s: float = 1.0,
        inflate_budget_bytes: int = 0,
        routes: Sequence[Route] = (),
    ) -> None:
        self._export = export
        self._token = token
        self._max_body_bytes = max_body_bytes
        self._max_workers = max_workers
        self._body_timeout_s = body_timeout_s
        self._retry_delay_s = retry_delay_s
        self._body_budget = max_workers * max_body_bytes  # bytes of bodies received and held at once
        self._body_bytes = 0  # changed on the event loop only
        # Decompressed bytes of gzip bodies held at once (decoding threads): never less than one whole body and its
        # joined copy, so that a body within max_message_bytes always fits once the others are done.
        self._inflating = InflateBudget(max(2 * max_body_bytes, inflate_budget_bytes or 4 * max_body_bytes))
        self.disconnects = 0
        self._unauthenticated = RateLog(_log, "refused %d OTLP/HTTP request(s) in %.0fs without the bearer token (401, connection closed)")
        self._reading: set[anyio.CancelScope] = set()  # body reads under way (on the event loop)
        self._loop: asyncio.AbstractEventLoop | None = None  # the server's, once it served a request
        self._limiter: anyio.CapacityLimiter | None = None  # made on the server's own event loop
        # Browsers on the allowed origins may POST spans (preflight answered; the bearer token still checked).
        cors = [Middleware(CORSMiddleware, allow_origins=list(cors_allowed_origins), allow_methods=["POST"], allow_headers=["*"], max_age=7200)]
        # ``routes``: more, beside it (``/metrics``, ``/healthz``, ``/readyz``: operations_http.py), with no token.
        self.app = Starlette(routes=[Route(TRACES_PATH, self._traces, methods=["POST"]), *routes], middleware=cors if cors_allowed_origins else [])

    async def _traces(self, request: Request) -> Response:
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        answer_in = media_type if media_type in (PROTOBUF, JSON) else TEXT
        if not self._token.allows(request.headers.get("authorization")):  # at once: the header is complete, no body read
            self._unauthenticated.event()
            headers = {"WWW-Authenticate": "Bearer", "Connection": "close"}  # its descriptor is given back at once
            return _failure(401, code_pb2.UNAUTHENTICATED, "missing or wrong bearer token", answer_in, headers)
        if media_type not in (PROTOBUF, JSON):
            return _failure(415, code_pb2.INVALID_ARGUMENT, f"Content-Type must be {PROTOBUF} or {JSON}, not {media_type or 'absent'!r}", answer_in)
        encoding = request.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity", "gzip"):
            return _failure(415, code_pb2.INVALID_ARGUMENT, f"Content-Encoding must be gzip or none, not {encoding!r}", answer_in)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_workers)
        taken = [0]  # bytes of this body counted in the budget, given back however the request ends
        try:
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            with anyio.CancelScope() as reading:  # cancelled by stop_reading(): a stop answers bodies still coming
                self._reading.add(reading)
                try:
                    with anyio.fail_after(self._body_timeout_s):
                        body = await self._read_body(request, taken)
                finally:
                    self._reading.discard(reading)
            if reading.cancelled_caught:
                raise ExportRefused(RefusalKind.RETRY_LATER, "tracefence is shutting down; retry against another replica or later", retry_delay_s=self._retry_delay_s)
            async with self._limiter:  # only once the body is here: a slow sender holds no slot
                response = await anyio.to_thread.run_sync(self._export_body, body, encoding == "gzip", media_type, _peer(request))
        except ExportRefused as refusal:
            return _refused(refusal, answer_in)
        except TimeoutError:
            message = f"the request body did not arrive in full within {self._body_timeout_s:g}s (service.http_body_timeout_s)"
            return _failure(408, code_pb2.DEADLINE_EXCEEDED, message, answer_in, {"Connection": "close"})
        except ClientDisconnect:  # nobody to answer: one line, no traceback (a client gone, or held at a stop)
            self.disconnects += 1
            _log.debug("OTLP/HTTP client %s disconnected before its body was read; %d so far", _peer(request), self.disconnects)
            return Response(status_code=400)
        finally:
            self._body_bytes -= taken[0]
        return Response(encode(response, media_type), status_code=200, media_type=media_type)

    def stop_reading(self, after_s: float) -> None:
        """From any thread, at a stop: the bodies still arriving ``after_s`` seconds from now are not waited for;
        their requests get ``503`` (retried elsewhere or later), so the server's stop cancels none of them."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(lambda: loop.call_later(after_s, lambda: [scope.cancel() for scope in list(self._reading)]))

    async def _read_body(self, request: Request, taken: list[int]) -> bytes:
        """The body as sent, refused (``TOO_LARGE``) past the limit without reading it all, and (``RETRY_LATER``)
        when its bytes would take the bodies held at once past their budget. ``taken[0]``: the bytes counted in the
        budget so far (the caller gives them back)."""
        limit = self._max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._export.too_large(self._past_limit(f"{int(declared)} bytes"))
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise self._export.too_large(self._past_limit(f"more than {limit} bytes"))
            if self._body_bytes + len(chunk) > self._body_budget:
                raise ExportRefused(
                    RefusalKind.RETRY_LATER,
                    f"the OTLP/HTTP bodies being received hold {self._body_bytes} bytes, the most held at once "
                    f"(max_workers × max_message_bytes = {self._body_budget}); retry later",
                    retry_delay_s=self._retry_delay_s,
                )
            self._body_bytes += len(chunk)
            taken[0] += len(chunk)
            chunks.append(chunk)
        return b"".join(chunks)

    def _export_body(self, body: bytes, gzipped: bool, media_type: str, source: str) -> Any:
        taken = [0]  # decompressed bytes counted in the budget, given back once the request is decoded
        try:
            if gzipped:
                try:
                    body = gunzip(body, self._max_body_bytes, self._inflating, taken)
                except OverflowError:
                    raise self._export.too_large(self._past_limit(f"more than {self._max_body_bytes} bytes once decompressed")) from None
                except _BadBody as exc:
                    raise ExportRefused(RefusalKind.UNDECODABLE, str(exc), problems=[("body", str(exc))]) from None
                except _Busy as busy:
                    raise ExportRefused(
                        RefusalKind.RETRY_LATER,
                        f"the gzip bodies being decompressed hold {busy.args[0]} bytes, the most held at once "
                        f"(service.http_inflate_budget_bytes = {self._inflating.limit}); retry later",
                        retry_delay_s=self._retry_delay_s,
                    ) from None
            return self._export.export_json(body, source) if media_type == JSON else self._export.export_protobuf(body, source)
        except ExportRefused as refusal:
            # Raised without the frames below (each holds the body) nor the exception it replaced (its frames, the
            # gzip parts): the refusal can outlive this call in a reference cycle (an asyncio future's) until the
            # cyclic collector runs, while the budget is given back now.
            body = b""
            refusal.__context__ = None
            raise refusal.with_traceback(None) from None
        finally:
            self._inflating.give(taken[0])

    def _past_limit(self, size: str) -> str:
        return (
            f"the request body is {size}, past the limit of {self._max_body_bytes} bytes (service.max_message_bytes); "
            "send it in smaller batches"
        )


def _refused(refusal: ExportRefused, media_type: str) -> Response:
    status, code = _REFUSALS[refusal.kind]
    details: list[Message] = []
    headers: dict[str, str] = {}
    if refusal.kind is RefusalKind.RETRY_LATER and refusal.retry_delay_s is not None:
        # Retry-After takes whole seconds (RFC 9110 delay-seconds); RetryInfo keeps the exact delay.
        headers["Retry-After"] = str(max(1, math.ceil(refusal.retry_delay_s)))
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(refusal.retry_delay_s * 1e9))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    if refusal.problems:
        violations = [error_details_pb2.BadRequest.FieldViolation(field=field, description=text) for field, text in refusal.problems]
        details.append(error_details_pb2.BadRequest(field_violations=violations))
    return _failure(status, code, str(refusal), media_type, headers, details)


def _failure(status: int, code: int, message: str, media_type: str, headers: dict[str, str] | None = None, details: tuple[Message, ...] | list[Message] = ()) -> Response:
    """A failure response: a ``google.rpc.Status`` (OTLP "Failures") in ``media_type``; in :data:`TEXT`, its message."""
    if media_type == TEXT:
        return Response(message + "\n", status_code=status, media_type=media_type, headers=headers)
    body = status_pb2.Status(code=code, message=message)
    for detail in details:
        body.details.add().Pack(detail)
    return Response(encode(body, media_type), status_code=status, media_type=media_type, headers=headers)


def _peer(request: Request) -> str:
    """The client's connection as the intake's source (``http:host:port``): the intake reads sources in turns."""
    client = request.client
    return f"http:{client.host}:{client.port}" if client else "http"
