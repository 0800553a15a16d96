"""Forwarding over OTLP/HTTP: an upstream target beside the OTLP/gRPC one (``forward.UpstreamTarget``).

Sent through the OpenTelemetry SDK's own OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-http``): its TLS
(``certificate_file``, client certificate and key), headers, compression, and its retries within ``timeout_s``
(429, 502, 503, 504 and connection errors, waiting a ``Retry-After`` when the server gives one and it fits the
deadline). The request bytes go out as the service encoded them (binary protobuf, ``POST .../v1/traces``), never
re-encoded. What the upstream answered last decides what becomes of the batch, as :func:`classify_http` says,
into the same :class:`~otel_tracefence.service.forward.Outcome` the gRPC target gives, so the forwarder's queue,
pauses (a ``Retry-After`` longer than the exporter's deadline is the pause before the next attempt), splitting and
drop counts are the same on both transports.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from otel_tracefence.core.config import UPSTREAM_PATH, UpstreamSettings
from otel_tracefence.service.targets import RETRY, SENT, Outcome, Request, encode

# The OTLP specification's retryable HTTP status codes ("OTLP/HTTP Throttling", "Failures"): the SDK's own set.
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
TOO_LARGE_STATUS = 413  # Payload Too Large: the upstream's request size limit; the batch is split


def http_url(settings: UpstreamSettings, path: str = UPSTREAM_PATH) -> str:
    """The URL requests to ``settings.endpoint`` go to for the signal ``path`` (``/v1/traces``, ``/v1/metrics``,
    ``/v1/logs``): with no scheme, ``https://`` unless ``insecure`` is true; a path already ending in ``path`` is
    kept, any other path gets ``path`` appended (as ``OTEL_EXPORTER_OTLP_ENDPOINT`` does)."""
    endpoint = settings.endpoint.strip()
    if "://" not in endpoint:
        endpoint = ("http://" if settings.insecure else "https://") + endpoint
    parts = urllib.parse.urlsplit(endpoint)
    base = parts.path.rstrip("/")
    for signal in ("/v1/traces", "/v1/metrics", "/v1/logs"):
        if base.endswith(signal):  # a signal's own URL: the others sit beside it
            base = base[: -len(signal)]
            break
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, base + path, "", ""))


def classify_http(status: int | None, retry_after_s: float | None, reason: str) -> Outcome:
    """The outcome of a failed OTLP/HTTP export from the last answer: ``status`` (None: no answer, a connection
    error or timeout) and the ``Retry-After`` it carried (seconds). Retryable codes and no answer: ``retry``;
    413: ``too_large``; any other status: ``rejected`` (permanent)."""
    if status is None:
        return Outcome("retry", reason or "no answer")
    if status in RETRYABLE_STATUS:
        return Outcome("retry", reason, retry_after_s)
    if status == TOO_LARGE_STATUS:
        return Outcome("too_large", reason)
    return Outcome("rejected", reason)


class _RecordingTransport:
    """The SDK exporter's HTTP transport, keeping the last result (status, headers, body) for :func:`classify_http`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.last: Any = None

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        result = self._inner.request(method, url, **kwargs)
        self.last = result
        return result

    def close(self) -> None:
        self._inner.close()

    def is_connection_error(self, exception: Exception | None) -> bool:
        return self._inner.is_connection_error(exception)


