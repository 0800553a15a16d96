"""One read-only view of a span, whether it came as OTLP protobuf or from the SDK.

The normalizer reads only :class:`SpanView`, so every door (the span processor,
the OTLP service, the CLI reading OTLP/JSON) gives it the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

import cython

from otel_tracefence.core.reprs import fields_repr
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as OtlpStatus
from opentelemetry.trace import SpanKind, Status, StatusCode

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
    dropped_attributes: int = 0  # attributes the producer dropped from this event (OTLP dropped_attributes_count; 375)


@cython.dataclasses.dataclass(repr=False)
@cython.cclass
class SpanView:
    """A span's ids (lowercase hex), name, times (Unix nanoseconds), attributes, status and events.

    Treat it as read-only (it is not frozen only because frozen dataclasses are
    several times slower to build, and one is built for every span).

    A dataclass (``dataclasses.fields`` / ``replace``, ``==`` by value, unhashable, ``repr``) declared with
    Cython's ``cython.dataclasses.dataclass`` on a ``cython.cclass``, as the model's types are
    (docs/DECISIONS.md, 142 and 155): in the compiled engine an extension type whose generated ``__init__``
    sets its fields in C (about 800 instructions against 2,900 for the standard library's slotted
    dataclass); in the pure-Python engine the standard library's dataclass, without ``__slots__``.

    ``end_time_unix_nano`` is ``None`` for a span that never ended.
    ``status_code`` is ``"unset"``, ``"ok"`` or ``"error"``. ``sequence`` is the
    span's position in its source (file order), used only to break ties. ``kind``
    is the span kind's name in lower case (``"client"``, ``"server"``, ...).
    ``dropped_attributes`` / ``dropped_events``: how many attributes and events the producer says it dropped
    (OTLP's ``dropped_*_count``, the SDK's span limits): a span that lost some is not read as complete.
    ``value_length_limit``: the length the producer cuts string attribute values to (the SDK's
    ``max_attribute_length``), ``None`` when there is none or it is not known (OTLP does not carry it).
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
    events: Sequence[SpanEvent] = ()  # a tuple: immutable, so one shared default (a default factory costs a call per view)
    sequence: int = 0
    duplicate_keys: tuple[str, ...] = ()  # attribute keys the span carried more than once (OTLP allows it on the wire)
    kind: str = KIND_UNSPECIFIED
    unreadable: tuple[str, str] | None = None  # (field, why): a span that could not be read, standing in its trace
    dropped_attributes: int = 0  # attributes the producer dropped (OTLP dropped_attributes_count; an SDK span limit)
    dropped_events: int = 0  # events the producer dropped (OTLP dropped_events_count)
    value_length_limit: int | None = None  # the producer's attribute value length limit, when known (the SDK's span limits)
    status_undefined: int | None = None  # a status code OTLP does not define (status_code then says error): held (DECISIONS 305)

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


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


def duplicate_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """The keys given more than once, sorted: a span's ``duplicate_keys`` (OTLP allows a repeated key on the wire)."""
    seen: set[str] = set()
    return tuple(sorted({key for key in keys if key in seen or seen.add(key)}))


def from_otlp(span: OtlpSpan, sequence: int = 0) -> SpanView:
    """View of an OTLP protobuf span (``opentelemetry.proto.trace.v1.Span``).

    A key repeated in the span's attributes keeps its last value here and is
    listed in ``duplicate_keys``: the normalizer refuses to read a tool span
    whose labels say two things.
    """
    attributes = key_values_to_dict(span.attributes)
    duplicates = duplicate_keys(kv.key for kv in span.attributes) if len(attributes) != len(span.attributes) else ()
    events = tuple(SpanEvent(e.name, key_values_to_dict(e.attributes), e.dropped_attributes_count) for e in span.events)
    return from_otlp_head(span, sequence, attributes, events, duplicates)


_NO_ATTRIBUTES: Mapping[str, Any] = MappingProxyType({})


