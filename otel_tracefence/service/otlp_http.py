"""The OTLP/HTTP trace receiver: ``POST /v1/traces``, as the Collector serves it on port 4318.

An ASGI (Starlette) application onto the transports' one path,
:class:`~otel_tracefence.service.export.TraceExport`; it does only what HTTP adds, following the
OTLP specification ("OTLP/HTTP Request", "OTLP/HTTP Response", "Failures", "OTLP/HTTP Throttling"):

* ``Content-Type``: ``application/x-protobuf`` (binary protobuf) or ``application/json``
  (OTLP/JSON: ids in hex, enums as integers); anything else gets ``415``.
* ``Content-Encoding``: none, ``identity`` or ``gzip``; anything else gets ``415``.
* The body is limited to ``service.max_message_bytes`` as sent and again after gunzip
  ("The server MUST limit the size of the request body ... including after decompression"):
  past it, ``413``; not read further.
* ``Authorization: Bearer <service.bearer_token>`` when a token is set, else ``401``.
* CORS for pages on ``service.http_cors_allowed_origins`` (Starlette's ``CORSMiddleware``), none by default.
* Success and partial success: ``200`` with an ``ExportTraceServiceResponse``; failures: a
  ``google.rpc.Status``; both in the request's own encoding and ``Content-Type``.
* Back-pressure and shutdown: ``503`` with ``Retry-After`` (whole seconds, rounded up) and a
  ``RetryInfo`` detail (the exact delay); a request that alone exceeds a bound: ``413``; a body
  that does not decode: ``400`` with a ``BadRequest`` detail. Only ``503`` is retried by clients.
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Sequence

import anyio
from google.protobuf import duration_pb2, json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from otel_tracefence.service.auth import BearerToken
from otel_tracefence.service.export import ExportRefused, RefusalKind, TraceExport

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"

_REFUSALS = {
    RefusalKind.RETRY_LATER: (503, code_pb2.UNAVAILABLE),
    RefusalKind.TOO_LARGE: (413, code_pb2.RESOURCE_EXHAUSTED),
    RefusalKind.UNDECODABLE: (400, code_pb2.INVALID_ARGUMENT),
}


class _BadBody(Exception):
    """A gzip body that does not decompress."""


def gunzip(data: bytes, limit: int) -> bytes:
    """The decompressed bytes of a gzip body (one member or several, RFC 1952), at most ``limit`` of them.

    Raises ``OverflowError`` when the output would exceed ``limit`` (nothing past it is decompressed), and
    :class:`_BadBody` when it is not gzip or is cut short.
    """
    out: list[bytes] = []
    total = 0
    while data:
        member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            chunk = member.decompress(data, limit - total + 1)
        except zlib.error as exc:
            raise _BadBody(f"the gzip body does not decompress: {exc}") from None
        total += len(chunk)
        if total > limit:
            raise OverflowError(total)
        out.append(chunk)
        if not member.eof:
            raise _BadBody("the gzip body is cut short")
        data = member.unused_data
    return b"".join(out)


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
    and queued at once, off the event loop (``service.max_workers``, as the gRPC receiver's threads): a request
    takes a slot before its body is read, so at most that many bodies are held at once.
    """

    def __init__(
        self, export: TraceExport, *, token: BearerToken, max_body_bytes: int, max_workers: int, cors_allowed_origins: Sequence[str] = ()
    ) -> None:
        self._export = export
        self._token = token
        self._max_body_bytes = max_body_bytes
        self._max_workers = max_workers
        self._limiter: anyio.CapacityLimiter | None = None  # made on the server's own event loop
        # Browsers on the allowed origins may POST spans (preflight answered; the bearer token still checked).
        cors = [Middleware(CORSMiddleware, allow_origins=list(cors_allowed_origins), allow_methods=["POST"], allow_headers=["*"], max_age=7200)]
        self.app = Starlette(routes=[Route(TRACES_PATH, self._traces, methods=["POST"])], middleware=cors if cors_allowed_origins else [])

    async def _traces(self, request: Request) -> Response:
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        answer_in = media_type if media_type in (PROTOBUF, JSON) else PROTOBUF
        if not self._token.allows(request.headers.get("authorization")):
            return _failure(401, code_pb2.UNAUTHENTICATED, "missing or wrong bearer token", answer_in, {"WWW-Authenticate": "Bearer"})
        if media_type not in (PROTOBUF, JSON):
            return _failure(415, code_pb2.INVALID_ARGUMENT, f"Content-Type must be {PROTOBUF} or {JSON}, not {media_type or 'absent'!r}", answer_in)
        encoding = request.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity", "gzip"):
            return _failure(415, code_pb2.INVALID_ARGUMENT, f"Content-Encoding must be gzip or none, not {encoding!r}", answer_in)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_workers)
        try:
            # A slot before the body is read: at most max_workers bodies are held at once, as gRPC's threads bound it.
            async with self._limiter:
                body = await self._read_body(request)
                response = await anyio.to_thread.run_sync(self._export_body, body, encoding == "gzip", media_type, _peer(request))
        except ExportRefused as refusal:
            return _refused(refusal, answer_in)
        return Response(encode(response, media_type), status_code=200, media_type=media_type)

    async def _read_body(self, request: Request) -> bytes:
        """The body as sent, refused (``TOO_LARGE``) past the limit without reading it all."""
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
            chunks.append(chunk)
        return b"".join(chunks)

    def _export_body(self, body: bytes, gzipped: bool, media_type: str, source: str) -> Any:
        if gzipped:
            try:
                body = gunzip(body, self._max_body_bytes)
            except OverflowError:
                raise self._export.too_large(self._past_limit(f"more than {self._max_body_bytes} bytes once decompressed")) from None
            except _BadBody as exc:
                raise ExportRefused(RefusalKind.UNDECODABLE, str(exc), problems=[("body", str(exc))]) from None
        return self._export.export_json(body, source) if media_type == JSON else self._export.export_protobuf(body, source)

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
    """A failure response: a ``google.rpc.Status`` (OTLP "Failures") in ``media_type``."""
    body = status_pb2.Status(code=code, message=message)
    for detail in details:
        body.details.add().Pack(detail)
    return Response(encode(body, media_type), status_code=status, media_type=media_type, headers=headers)


def _peer(request: Request) -> str:
    """The client's connection as the intake's source (``http:host:port``): the intake reads sources in turns."""
    client = request.client
    return f"http:{client.host}:{client.port}" if client else "http"
