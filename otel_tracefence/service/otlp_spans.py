"""OTLP protobuf spans as the service carries them: each with the resource and scope it came with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_tracefence.normalize import SpanView


@dataclass(eq=False, slots=True)
class Origin:
    """The resource and instrumentation scope of a ``ScopeSpans`` (shared by its spans, compared by identity)."""

    resource: Resource
    resource_schema_url: str
    scope: InstrumentationScope
    scope_schema_url: str

    @property
    def service_name(self) -> str:
        for kv in self.resource.attributes:
            if kv.key == "service.name":
                return kv.value.string_value
        return ""


@dataclass(eq=False, slots=True)
class OtlpItem:
    """One received span with its origin. The service owns the span and annotates it in place."""

    origin: Origin
    span: Span


def any_value(value: Any) -> AnyValue:
    """A Python value (str, bool, int, float, list of those) as an OTLP ``AnyValue``."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, (list, tuple)):
        out = AnyValue()
        out.array_value.values.extend(any_value(v) for v in value)
        return out
    return AnyValue(string_value=str(value))


_BUILT: dict[tuple, list[KeyValue]] = {}  # trace-level attribute sets are few: build their KeyValues once


def _key_values(extra: dict[str, Any]) -> list[KeyValue]:
    key = tuple(extra.items())
    try:
        built = _BUILT.get(key)
    except TypeError:  # list values (a step's reasons): particular to one span
        return [KeyValue(key=k, value=any_value(v)) for k, v in extra.items()]
    if built is None:
        built = [KeyValue(key=k, value=any_value(v)) for k, v in extra.items()]
        if len(_BUILT) >= 64:
            _BUILT.clear()
        _BUILT[key] = built
    return built


def set_attributes(span: Span, extra: dict[str, Any], present: Any = None) -> None:
    """Put ``extra`` on the span, replacing attributes of the same key (a span may pass two fences).

    ``present``: the span's attribute keys when the caller has them, to skip the scan for keys to replace.
    """
    if not extra:
        return
    if present is None or any(key in present for key in extra):
        existing = [i for i, kv in enumerate(span.attributes) if kv.key in extra]
        for index in reversed(existing):
            del span.attributes[index]
    span.attributes.extend(_key_values(extra))


def annotate_item(item: OtlpItem | None, view: SpanView, extra: dict[str, Any]) -> OtlpItem | None:
    """The span with ``extra`` attributes set in place; ``None`` (a span that stood in its trace
    for planning but is not forwarded: it was rejected) stays ``None``."""
    if item is None:
        return None
    set_attributes(item.span, extra, view.attributes)
    return item


def stand_in(span: Span, problem: str) -> SpanView | None:
    """The view that stands in its trace for a span refused for ``problem`` (its ids): its trace still
    holds a tool call that may have been this span, so it is planned with a ``review`` step for it,
    as ``tracefence plan`` plans it. ``None`` when not even its trace id can be read."""
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return None
    field = problem.split(" ", 1)[0]
    return SpanView(span.trace_id.hex(), span.span_id.hex() or "(none)", span.name, {}, start_time_unix_nano=span.start_time_unix_nano,
                    unreadable=(field, problem))


def to_request(items: Iterable[OtlpItem]) -> tuple[ExportTraceServiceRequest, int]:
    """Regroup spans into one request, one ``ResourceSpans``/``ScopeSpans`` per origin; and the span count."""
    request = ExportTraceServiceRequest()
    by_origin: dict[int, Any] = {}
    count = 0
    for item in items:
        if item is None:  # a refused span that stood in its trace: never forwarded
            continue
        scope_spans = by_origin.get(id(item.origin))
        if scope_spans is None:
            resource_spans = request.resource_spans.add()
            resource_spans.resource.CopyFrom(item.origin.resource)
            resource_spans.schema_url = item.origin.resource_schema_url
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.CopyFrom(item.origin.scope)
            scope_spans.schema_url = item.origin.scope_schema_url
            by_origin[id(item.origin)] = scope_spans
        scope_spans.spans.append(item.span)
        count += 1
    return request, count


