"""An upstream OTLP/gRPC endpoint as a forwarding target, sent through the OpenTelemetry SDK's own
``OTLPSpanExporter`` (its TLS, headers, compression, retries and ``RetryInfo`` delays), and how a failed
export's gRPC code becomes an :class:`~otel_tracefence.service.targets.Outcome` (the OTLP specification's table;
the module docstring of :mod:`otel_tracefence.service.forward` says what each outcome does)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from opentelemetry.exporter.otlp.proto.grpc.exporter import _RETRYABLE_ERROR_CODES as _SDK_RETRYABLE_CODES
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.core.config import UpstreamSettings
from otel_tracefence.core.log_rate import rate_limit_logger
from otel_tracefence.service.otlp_spans import lazy_request, request_span_count
from otel_tracefence.service.targets import RETRY, SENT, Outcome, Request, encode


# Retried by the exporter within one attempt: the SDK's set less RESOURCE_EXHAUSTED, which the OTLP
# specification makes retryable only with a RetryInfo; that case (and every other outcome) is decided here.
RETRYABLE_CODES = frozenset(_SDK_RETRYABLE_CODES - {grpc.StatusCode.RESOURCE_EXHAUSTED})


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

