"""The OTLP/gRPC trace receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

It acknowledges on receipt: spans are handed to the fence and the call returns
at once; the trace is decided later (root arrived plus the decision wait, or the
maximum wait). The checks, decoding and partial success are the transports' one
path, :mod:`otel_tracefence.service.export`; here refusals become gRPC status
codes, following the OTLP specification ("OTLP/gRPC Throttling", "Failures"):
``UNAVAILABLE`` with a ``RetryInfo`` delay for back-pressure, so clients retry;
``RESOURCE_EXHAUSTED`` (no ``RetryInfo``, so not retried) for a request that
alone exceeds the intake queue's bound, in spans or in bytes;
``INVALID_ARGUMENT`` for bytes that do not decode."""

from __future__ import annotations

import collections

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from otel_tracefence.service.export import ExportRefused, RefusalKind, TraceExport


def unavailable(context: grpc.ServicerContext, message: str, retry_delay_s: float) -> None:
    """Abort with UNAVAILABLE and a RetryInfo delay, in the status details (OTLP spec) and in the
    ``google.rpc.retryinfo-bin`` trailer (read by the OpenTelemetry SDK exporters)."""
    delay = duration_pb2.Duration()
    delay.FromNanoseconds(int(retry_delay_s * 1e9))
    retry_info = error_details_pb2.RetryInfo(retry_delay=delay)
    detail = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message)
    detail.details.add().Pack(retry_info)
    status = rpc_status.to_status(detail)
    # abort_with_status sends the status's own trailing metadata only (it replaces anything set
    # with set_trailing_metadata), so the RetryInfo trailer goes into it beside grpc-status-details-bin.
    trailers = (*status.trailing_metadata, ("google.rpc.retryinfo-bin", retry_info.SerializeToString()))
    context.abort_with_status(_Status(status.code, status.details, trailers))


class _Status(collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    pass


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """The gRPC door onto a :class:`~otel_tracefence.service.export.TraceExport`: it maps refusals to gRPC status codes."""

    def __init__(self, export: TraceExport) -> None:
        self._export = export

    def handler(self) -> grpc.GenericRpcHandler:
        """The ``TraceService`` handler, decoding requests itself: bytes that do not decode (garbage,
        nesting past protobuf's recursion limit of 100) get ``INVALID_ARGUMENT``, which OTLP clients
        do not retry, instead of gRPC's ``INTERNAL``."""
        export = grpc.unary_unary_rpc_method_handler(
            self.export_bytes, response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString
        )
        return grpc.method_handlers_generic_handler("opentelemetry.proto.collector.trace.v1.TraceService", {"Export": export})

    def export_bytes(self, data: bytes, context: grpc.ServicerContext):
        try:
            return self._export.export_protobuf(data, source=context.peer() or "")
        except ExportRefused as refusal:
            abort(context, refusal)

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext):
        try:
            self._export.admit()
            return self._export.accept(request, request.ByteSize(), source=context.peer() or "")
        except ExportRefused as refusal:
            abort(context, refusal)


def abort(context: grpc.ServicerContext, refusal: ExportRefused) -> None:
    """End the call with the status OTLP/gRPC gives the refusal: ``UNAVAILABLE`` with a ``RetryInfo`` delay (retried),
    ``RESOURCE_EXHAUSTED`` without one, ``INVALID_ARGUMENT`` (neither retried)."""
    if refusal.kind is RefusalKind.RETRY_LATER:
        unavailable(context, str(refusal), refusal.retry_delay_s or 0.0)
    code = grpc.StatusCode.RESOURCE_EXHAUSTED if refusal.kind is RefusalKind.TOO_LARGE else grpc.StatusCode.INVALID_ARGUMENT
    context.abort(code, str(refusal))