def request_span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def _span_counter():
    """A message class shaped like ``ExportTraceServiceRequest`` whose spans are left as bytes: decoding it
    counts the spans of an encoded request without building them (about the request's size in memory, where
    a full decode of tiny spans takes several times that)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="tracefence_span_count.proto", package="tracefence.internal.count", syntax="proto3")
    scope = proto.message_type.add(name="ScopeSpans")
    scope.field.add(name="spans", number=2, type=F.TYPE_BYTES, label=F.LABEL_REPEATED)
    resource = proto.message_type.add(name="ResourceSpans")
    resource.field.add(name="scope_spans", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".tracefence.internal.count.ScopeSpans")
    request = proto.message_type.add(name="Request")
    request.field.add(name="resource_spans", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".tracefence.internal.count.ResourceSpans")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tracefence.internal.count.Request"))


_SpanCounter = _span_counter()
MIN_SPAN_BYTES = 30  # the smallest valid span on the wire: a trace id and a span id, their tags and its frame (smaller, invalid
# spans only escape this early count; the full count before queueing still refuses them)


def encoded_span_count(data: bytes) -> int:
    """The number of spans in an encoded ``ExportTraceServiceRequest``, without decoding the spans.
    Raises ``google.protobuf.message.DecodeError`` for bytes that are not one."""
    request = _SpanCounter.FromString(data)
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


_FRAME = 6  # at most a one-byte tag and a five-byte length in front of an embedded message


def split_request(
    request: ExportTraceServiceRequest, *, max_bytes: int | None = None, max_spans: int | None = None
) -> tuple[list[tuple[ExportTraceServiceRequest, int, int]], list[Span]]:
    """Cut ``request`` into requests of at most ``max_bytes`` serialized bytes and ``max_spans`` spans, in span order,
    each span keeping its resource and scope.

    Returns ``(pieces, oversized)``: pieces as ``(request, spans, bytes)`` (``bytes`` an upper bound of the
    serialized size), and the spans that alone, with their resource and scope, exceed ``max_bytes``. The pieces
    share no message with ``request`` (copies).
    """
    pieces: list[tuple[ExportTraceServiceRequest, int, int]] = []
    oversized: list[Span] = []
    current = ExportTraceServiceRequest()
    spans = size = 0
    group: Any = None  # the ScopeSpans of `current` the next span of the same origin goes into

    def flush() -> None:
        nonlocal current, spans, size, group
        if spans:
            pieces.append((current, spans, size))
        current, spans, size, group = ExportTraceServiceRequest(), 0, 0, None

    for resource_spans in request.resource_spans:
        resource_head = ResourceSpans(resource=resource_spans.resource, schema_url=resource_spans.schema_url).ByteSize() + _FRAME
        for scope_spans in resource_spans.scope_spans:
            scope_head = ScopeSpans(scope=scope_spans.scope, schema_url=scope_spans.schema_url).ByteSize() + _FRAME
            group = None  # a new origin opens a new ResourceSpans/ScopeSpans
            for span in scope_spans.spans:
                span_size = span.ByteSize() + _FRAME
                if max_bytes is not None and resource_head + scope_head + span_size > max_bytes:
                    oversized.append(span)
                    continue
                opening = 0 if group is not None else resource_head + scope_head
                if spans and (
                    (max_spans is not None and spans >= max_spans) or (max_bytes is not None and size + opening + span_size > max_bytes)
                ):
                    flush()
                    opening = resource_head + scope_head
                if group is None:
                    added = current.resource_spans.add(resource=resource_spans.resource, schema_url=resource_spans.schema_url)
                    group = added.scope_spans.add(scope=scope_spans.scope, schema_url=scope_spans.schema_url)
                group.spans.append(span)
                spans += 1
                size += opening + span_size
    flush()
    return pieces, oversized


def invalid_reason(span: Span) -> str | None:
    """Why a span can never be accepted (OTLP: trace id 16 bytes, span id 8 bytes, neither all zero), or ``None``."""
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return "trace_id must be 16 bytes and not all zero"
    if len(span.span_id) != 8 or not any(span.span_id):
        return "span_id must be 8 bytes and not all zero"
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return "parent_span_id must be empty or 8 bytes"
    return None


__all__: Sequence[str] = ["Origin", "OtlpItem", "annotate_item", "invalid_reason", "request_span_count", "set_attributes", "split_request", "to_request"]
