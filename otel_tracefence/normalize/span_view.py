"""One read-only view of a span, whether it came as OTLP protobuf or from the SDK.

The normalizer reads only :class:`SpanView`, so every door (the span processor,
the OTLP service, the CLI reading OTLP/JSON) gives it the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as OtlpStatus
from opentelemetry.trace import SpanKind, StatusCode

KIND_UNSPECIFIED = "unspecified"
KIND_SERVER = "server"
KIND_CLIENT = "client"
STATUS_UNSET = "unset"
STATUS_OK = "ok"
STATUS_ERROR = "error"

_OTLP_STATUS = {OtlpStatus.STATUS_CODE_UNSET: STATUS_UNSET, OtlpStatus.STATUS_CODE_OK: STATUS_OK, OtlpStatus.STATUS_CODE_ERROR: STATUS_ERROR}
# SpanKind names (OpenTelemetry trace API); OTLP numbers them from UNSPECIFIED = 0, the SDK from INTERNAL = 0.
_OTLP_KIND = ("unspecified", "internal", "server", "client", "producer", "consumer")
_SDK_KIND = {kind: kind.name.lower() for kind in SpanKind}
# OTLP span flags: bit 8 says whether the parent's remoteness is known, bit 9 that it is remote.
_FLAG_PARENT_REMOTE_KNOWN = 0x100
_FLAG_PARENT_REMOTE = 0x200


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    attributes: Mapping[str, Any]


@dataclass(slots=True)
class SpanView:
    """A span's ids (lowercase hex), name, times (Unix nanoseconds), attributes, status and events.

    Treat it as read-only (it is not frozen only because frozen dataclasses are
    several times slower to build, and one is built for every span).

    ``end_time_unix_nano`` is ``None`` for a span that never ended.
    ``status_code`` is ``"unset"``, ``"ok"`` or ``"error"``. ``sequence`` is the
    span's position in its source (file order), used only to break ties. ``kind``
    is the span kind's name in lower case (``"client"``, ``"server"``, ...).
    ``unreadable`` is ``(field, why)`` for a span whose trace id could be read but
    nothing else (an invalid span id, a field that does not parse): it stands in its
    trace as a ``review`` step, since it may have been a tool call.
    """

    trace_id: str
    span_id: str
    name: str
    attributes: Mapping[str, Any]
    parent_span_id: str | None = None
    parent_is_remote: bool = False
    start_time_unix_nano: int = 0
    end_time_unix_nano: int | None = None
    status_code: str = STATUS_UNSET
    status_message: str = ""
    events: Sequence[SpanEvent] = field(default_factory=tuple)
    sequence: int = 0
    duplicate_keys: tuple[str, ...] = ()  # attribute keys the span carried more than once (OTLP allows it on the wire)
    kind: str = KIND_UNSPECIFIED
    unreadable: tuple[str, str] | None = None  # (field, why): a span that could not be read, standing in its trace


def any_value_to_python(value: AnyValue) -> Any:
    """OTLP ``AnyValue`` as a Python value: kvlist → dict, array → list, bytes stay bytes."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "kvlist_value":
        return {kv.key: any_value_to_python(kv.value) for kv in value.kvlist_value.values}
    if kind == "array_value":
        return [any_value_to_python(v) for v in value.array_value.values]
    return getattr(value, kind)


def key_values_to_dict(key_values: Sequence[KeyValue]) -> dict[str, Any]:
    """OTLP attributes as a dict; a repeated key keeps its last value."""
    return {kv.key: any_value_to_python(kv.value) for kv in key_values}


def _duplicates(key_values: Sequence[KeyValue], kept: dict[str, Any]) -> tuple[str, ...]:
    if len(kept) == len(key_values):
        return ()
    seen: set[str] = set()
    return tuple(sorted({kv.key for kv in key_values if kv.key in seen or seen.add(kv.key)}))


def from_otlp(span: OtlpSpan, sequence: int = 0) -> SpanView:
    """View of an OTLP protobuf span (``opentelemetry.proto.trace.v1.Span``).

    A key repeated in the span's attributes keeps its last value here and is
    listed in ``duplicate_keys``: the normalizer refuses to read a tool span
    whose labels say two things.
    """
    parent = span.parent_span_id.hex() or None
    attributes = key_values_to_dict(span.attributes)
    return SpanView(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        name=span.name,
        attributes=attributes,
        parent_span_id=parent,
        parent_is_remote=bool(span.flags & _FLAG_PARENT_REMOTE_KNOWN and span.flags & _FLAG_PARENT_REMOTE),
        start_time_unix_nano=span.start_time_unix_nano,
        end_time_unix_nano=span.end_time_unix_nano or None,
        status_code=_OTLP_STATUS.get(span.status.code, STATUS_ERROR),  # a code OTLP does not define: not ok
        status_message=span.status.message,
        events=tuple(SpanEvent(e.name, key_values_to_dict(e.attributes)) for e in span.events),
        sequence=sequence,
        duplicate_keys=_duplicates(span.attributes, attributes),
        kind=_OTLP_KIND[span.kind] if 0 <= span.kind < len(_OTLP_KIND) else KIND_UNSPECIFIED,
    )