def from_otlp_head(span: Any, sequence: int = 0, attributes: Any = None, events: tuple = (), duplicate_keys: tuple = ()) -> SpanView:
    """View of an OTLP span read without its attributes and events: what :func:`from_otlp` gives, field for
    field, with no attributes (one shared empty read-only mapping), no events and no duplicate keys.

    ``span``: anything with the OTLP ``Span`` fields ``trace_id``, ``span_id``, ``parent_span_id``, ``name``,
    ``kind``, ``start_time_unix_nano``, ``end_time_unix_nano``, ``status`` (``code``, ``message``), ``flags``,
    ``dropped_attributes_count`` and ``dropped_events_count`` (the service's ``SpanHead``). Only for a span holding none of ``read_keys.READ_MARKERS``:
    the normalizer reads nothing else of such a span (tests/service/test_service_bytes.py compares the plans).
    :func:`from_otlp` and the service's full view of span bytes (``otlp_spans.full_view``) pass the ``attributes``
    (a dict), ``events`` and ``duplicate_keys`` they read: every OTLP view takes the span's other fields by this one rule.
    """
    status = span.status
    kind = span.kind
    code = status.code
    status_code = _OTLP_STATUS.get(code)
    return SpanView(
        span.trace_id.hex(),
        span.span_id.hex(),
        span.name,
        _NO_ATTRIBUTES if attributes is None else attributes,
        span.parent_span_id.hex() or None,
        bool(span.flags & _FLAG_PARENT_REMOTE_KNOWN and span.flags & _FLAG_PARENT_REMOTE),
        span.start_time_unix_nano,
        span.end_time_unix_nano or None,
        STATUS_ERROR if status_code is None else status_code,  # a code OTLP does not define: not ok, and held (status_undefined)
        status.message,
        events,
        sequence,
        duplicate_keys=duplicate_keys,
        kind=_OTLP_KIND[kind] if 0 <= kind < len(_OTLP_KIND) else KIND_UNSPECIFIED,
        dropped_attributes=span.dropped_attributes_count,
        dropped_events=span.dropped_events_count,
        status_undefined=None if status_code is not None else code,
    )


_SDK_STATUS = {StatusCode.OK: STATUS_OK, StatusCode.ERROR: STATUS_ERROR}
# The SDK's kinds and status codes are Enum members, whose hash is a Python-level call (``Enum.__hash__``):
# the per-span reads below compare them by identity instead (Enum members are singletons; Enum's ``==`` is identity).
_SDK_KIND_BY_ID = {id(kind): name for kind, name in _SDK_KIND.items()}
_STATUS_ERROR_CODE, _STATUS_OK_CODE = StatusCode.ERROR, StatusCode.OK


def trace_id_hex(trace_id: int) -> str:
    """A trace id (an ``int``, as the OpenTelemetry API holds it) as 32 lowercase hex digits: ``format(trace_id, "032x")``,
    computed as ``int.to_bytes(16).hex()`` (2.5 times cheaper), or by ``format`` for an id that does not fit 16 bytes."""
    try:
        return trace_id.to_bytes(16, "big").hex()
    except (OverflowError, AttributeError):
        return format(trace_id, "032x")


def span_id_hex(span_id: int) -> str:
    """A span id as 16 lowercase hex digits: ``format(span_id, "016x")`` (see :func:`trace_id_hex`)."""
    try:
        return span_id.to_bytes(8, "big").hex()
    except (OverflowError, AttributeError):
        return format(span_id, "016x")


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
    return _attributes_of(getattr(span, "_attributes", None), span)


def _attributes_of(bounded: Any, span: Any) -> dict[str, Any]:
    """:func:`sdk_attributes` of ``span``, whose ``_attributes`` field is ``bounded``."""
    inner = getattr(bounded, "_dict", None)
    if type(inner) is dict:
        return inner if getattr(bounded, "_immutable", False) is True else dict(inner)
    attributes = span.attributes
    return dict(attributes) if attributes else {}


_READABLE_SPAN: list[type] = []  # the SDK's ReadableSpan class, once imported (the CLI and the service never load it)


def _sdk_readable_span() -> type:
    """The SDK's ``ReadableSpan`` class, imported on first use."""
    if not _READABLE_SPAN:
        from opentelemetry.sdk.trace import ReadableSpan

        _READABLE_SPAN.append(ReadableSpan)
    return _READABLE_SPAN[0]


@cython.cfunc
def _sdk_status_name(code: object) -> str:
    """The view's ``status_code`` (``"error"``, ``"ok"`` or ``"unset"``) of an SDK ``StatusCode``, compared by identity."""
    return STATUS_ERROR if code is _STATUS_ERROR_CODE else STATUS_OK if code is _STATUS_OK_CODE else STATUS_UNSET


@cython.cfunc
def _sdk_events(events: Any) -> tuple:
    """An SDK span's events (``opentelemetry.sdk.trace.Event``, a non-empty sequence) as a tuple of :class:`SpanEvent`, their
    attributes copied into plain dicts, with the attributes each dropped (0 when the event does not say)."""
    return tuple(SpanEvent(e.name, dict(e.attributes) if e.attributes else {}, getattr(e, "dropped_attributes", 0) or 0) for e in events)


