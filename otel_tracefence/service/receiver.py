"""The OTLP/gRPC trace receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

It acknowledges on receipt: spans are handed to the fence and the call returns
at once; the trace is decided later (root arrived plus the decision wait, or the
maximum wait). Refusals follow the OTLP specification ("OTLP/gRPC Throttling",
"Failures"): ``UNAVAILABLE`` with a ``RetryInfo`` delay for back-pressure, so
clients retry; partial success with ``rejected_spans`` for spans that can never
be accepted (bad ids), the rest of the batch being kept; ``RESOURCE_EXHAUSTED``
(no ``RetryInfo``, so not retried) for a request that alone exceeds the intake
queue's bound, in spans or in bytes. The bound is checked against the request's
encoded size before it is decoded, and its span count before any span is read.
"""

from __future__ import annotations

import collections
import logging
from typing import Any, Callable

import grpc
from google.protobuf import duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from otel_tracefence.service.intake import Intake, IntakeRefusal
from otel_tracefence.service.otlp_spans import MIN_SPAN_BYTES, Origin, OtlpItem, encoded_span_count, invalid_reason, request_span_count, stand_in

_log = logging.getLogger("otel_tracefence.service")


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
    """Receives spans into an :class:`~otel_tracefence.service.intake.Intake` (acknowledged on receipt).

    ``refuse()`` returns a reason to refuse the whole call for now (shutting down,
    a queue near full) or ``None``.
    """

    def __init__(self, intake: Intake, refuse: Callable[[], str | None], retry_delay_s: float, on_rejected=None, on_refused_too_large=None) -> None:
        self._intake = intake
        self._refuse = refuse
        self._retry_delay_s = retry_delay_s
        self._on_rejected = on_rejected or (lambda n: None)
        self._on_refused_too_large = on_refused_too_large or (lambda: None)

    def handler(self) -> grpc.GenericRpcHandler:
        """The ``TraceService`` handler, decoding requests itself: bytes that do not decode (garbage,
        nesting past protobuf's recursion limit of 100) get ``INVALID_ARGUMENT``, which OTLP clients
        do not retry, instead of gRPC's ``INTERNAL``."""
        export = grpc.unary_unary_rpc_method_handler(
            self.export_bytes, response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString
        )
        return grpc.method_handlers_generic_handler("opentelemetry.proto.collector.trace.v1.TraceService", {"Export": export})

    def export_bytes(self, data: bytes, context: grpc.ServicerContext):
        reason = self._refuse()
        if reason is not None:  # before decoding: a refused call costs no more than its bytes
            unavailable(context, reason, self._retry_delay_s)
        self._check(lambda: self._intake.check_size(size=len(data)), context)
        try:
            if len(data) > MIN_SPAN_BYTES * self._intake.max_spans:
                # It may hold more spans than the whole bound: count them first, without building them.
                spans = encoded_span_count(data)
                self._check(lambda: self._intake.check_size(spans=spans), context)
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(data)
        except DecodeError as exc:
            _log.warning("refused an Export that does not decode: %s", exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"not an ExportTraceServiceRequest: {exc}")
        return self._export(request, len(data), context)

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext):
        reason = self._refuse()
        if reason is not None:
            unavailable(context, reason, self._retry_delay_s)
        return self._export(request, request.ByteSize(), context)

    def _check(self, action: Callable[[], Any], context: grpc.ServicerContext) -> Any:
        """Run an intake bound check; a refusal aborts the call: ``RESOURCE_EXHAUSTED`` when the request alone
        exceeds a bound (no RetryInfo: OTLP clients do not retry it), else ``UNAVAILABLE`` with a retry delay."""
        try:
            return action()
        except IntakeRefusal as refusal:
            if refusal.permanent:
                self._on_refused_too_large()
                _log.warning("refused an Export: %s", refusal)
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(refusal))
            unavailable(context, str(refusal), self._retry_delay_s)

    def _export(self, request: trace_service_pb2.ExportTraceServiceRequest, size: int, context: grpc.ServicerContext):
        # The bound counts this request: its room is taken, in spans and bytes, before any span is read.
        reservation = self._check(lambda: self._intake.reserve(request_span_count(request), size), context)
        try:
            rejected = 0
            first_error = ""
            accepted: list[OtlpItem] = []
            stand_ins = []
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    origin = Origin(resource_spans.resource, resource_spans.schema_url, scope_spans.scope, scope_spans.schema_url)
                    for span in scope_spans.spans:
                        problem = invalid_reason(span)
                        if problem is not None:
                            rejected += 1
                            first_error = first_error or f"span {span.span_id.hex() or '?'}: {problem}"
                            view = stand_in(span, problem)
                            if view is not None:
                                stand_ins.append(view)
                            continue
                        accepted.append(OtlpItem(origin, span))
        except BaseException:
            self._intake.release(reservation)
            raise
        self._check(lambda: self._intake.put(accepted, reservation, source=context.peer() or ""), context)
        for view in stand_ins:
            self._intake.stand_in(view)
        response = trace_service_pb2.ExportTraceServiceResponse()
        if rejected:
            self._on_rejected(rejected)
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = f"{rejected} span(s) rejected; first: {first_error}"
            _log.warning("rejected %d span(s): %s", rejected, first_error)
        return response