_NO_ATTRIBUTES: Mapping[str, Any] = MappingProxyType({})


def from_otlp_head(span: Any, sequence: int = 0) -> SpanView:
    """View of an OTLP span read without its attributes and events: what :func:`from_otlp` gives, field for
    field, with no attributes (one shared empty read-only mapping), no events and no duplicate keys.

    ``span``: anything with the OTLP ``Span`` fields ``trace_id``, ``span_id``, ``parent_span_id``, ``name``,
    ``kind``, ``start_time_unix_nano``, ``end_time_unix_nano``, ``status`` (``code``, ``message``) and
    ``flags`` (the service's ``SpanHead``). Only for a span holding none of ``conventions.READ_MARKERS``:
    the normalizer reads nothing else of such a span (tests/test_service_bytes.py compares the plans).
    """
    status = span.status
    kind = span.kind
    return SpanView(
        span.trace_id.hex(),
        span.span_id.hex(),
        span.name,
        _NO_ATTRIBUTES,
        span.parent_span_id.hex() or None,
        bool(span.flags & _FLAG_PARENT_REMOTE_KNOWN and span.flags & _FLAG_PARENT_REMOTE),
        span.start_time_unix_nano,
        span.end_time_unix_nano or None,
        _OTLP_STATUS.get(status.code, STATUS_ERROR),  # a code OTLP does not define: not ok
        status.message,
        (),
        sequence,
        kind=_OTLP_KIND[kind] if 0 <= kind < len(_OTLP_KIND) else KIND_UNSPECIFIED,
    )


_SDK_STATUS = {StatusCode.OK: STATUS_OK, StatusCode.ERROR: STATUS_ERROR}


def sdk_attributes(span: Any) -> dict[str, Any]:
    """A finished SDK span's attributes as a plain dict: the SDK's own, not a copy, once they are frozen.

    The SDK keeps them in a ``BoundedAttributes`` whose plain ``dict`` is read
    directly when it is there (ten times faster than iterating the public
    read-only mapping, and this runs for every span). ``Span.end()`` makes that
    mapping immutable (OpenTelemetry Python SDK, ``Span.end``: ``_immutable = True``),
    so the dict of an ended span never changes and is shared, never copied; one
    still mutable is copied. The public mapping is the fallback for any other
    ``ReadableSpan``. The caller must not change the dict it gets.
    """
    bounded = getattr(span, "_attributes", None)
    inner = getattr(bounded, "_dict", None)
    if type(inner) is dict:
        return inner if getattr(bounded, "_immutable", False) is True else dict(inner)
    attributes = span.attributes
    return dict(attributes) if attributes else {}


@lru_cache(maxsize=1)
def _sdk_readable_span() -> type:
    """The SDK's ``ReadableSpan`` class, imported on first use (the CLI and the service never load the SDK's tracer)."""
    from opentelemetry.sdk.trace import ReadableSpan

    return ReadableSpan


def from_readable(span: Any, sequence: int = 0) -> SpanView:
    """View of an SDK span (``opentelemetry.sdk.trace.ReadableSpan``).

    Attributes are read as the SDK's plain dict (:func:`sdk_attributes`): the SDK's
    bounded mapping is slow to probe for the many keys the conventions look for.
    """
    fields = span.__dict__ if type(span) is _sdk_readable_span() else None
    if fields is not None:  # the SDK's own class: its fields read directly, not through its properties
        context, parent, status, events = fields["_context"], fields["_parent"], fields["_status"], fields["_events"]
        name, start, end, kind = fields["_name"], fields["_start_time"], fields["_end_time"], fields["_kind"]
    else:
        context, parent, status, events = span.context, span.parent, span.status, span.events
        name, start, end, kind = span.name, span.start_time, span.end_time, span.kind
    return SpanView(
        format(context.trace_id, "032x"),
        format(context.span_id, "016x"),
        name,
        sdk_attributes(span),
        format(parent.span_id, "016x") if parent is not None else None,
        parent is not None and parent.is_remote,
        start or 0,
        end,
        _SDK_STATUS.get(status.status_code, STATUS_UNSET),
        status.description or "",
        tuple(SpanEvent(e.name, dict(e.attributes) if e.attributes else {}) for e in events) if events else (),
        sequence,
        kind=_SDK_KIND.get(kind, KIND_UNSPECIFIED),
    )
