"""Which spans of a received request the full OTLP types cannot decode, so that they alone are refused.

The service decodes a request as a :data:`~otel_tracefence.service.otlp_bytes.LazyRequest` (its spans,
resources and scopes left as bytes), and checks the whole request once with the full
``ExportTraceServiceRequest`` (upb, in C), which refuses what the lazy types let through: a string that is not
UTF-8 (proto3 strings must be, protobuf's language guide, "Scalar Value Types") and nesting past protobuf's
recursion limit of 100. When that check fails, :func:`sift_undecodable` finds the spans at fault, each checked
at the depth it has in the request (inside a one-span request), so that one bad span is refused in the
partial success and its batch is kept, as the OTLP specification asks of a server that can tell which spans it
rejects ("Partial Success"). A resource or scope that does not decode takes every span under it.

A refused span whose trace id reads stands in its trace as a ``review`` step (as spans with invalid ids do),
one whose trace id does not read stands in the trace of the parent it names (DECISIONS 207):
its trace may have lost a tool call. Its ids are read with :data:`SpanIds` (bytes only, no UTF-8 check).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_tracefence.readers.errors import InputError
from otel_tracefence.service.otlp_bytes import LazyRequest, LazyResourceSpans, LazyScopeSpans


def _span_ids_class() -> Any:  # a protobuf message class made at run time
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="tracefence_lazy_span_ids.proto", package="tracefence.internal.lazy", syntax="proto3")
    ids = proto.message_type.add(name="SpanIds")
    ids.field.add(name="trace_id", number=1, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    ids.field.add(name="span_id", number=2, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    ids.field.add(name="parent_span_id", number=4, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tracefence.internal.lazy.SpanIds"))


SpanIds = _span_ids_class()
"""A ``Span``'s ``trace_id`` (1), ``span_id`` (2) and ``parent_span_id`` (4) only, every other field skipped: readable
whatever the span's strings hold."""

UNDECODABLE = "does not decode as an OTLP {what} (a string that is not UTF-8, or nesting past protobuf's recursion limit of 100)"


def decodes(request: Any) -> bool:
    """Whether a :data:`LazyRequest` decodes as a full ``ExportTraceServiceRequest``."""
    try:
        ExportTraceServiceRequest.FromString(request.SerializeToString())
        return True
    except DecodeError:
        return False


def sift_undecodable(request: Any) -> tuple[Any, list[InputError]]:
    """``request`` (a :data:`LazyRequest` that the full types refuse) without the spans they cannot decode, and
    those spans as errors (``field`` ``span``, ``resource`` or ``scope``; ``trace_id`` set when the span's trace id
    is 16 bytes and not all zero, so that it stands in its trace). Each span is checked with its resource and scope,
    at the depth it has in the request. The kept request shares no message with ``request``."""
    kept = LazyRequest()
    errors: list[InputError] = []
    for resource_spans in request.resource_spans:
        resource_ok = decodes(LazyRequest(resource_spans=[LazyResourceSpans(resource=resource_spans.resource, schema_url=resource_spans.schema_url)]))
        kept_resource = kept.resource_spans.add(resource=resource_spans.resource, schema_url=resource_spans.schema_url)
        for scope_spans in resource_spans.scope_spans:
            head = LazyScopeSpans(scope=scope_spans.scope, schema_url=scope_spans.schema_url)
            scope_ok = resource_ok and decodes(LazyRequest(resource_spans=[LazyResourceSpans(resource=resource_spans.resource, scope_spans=[head])]))
            kept_spans = kept_resource.scope_spans.add(scope=scope_spans.scope, schema_url=scope_spans.schema_url).spans
            for span in scope_spans.spans:
                if scope_ok and decodes(_alone(span)):
                    kept_spans.append(span)
                    continue
                field = "span" if scope_ok else "scope" if resource_ok else "resource"
                errors.append(_refused(span, field))
    return kept, errors


def _alone(span: bytes) -> Any:
    return LazyRequest(resource_spans=[LazyResourceSpans(scope_spans=[LazyScopeSpans(spans=[span])])])


def _refused(span: bytes, field: str) -> InputError:
    try:
        ids = SpanIds.FromString(span)
        trace_id, span_id, parent_span_id = ids.trace_id, ids.span_id, ids.parent_span_id
    except DecodeError:
        trace_id = span_id = parent_span_id = b""
    readable_trace = len(trace_id) == 16 and any(trace_id)
    # With no readable trace id, a readable parent id lets it stand in its parent's trace (DECISIONS 207).
    parent = parent_span_id.hex() if not readable_trace and len(parent_span_id) == 8 and any(parent_span_id) else ""
    return InputError(0, field, UNDECODABLE.format(what=_WHAT[field]), span_id=span_id.hex() or "?", trace_id=trace_id.hex() if readable_trace else "",
                      parent_span_id=parent)  # fmt: skip


_WHAT = {"span": "Span", "scope": "InstrumentationScope (the span's scope)", "resource": "Resource (the span's resource)"}


__all__ = ["SpanIds", "decodes", "sift_undecodable"]