def sdk_http_client(settings: UpstreamSettings, url: str, exporter_class: Any) -> tuple[Any, Any, _RecordingTransport]:
    """``exporter_class`` (one of the SDK's OTLP/HTTP exporters: spans, metrics or logs) built for ``settings`` at
    ``url``, its HTTP client (which sends bytes, with the exporter's retries) and the transport recording the last
    answer. Raises :class:`RuntimeError` if the SDK's exporter no longer has the client this relies on."""
    from opentelemetry.exporter.otlp.proto.http import Compression

    exporter = exporter_class(
        endpoint=url,
        certificate_file=settings.certificate_file,
        client_key_file=settings.client_key_file,
        client_certificate_file=settings.client_certificate_file,
        headers=dict(settings.headers) or None,
        timeout=settings.timeout_s,
        compression=Compression.Gzip if settings.compression == "gzip" else Compression.NoCompression,
    )
    client = getattr(exporter, "_client", None)
    if client is None or not hasattr(client, "_transport") or not callable(getattr(client, "export", None)):
        raise RuntimeError(f"{exporter_class.__module__}.{exporter_class.__name__} has no HTTP client to send encoded requests through (SDK version?)")
    recorder = _RecordingTransport(client._transport)
    client._transport = recorder
    return exporter, client, recorder


def last_answer(recorder: _RecordingTransport, result: Any) -> tuple[int | None, float | None, str]:
    """``(status, retry_after_s, reason)`` of the last answer the recorder saw, for :func:`classify_http`."""
    from opentelemetry.exporter.otlp.common.http import _extract_retry_after

    last = recorder.last
    status = getattr(result, "status_code", None)
    if last is None or last.status_code is None:
        error = getattr(result, "error", None) or (last.error if last is not None else None)
        return status, None, repr(error) if error is not None else "no answer"
    body = ""
    try:
        body = last.content()[:300].decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - the body only adds to the log line
        pass
    return last.status_code, _extract_retry_after(last), f"HTTP {last.status_code} {last.reason or ''}".rstrip() + (f": {body}" if body.isprintable() and body else "")


class HttpUpstreamTarget:
    """An upstream OTLP/HTTP endpoint (``protocol: http/protobuf``), a forward target as ``UpstreamTarget`` is.

    ``max_message_bytes``: the largest request sent (default: the upstream's ``max_message_bytes``); the forwarder
    sizes batches under it, and splits a batch the upstream refuses with 413.
    """

    def __init__(self, settings: UpstreamSettings, max_message_bytes: int | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

        self.name = settings.endpoint
        self.url = http_url(settings)
        self.max_message_bytes = max_message_bytes or settings.max_message_bytes
        self._exporter, self._client, self._recorder = sdk_http_client(settings, self.url, HttpSpanExporter)

    def send(self, request: Request) -> Outcome:
        """Send one request (encoded bytes, merged parts, or a message) through the SDK's HTTP client."""
        self._recorder.last = None
        result = self._client.export(encode(request))
        if result.success:
            return _partial_success(self._recorder.last)
        if result.status_code is None and result.error is None and self._recorder.last is None:
            return RETRY  # the exporter gave up without a call (shut down): keep the batch
        return classify_http(*last_answer(self._recorder, result))

    def close(self) -> None:
        self._exporter.shutdown()


def _partial_success(answer: Any) -> Outcome:
    """A 2xx answer's OTLP partial success (an ``ExportTraceServiceResponse`` in its body), if any."""
    try:
        response = ExportTraceServiceResponse.FromString(answer.content() if answer is not None else b"")
    except Exception:  # noqa: BLE001 - a body that is no response (JSON, text, empty) says nothing was refused
        return SENT
    partial = response.partial_success
    if partial.rejected_spans:
        return Outcome("sent", partial.error_message, rejected_spans=partial.rejected_spans)
    return SENT


def upstream_target(upstream: UpstreamSettings, protocol: str) -> Any:
    """The forward target for ``upstream`` over ``protocol`` (``grpc`` or ``http/protobuf``; see
    ``ServiceSettings.protocol_of``). Raises ``ValueError`` for another protocol."""
    if protocol == "grpc":
        from otel_tracefence.service.upstream_grpc import UpstreamTarget

        return UpstreamTarget(upstream)
    if protocol == "http/protobuf":
        return HttpUpstreamTarget(upstream)
    raise ValueError(f"upstream {upstream.endpoint}: protocol {protocol!r}: expected grpc or http/protobuf")
