"""OTLP trace messages whose spans, resources and scopes stay ``bytes``: the service's wire types.

Protobuf encodes an embedded message and a ``bytes`` field alike (wire type 2, a
length and the bytes), so a message class declared with the OTLP field numbers but
``bytes`` where OTLP has ``Span``, ``Resource`` or ``InstrumentationScope`` decodes
an ``ExportTraceServiceRequest`` without building its spans, and encodes one from
held span bytes (protobuf's own encoder, nothing hand-framed). The field numbers
are those of ``opentelemetry/proto/collector/trace/v1/trace_service.proto`` and
``opentelemetry/proto/trace/v1/trace.proto``:

* ``Request`` = ``ExportTraceServiceRequest``: ``resource_spans`` 1;
* ``ResourceSpans``: ``resource`` 1, ``scope_spans`` 2, ``schema_url`` 3;
* ``ScopeSpans``: ``scope`` 1, ``spans`` 2, ``schema_url`` 3;
* ``SpanHead``, a ``Span`` without its attributes, events and links: ``trace_id`` 1,
  ``span_id`` 2, ``parent_span_id`` 4, ``name`` 5, ``kind`` 6, ``start_time_unix_nano`` 7,
  ``end_time_unix_nano`` 8, ``status`` 15 (``message`` 2, ``code`` 3), ``flags`` 16,
  ``dropped_attributes_count`` 10, ``dropped_events_count`` 12 (every other field is skipped, and kept as an unknown field). Enums are ``int32``:
  the same varint on the wire, and OTLP's enums are open (an unknown value reads as itself);
* ``SpanBody``, a ``SpanHead`` with ``attributes`` 9 and ``events`` 11 as ``repeated bytes`` (each
  ``KeyValue`` and ``Event`` left encoded).

The lazy types are proto2, so ``resource`` and ``scope`` keep presence: they are
always set, as ``to_request`` always set the full messages. Strings are left as
``bytes`` too (``schema_url``): nothing here decodes them.

Protobuf's merge rules (concatenating two encodings of a message merges them; a
repeated field's elements are appended) make annotating a span a concatenation:
``span_bytes + Span(attributes=[...]).SerializeToString()``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "tracefence.internal.lazy"


def _message_classes() -> dict[str, Any]:  # protobuf message classes made at run time
    F = descriptor_pb2.FieldDescriptorProto
    lazy = descriptor_pb2.FileDescriptorProto(name="tracefence_lazy_otlp.proto", package=_PACKAGE, syntax="proto2")

    def field(message, name: str, number: int, kind: int, *, repeated: bool = False, type_name: str = "") -> None:
        label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
        message.field.add(name=name, number=number, type=kind, label=label, **({"type_name": f".{_PACKAGE}.{type_name}"} if type_name else {}))

    scope = lazy.message_type.add(name="ScopeSpans")
    field(scope, "scope", 1, F.TYPE_BYTES)
    field(scope, "spans", 2, F.TYPE_BYTES, repeated=True)
    field(scope, "schema_url", 3, F.TYPE_BYTES)
    resource = lazy.message_type.add(name="ResourceSpans")
    field(resource, "resource", 1, F.TYPE_BYTES)
    field(resource, "scope_spans", 2, F.TYPE_MESSAGE, repeated=True, type_name="ScopeSpans")
    field(resource, "schema_url", 3, F.TYPE_BYTES)
    request = lazy.message_type.add(name="Request")
    field(request, "resource_spans", 1, F.TYPE_MESSAGE, repeated=True, type_name="ResourceSpans")

    # proto3, as OTLP is: strings are checked as UTF-8 when parsed, as the full Span's are.
    head = descriptor_pb2.FileDescriptorProto(name="tracefence_lazy_span_head.proto", package=_PACKAGE, syntax="proto3")
    status = head.message_type.add(name="Status")
    status.field.add(name="message", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    status.field.add(name="code", number=3, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    span = head.message_type.add(name="SpanHead")
    for name, number, kind in (
        ("trace_id", 1, F.TYPE_BYTES), ("span_id", 2, F.TYPE_BYTES), ("parent_span_id", 4, F.TYPE_BYTES), ("name", 5, F.TYPE_STRING),
        ("kind", 6, F.TYPE_INT32), ("start_time_unix_nano", 7, F.TYPE_FIXED64), ("end_time_unix_nano", 8, F.TYPE_FIXED64), ("flags", 16, F.TYPE_FIXED32),
        ("dropped_attributes_count", 10, F.TYPE_UINT32), ("dropped_events_count", 12, F.TYPE_UINT32),
    ):
        span.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    span.field.add(name="status", number=15, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=f".{_PACKAGE}.Status")
    # SpanBody: a SpanHead with each attribute (a KeyValue, 9) and each event (an Event, 11) left encoded.
    body = head.message_type.add(name="SpanBody")
    body.field.extend(span.field)
    body.field.add(name="attributes", number=9, type=F.TYPE_BYTES, label=F.LABEL_REPEATED)
    body.field.add(name="events", number=11, type=F.TYPE_BYTES, label=F.LABEL_REPEATED)

    pool = descriptor_pool.DescriptorPool()
    pool.Add(lazy)
    pool.Add(head)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in ("Request", "ResourceSpans", "ScopeSpans", "SpanHead", "SpanBody")}


_CLASSES = _message_classes()
LazyRequest = _CLASSES["Request"]
"""``ExportTraceServiceRequest`` with every span, resource and scope left as ``bytes``."""
LazyResourceSpans = _CLASSES["ResourceSpans"]
LazyScopeSpans = _CLASSES["ScopeSpans"]
SpanHead = _CLASSES["SpanHead"]
"""A ``Span`` read without its attributes, events and links (its ids, name, kind, times, status, flags)."""
SpanBody = _CLASSES["SpanBody"]
"""A :data:`SpanHead` with ``attributes`` (OTLP field 9) and ``events`` (11) as the encodings of each ``KeyValue``
and ``Event`` (``repeated bytes``): the service converts them itself, an attribute seen before from a cache."""


MIN_SPAN_BYTES = 30  # the smallest valid span on the wire: a trace id and a span id, their tags and its frame (smaller, invalid
# spans only escape this early count; the full count before queueing still refuses them)


def lazy_spans(request) -> list[bytes]:
    """The encoded spans of a :data:`LazyRequest`, in order."""
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def encoded_span_count(data: bytes) -> int:
    """The number of spans in an encoded ``ExportTraceServiceRequest``, without decoding the spans.
    Raises ``google.protobuf.message.DecodeError`` for bytes that are not one."""
    request = LazyRequest.FromString(data)
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def span_key(span: bytes) -> bytes:
    """``trace_id + span_id`` of an encoded span (the persistent queue's key). Raises ``DecodeError``."""
    ids = SpanHead.FromString(span)
    return ids.trace_id + ids.span_id


__all__ = ["MIN_SPAN_BYTES", "LazyRequest", "LazyResourceSpans", "LazyScopeSpans", "SpanBody", "SpanHead", "encoded_span_count", "lazy_spans", "span_key"]