def from_readable(span: Any, sequence: int = 0, trace_hexes: dict[int, str] | None = None, span_hexes: dict[int, str] | None = None) -> SpanView:
    """View of an SDK span (``opentelemetry.sdk.trace.ReadableSpan``).

    ``trace_hexes`` / ``span_hexes``: ids already written in hex (``int`` id -> :func:`trace_id_hex` /
    :func:`span_id_hex` of it), when the caller keeps them (the span processor, from ``on_start``); the
    span's own id is taken out of ``span_hexes`` (it has ended), its parent's looked up. Missing ids are computed.

    Attributes are read as the SDK's plain dict (:func:`sdk_attributes`): the SDK's
    bounded mapping is slow to probe for the many keys the conventions look for.
    A span of the SDK's own class (what the SDK hands ``on_end``) is read from its fields, not through
    its properties, and its ``SpanContext`` (a ``tuple``: trace id, span id, is remote, ...) by index:
    each property is a Python-level call, and this runs for every span the agent ends.
    """
    readable = _READABLE_SPAN[0] if _READABLE_SPAN else _sdk_readable_span()
    if type(span) is readable:  # the SDK's own class: its fields read directly, not through its properties
        fields = span.__dict__
        context, parent, status, events = fields["_context"], fields["_parent"], fields["_status"], fields["_events"]
        name, start, end, kind = fields["_name"], fields["_start_time"], fields["_end_time"], fields["_kind"]
        bounded = fields["_attributes"]
        inner = getattr(bounded, "_dict", None)  # _attributes_of, inline
        if type(inner) is dict and getattr(bounded, "_immutable", False) is True:
            attributes = inner
        else:
            attributes = _attributes_of(bounded, span)
        lost_attributes, lost_events = getattr(bounded, "dropped", 0), getattr(events, "dropped", 0)  # BoundedAttributes, BoundedList
        length_limit = getattr(bounded, "max_value_len", None)
    else:
        context, parent, status, events = span.context, span.parent, span.status, span.events
        name, start, end, kind = span.name, span.start_time, span.end_time, span.kind
        attributes = sdk_attributes(span)
        lost_attributes, lost_events = getattr(span, "dropped_attributes", 0), getattr(span, "dropped_events", 0)
        length_limit = getattr(getattr(span, "_attributes", None), "max_value_len", None)
    try:  # trace_id_hex and span_id_hex, inline: three calls fewer for every span the agent ends
        if isinstance(context, tuple):  # SpanContext: (trace_id, span_id, is_remote, ...), read by index
            if span_hexes is not None and trace_hexes is not None:
                trace_id, span_id = trace_hexes.get(context[0]), span_hexes.pop(context[1], None)
                if trace_id is None:
                    trace_id = context[0].to_bytes(16, "big").hex()
                if span_id is None:
                    span_id = context[1].to_bytes(8, "big").hex()
            else:
                trace_id, span_id = context[0].to_bytes(16, "big").hex(), context[1].to_bytes(8, "big").hex()
        else:
            trace_id, span_id = context.trace_id.to_bytes(16, "big").hex(), context.span_id.to_bytes(8, "big").hex()
        if parent is None:
            parent_id, parent_remote = None, False
        elif isinstance(parent, tuple):
            parent_id = span_hexes.get(parent[1]) if span_hexes is not None else None
            if parent_id is None:
                parent_id = parent[1].to_bytes(8, "big").hex()
            parent_remote = parent[2]
        else:
            parent_id, parent_remote = parent.span_id.to_bytes(8, "big").hex(), parent.is_remote
    except (OverflowError, AttributeError):  # an id that does not fit its width: as format() writes it
        trace_id, span_id = trace_id_hex(context.trace_id), span_id_hex(context.span_id)
        parent_id = span_id_hex(parent.span_id) if parent is not None else None
        parent_remote = parent is not None and parent.is_remote
    if type(status) is Status:  # its fields, not its properties
        code, description = status._status_code, status._description
    else:
        code, description = status.status_code, status.description
    return SpanView(
        trace_id,
        span_id,
        name,
        attributes,
        parent_id,
        parent_remote,
        start or 0,
        end,
        _sdk_status_name(code),
        description or "",
        _sdk_events(events) if events else (),
        sequence,
        (),
        _SDK_KIND_BY_ID.get(id(kind), KIND_UNSPECIFIED),
        None,
        lost_attributes or 0,
        lost_events or 0,
        length_limit if type(length_limit) is int else None,
    )
