"""OTLP spans as the service carries them: each span's encoded bytes with the resource and scope it came with.

The service holds spans as the bytes it received (``otlp_bytes``): a span is parsed
into a view for planning, annotated by appending the encoding of its extra
attributes (protobuf's merge rule for a repeated field), and forwarded as bytes in
requests built with the lazy message types.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

import cython

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_tracefence.normalize import SpanView
from otel_tracefence.normalize.read_keys import READ_MARKERS
from otel_tracefence.normalize.span_view import (
    SpanEvent, any_value_to_python, duplicate_keys, from_otlp_head, key_values_to_dict,
)
from otel_tracefence.normalize.step import CHILD_SPAN_FIELD
from otel_tracefence.service.otlp_bytes import LazyRequest, LazyResourceSpans, LazyScopeSpans, SpanBody, SpanHead, encoded_span_count  # noqa: F401 - re-exported
from otel_tracefence.service.span_annotation import ANNOTATION_PREFIX, annotated, encoded_attributes, holds_a_key, set_attributes  # noqa: F401 - re-exported
from otel_tracefence.service.wire_span import read_ids as wire_ids
from otel_tracefence.service.wire_span import _ATTRIBUTE_CACHED_BYTES, _ATTRIBUTES_MAX, _IMMUTABLE, read_span  # the caches' bounds: one rule


class Origin:
    """The resource and instrumentation scope of a ``ScopeSpans``, encoded (shared by its spans, compared by
    identity): ``resource`` and ``scope`` as OTLP ``Resource`` / ``InstrumentationScope`` bytes, the schema URLs
    as UTF-8 bytes."""

    __slots__ = ("resource", "resource_schema_url", "scope", "scope_schema_url", "_service_name")

    def __init__(self, resource: bytes, resource_schema_url: bytes, scope: bytes, scope_schema_url: bytes) -> None:
        self.resource, self.resource_schema_url = resource, resource_schema_url
        self.scope, self.scope_schema_url = scope, scope_schema_url
        self._service_name: str | None = None

    @property
    def service_name(self) -> str:
        """The resource's ``service.name`` (read once, on first use)."""
        if self._service_name is None:
            name = ""
            for kv in Resource.FromString(self.resource).attributes:
                if kv.key == "service.name":
                    name = kv.value.string_value
            self._service_name = name
        return self._service_name


class OtlpItem:
    """One received span (``span``: its OTLP encoding) with its origin. Annotation replaces ``span``.
    ``full``: planning reads the span in full; ``sequence``: its place in the order spans were read (both set
    by :func:`held_view`). ``ids``: ``(trace_id, span_id, parent_span_id)`` as :func:`read_request` read them
    (``bytes``), kept while the span waits in the intake queue so that :func:`held_view` does not parse its head
    again, and dropped there (``None``; also for an item not read by :func:`read_request`). While its trace is
    held, this is all the service keeps of a span (no parsed message, no ids: docs/DECISIONS.md 157 and 320)."""

    __slots__ = ("origin", "span", "full", "sequence", "ids")

    def __init__(self, origin: Origin, span: bytes, ids: tuple[bytes, bytes, bytes] | None = None) -> None:
        self.origin, self.span, self.full, self.sequence, self.ids = origin, span, True, 0, ids



def annotate_item(item: OtlpItem | None, view: SpanView, extra: dict[str, Any]) -> OtlpItem | None:
    """The item with ``extra`` attributes set on its span (:func:`annotated`); ``None`` (a span that stood in its
    trace for planning but is not forwarded: it was rejected) stays ``None``."""
    if item is None:
        return None
    item.span = annotated(item.span, extra)
    return item


# A marker holding another one ("tool." holds "tool") is found whenever it is there: only the others are looked for.
_MARKERS = tuple(sorted(m.encode() for m in READ_MARKERS if not any(other != m and other in m for other in READ_MARKERS)))
_COMMON_MARKER = b"ai."  # in most spans of agent traces (gen_ai.*): looked for first, alone


def _trie_pattern(words: Sequence[bytes]) -> bytes:
    """A regular expression matching any of ``words``, as a trie (``a(?:gent\\.|i\\.)``): one pass over the text that
    tries at each position only the words starting with its byte, where an alternation of the words tries them all."""
    tree: dict = {}
    for word in words:
        node = tree
        for byte in word:
            node = node.setdefault(byte, {})
        node[None] = {}

    def build(node: dict) -> bytes:
        branches = [re.escape(bytes([byte])) + build(child) for byte, child in sorted((k, v) for k, v in node.items() if k is not None)]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 and None not in node else b"(?:" + b"|".join(branches) + b")"
        return body + (b"?" if None in node else b"")

    return build(tree)


_MARKER_SEARCH = re.compile(_trie_pattern(_MARKERS)).search


def needs_full_view(span: bytes) -> bool:
    """True when the encoded span holds one of ``read_keys.READ_MARKERS`` (compared case-insensitively, anywhere
    in its bytes: a key, a value, an event, its name): the normalizer may read its attributes or events.
    (One search of the lower-cased bytes for every marker at once: bench/README.md, "Fourth round".)"""
    lowered = span.lower()
    return lowered.find(_COMMON_MARKER) >= 0 or _MARKER_SEARCH(lowered) is not None  # find: see holds_a_key


class HeldSpan:
    """What the fence reads of a received span before its trace is planned: ``trace_id``, ``span_id`` and
    ``parent_span_id`` as its :class:`SpanView` has them (hex; ``parent_span_id`` ``None`` for a root). The buffer
    groups spans by trace with it and keeps none for a held span; planning reads the span again
    (:func:`planning_view`). Compared by those three fields."""

    __slots__ = ("trace_id", "span_id", "parent_span_id")

    def __init__(self, trace_id: str, span_id: str, parent_span_id: str | None) -> None:
        self.trace_id, self.span_id, self.parent_span_id = trace_id, span_id, parent_span_id

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HeldSpan):
            return NotImplemented
        return (self.trace_id, self.span_id, self.parent_span_id) == (other.trace_id, other.span_id, other.parent_span_id)

    __hash__ = None  # type: ignore[assignment] - compared by value, never a key

    def __repr__(self) -> str:
        return f"HeldSpan(trace_id={self.trace_id!r}, span_id={self.span_id!r}, parent_span_id={self.parent_span_id!r})"


def held_view(item: OtlpItem, sequence: int = 0) -> HeldSpan:
    """What the fence takes a received span with (:class:`HeldSpan`: its ids). They are ``item.ids`` when
    :func:`read_request` read them (its parse of the head checked every field of it), which this drops; else they
    are read from the span's head, whose fields protobuf checks as it parses (a name that is not UTF-8 raises
    here, as it did when the whole head was read). Sets ``item.full`` (whether planning must read the span in
    full: :func:`needs_full_view`) and ``item.sequence``. Raises ``DecodeError``."""
    ids = item.ids
    if ids is None:
        head = SpanHead.FromString(item.span)
        ids = (head.trace_id, head.span_id, head.parent_span_id)
    else:
        item.ids = None  # a held span keeps no ids (docs/DECISIONS.md 320)
    item.full = needs_full_view(item.span)
    item.sequence = sequence
    return HeldSpan(ids[0].hex(), ids[1].hex(), ids[2].hex() or None)


def planning_view(view: SpanView | HeldSpan | None, item: OtlpItem | None) -> SpanView:
    """What planning reads of a span (the fence's ``read_view``), made when its trace is planned: the full view
    (:func:`full_view`) of a span holding a marker; else the view of its head (``from_otlp_head``: no attributes
    and events, which plans the same). ``view`` (a :class:`HeldSpan`, or ``None`` for a held span: the buffer keeps
    none) is read only for a span that is not forwarded (``item`` ``None``): its stand-in view. A held span so costs
    its bytes and its item only."""
    if item is None:
        assert isinstance(view, SpanView)
        return view
    if item.full:
        return full_view(item.span, item.sequence)
    return from_otlp_head(SpanHead.FromString(item.span), item.sequence)


def wire_planning_view(view: SpanView | HeldSpan | None, item: OtlpItem | None) -> SpanView:
    """:func:`planning_view` read from the span's bytes by the wire reader (``wire_span.read_span``: no protobuf
    object per span, attribute or event); a span it does not read (malformed, or past what it reads) is read by
    :func:`planning_view`, whose protobuf refuses it with its own reason. The service's ``read_view`` unless
    ``service.span_reader`` is ``protobuf`` (docs/DECISIONS.md 670)."""
    if item is not None:
        found = read_span(item.span, item.sequence, item.full)
        if found is not None:
            return found
    return planning_view(view, item)


_ATTRIBUTES: dict[bytes, tuple[str, Any]] = {}  # an encoded KeyValue -> (key, value), for values that never change


def _attribute(encoded: bytes) -> tuple[str, Any]:
    """An encoded ``KeyValue`` as ``(key, value)`` (:func:`~otel_tracefence.normalize.span_view.any_value_to_python`).
    Agent spans repeat most of their attributes (an operation, a model, a tool or agent name, a declared effect):
    short ones whose value is immutable are kept by their encoding (at most ``_ATTRIBUTES_MAX``, then cleared)."""
    found = _ATTRIBUTES.get(encoded)
    if found is None:
        kv = KeyValue.FromString(encoded)
        found = (kv.key, any_value_to_python(kv.value))
        if len(encoded) <= _ATTRIBUTE_CACHED_BYTES and type(found[1]) in _IMMUTABLE:
            if len(_ATTRIBUTES) >= _ATTRIBUTES_MAX:
                _ATTRIBUTES.clear()
            _ATTRIBUTES[encoded] = found
    return found


def full_view(span: bytes, sequence: int = 0) -> SpanView:
    """The view of an encoded span, field for field what ``from_otlp(Span.FromString(span), sequence)`` gives
    (attributes in order, a repeated key keeping its last value and listed in ``duplicate_keys``; events), read
    through :data:`~otel_tracefence.service.otlp_bytes.SpanBody` with attributes converted by :func:`_attribute`.
    tests/service/test_service_bytes.py compares the two. Raises ``DecodeError``."""
    body = SpanBody.FromString(span)
    attributes: dict[str, Any] = {}
    encoded = body.attributes
    cached = _ATTRIBUTES.get
    for one in encoded:
        found = cached(one)  # _attribute's cache read here: most attributes are in it, and a call costs more than the read
        if found is None:
            found = _attribute(one)
        attributes[found[0]] = found[1]
    duplicates = duplicate_keys(_attribute(one)[0] for one in encoded) if len(attributes) != len(encoded) else ()
    events: tuple[SpanEvent, ...] = ()
    if body.events:
        events = tuple(SpanEvent(e.name, key_values_to_dict(e.attributes), e.dropped_attributes_count) for e in map(Span.Event.FromString, body.events))
    return from_otlp_head(body, sequence, attributes, events, duplicates)


def view_of(span: bytes, sequence: int = 0) -> SpanView:
    """The view planning reads of an encoded span, as the service makes it (:func:`held_view`, then
    :func:`planning_view`): in full when it holds a marker, else without attributes and events, which plans
    the same. Raises ``DecodeError``."""
    item = OtlpItem(None, span)  # type: ignore[arg-type]
    held_view(item, sequence)
    return planning_view(None, item)


def stand_in(span: Any, problem: str) -> SpanView | None:
    """The view that stands in its trace for a span refused for ``problem`` (its ids): its trace still
    holds a tool call that may have been this span, so it is planned with a ``review`` step for it,
    as ``tracefence plan`` plans it. ``None`` when not even its trace id can be read. ``span``: a
    :data:`~otel_tracefence.service.otlp_bytes.SpanHead` (or a full ``Span``). A span the router sent
    for one it could not read (:func:`carrying_fault`) stands in with that span's fault, not its own."""
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return None
    field, why, parent = _carried_fault(span.parent_span_id) or (problem.split(" ", 1)[0], problem, "")
    return SpanView(span.trace_id.hex(), span.span_id.hex() or "(none)", span.name, {}, parent_span_id=parent or None,
                    start_time_unix_nano=span.start_time_unix_nano, unreadable=(field, why))


# A parent span id no span can have (not 8 bytes, so every worker refuses the span), followed by the fault of the
# span it stands for: how the router hands a worker an OTLP/JSON span it could not read (docs/DECISIONS.md 306).
_FAULT_MARK = b"\x00tracefence.fault\x00"


def carrying_fault(field: str, why: str, parent: str | None = None) -> bytes:
    """The parent span id the router gives a span standing for one refused with ``(field, why)``
    (``SpanView.unreadable``), so that the worker's stand-in carries that fault (its reason ``malformed_<field>``),
    and ``parent`` (hex, or ``None``): the stand-in's own parent, so that a refused child stands under its parent
    step (``child_span_unread``) in a worker as in one process (docs/DECISIONS.md 306, 387)."""
    return _FAULT_MARK + f"{field}\x00{parent or ''}\x00{why}".encode("utf-8", "replace")


def _carried_fault(parent_span_id: bytes) -> tuple[str, str, str] | None:
    """``(field, why, parent)`` of :func:`carrying_fault` (``parent`` ``""`` when none), or ``None`` for any other
    parent span id (one look at its head)."""
    if not parent_span_id.startswith(_FAULT_MARK):
        return None
    field, _, rest = parent_span_id[len(_FAULT_MARK) :].decode("utf-8", "replace").partition("\x00")
    parent, _, why = rest.partition("\x00")
    return field, why, parent


def invalid_reason(span: Any) -> str | None:
    """Why a span can never be accepted (OTLP: trace id 16 bytes, span id 8 bytes, neither all zero), or ``None``.
    ``span``: a :data:`~otel_tracefence.service.otlp_bytes.SpanHead` or a full ``Span``."""
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return "trace_id must be 16 bytes and not all zero"
    if len(span.span_id) != 8 or not any(span.span_id):
        return "span_id must be 8 bytes and not all zero"
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return "parent_span_id must be empty or 8 bytes"
    return None


_ZERO_TRACE_ID, _ZERO_SPAN_ID = bytes(16), bytes(8)


@cython.cfunc
def _valid_ids(trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> cython.bint:
    """:func:`invalid_reason`'s rules, fast: the right lengths, and not all zero (compared with the zero id, not any())."""
    return len(trace_id) == 16 and len(span_id) == 8 and (not parent_span_id or len(parent_span_id) == 8) \
        and trace_id != _ZERO_TRACE_ID and span_id != _ZERO_SPAN_ID


def read_request(request: Any, wire: bool = False) -> tuple[list[OtlpItem], list[tuple[str, SpanView | Orphan | None]]]:
    """The spans of a :data:`~otel_tracefence.service.otlp_bytes.LazyRequest` as items, one :class:`Origin` per
    ``ScopeSpans``, and the refused ones as ``(error, a stand-in view, an Orphan, or None)``: ids that :func:`invalid_reason`
    refuses (an :class:`Orphan` when its trace id cannot be read and its parent is not in the request). Raises ``DecodeError`` for a span whose bytes do not decode.
    ``wire``: each span's ids are read by the wire reader (``wire_span.read_ids``), its head checked as ``SpanHead``
    checks it; a span it does not read, or whose ids are refused, is read with ``SpanHead`` as without it."""
    accepted: list[OtlpItem] = []
    refused: list[tuple[str, SpanView | None]] = []
    read_ids = SpanHead.FromString
    for resource_spans in request.resource_spans:
        resource, resource_schema_url = resource_spans.resource, resource_spans.schema_url
        for scope_spans in resource_spans.scope_spans:
            origin = Origin(resource, resource_schema_url, scope_spans.scope, scope_spans.schema_url)
            for span in scope_spans.spans:
                found = wire_ids(span) if wire else None
                if found is not None:
                    if _valid_ids(found[0], found[1], found[2]):  # a cfunc takes no starred arguments
                        accepted.append(OtlpItem(origin, span, found))
                        continue
                ids = read_ids(span)
                trace_id, span_id, parent_span_id = ids.trace_id, ids.span_id, ids.parent_span_id  # each field read once
                if _valid_ids(trace_id, span_id, parent_span_id):
                    accepted.append(OtlpItem(origin, span, (trace_id, span_id, parent_span_id)))  # ids kept until held
                    continue
                problem = invalid_reason(ids)
                assert problem is not None
                refused.append((f"span {ids.span_id.hex() or '?'}: {problem}", stand_in(ids, problem) or (ids, problem)))
    if any(isinstance(view, tuple) for _, view in refused):  # a span whose trace id cannot be read: rare
        trace_of = traces_by_span_id(item.span for item in accepted)
        refused = [(error, (under_parent(*view, trace_of) or orphan(*view)) if isinstance(view, tuple) else view) for error, view in refused]
    return accepted, refused


def traces_by_span_id(spans: Iterable[bytes]) -> dict[bytes, bytes]:
    """``{span id: trace id}`` of the encoded ``spans`` whose ids can be read (only each span's head is decoded)."""
    heads = (SpanHead.FromString(span) for span in spans)
    return {head.span_id: head.trace_id for head in heads if invalid_reason(head) is None}


def under_parent(span: Any, problem: str, trace_of: dict[bytes, bytes]) -> SpanView | None:
    """The view that stands, in its parent's trace, for a span refused because its trace id cannot be read,
    when ``trace_of`` (``{span id: trace id}`` of the request's readable spans) holds its parent: that trace
    may have lost a tool call (a ``review`` step, ``child_span_unread``; docs/DECISIONS.md 207). ``None``
    when the parent is not in the request (the span then stands in no trace, as before)."""
    parent = span.parent_span_id
    trace_id = trace_of.get(parent) if len(parent) == 8 else None
    if trace_id is None:
        return None
    return _child_view(trace_id.hex(), span.span_id.hex() or "(none)", span.name, parent.hex(), span.start_time_unix_nano, problem)


def _child_view(trace_id: str, span_id: str, name: str, parent: str, start_time_unix_nano: int, problem: str) -> SpanView:
    """The stand-in view, in trace ``trace_id``, of a span refused for ``problem`` that names span ``parent`` of it."""
    why = f"{problem}, and it names span {parent} of this trace as its parent: this trace may have lost a tool call"
    return SpanView(trace_id, span_id, name, {}, parent_span_id=parent, start_time_unix_nano=start_time_unix_nano, unreadable=(CHILD_SPAN_FIELD, why))


class Orphan:
    """A span refused because its trace id cannot be read whose parent (``parent_span_id``, hex) is not in its request:
    the parent may be a span of a trace the buffer holds or remembers, where it then stands (:meth:`view`;
    docs/DECISIONS.md 296). ``span_id`` is ``"(none)"`` when it cannot be read either."""

    __slots__ = ("span_id", "parent_span_id", "name", "start_time_unix_nano", "problem")

    def __init__(self, span_id: str, parent_span_id: str, name: str, start_time_unix_nano: int, problem: str) -> None:
        self.span_id, self.parent_span_id, self.name, self.start_time_unix_nano, self.problem = span_id, parent_span_id, name, start_time_unix_nano, problem

    def view(self, trace_id: str) -> SpanView:
        """Its stand-in view in trace ``trace_id`` (hex), a trace holding its parent: a ``child_span_unread`` step."""
        return _child_view(trace_id, self.span_id, self.name, self.parent_span_id, self.start_time_unix_nano, self.problem)


def orphan(span: Any, problem: str) -> Orphan | None:
    """The :class:`Orphan` of a span refused for ``problem`` (a :data:`~otel_tracefence.service.otlp_bytes.SpanHead`)
    whose parent is not in its request; ``None`` when it names no readable parent (8 bytes, not all zero). A span the
    router sent for an orphan (:func:`orphan_span`) gives back that orphan's own problem."""
    parent = span.parent_span_id
    if len(parent) != 8 or parent == _ZERO_SPAN_ID:
        return None
    if span.trace_id.startswith(_FAULT_MARK):
        problem = span.trace_id[len(_FAULT_MARK) :].decode("utf-8", "replace")
    return Orphan(span.span_id.hex() or "(none)", parent.hex(), span.name, span.start_time_unix_nano, problem)


def orphan_span(o: Orphan) -> Any:
    """The span (an OTLP ``Span``) the router of ``--workers`` sends every worker for an :class:`Orphan`: its trace id
    (never valid: every worker refuses the span) carries the orphan's problem, and its span id, parent span id, name
    and start time are the orphan's; a worker reads it back with :func:`orphan` and looks up the parent among the
    traces it holds or remembers (docs/DECISIONS.md 296, 389)."""
    try:
        span_id = bytes.fromhex(o.span_id)
    except ValueError:  # "(none)"
        span_id = b""
    return Span(trace_id=_FAULT_MARK + o.problem.encode("utf-8", "replace"), span_id=span_id if len(span_id) == 8 else b"",
                parent_span_id=bytes.fromhex(o.parent_span_id), name=o.name, start_time_unix_nano=o.start_time_unix_nano)


def held_span_id(view: SpanView | HeldSpan | None, item: OtlpItem | None) -> str:
    """The span id (hex) of a span the buffer holds as ``(view or None, item)``: the view's, else read from the item's
    head (only the head is decoded)."""
    return view.span_id if view is not None else SpanHead.FromString(item.span).span_id.hex()


def lazy_request(request: Any) -> Any:
    """Any request (a :data:`LazyRequest`, a full ``ExportTraceServiceRequest``, or encoded bytes) as a
    :data:`LazyRequest` (the same object when it is one)."""
    if isinstance(request, LazyRequest):
        return request
    return LazyRequest.FromString(request if isinstance(request, (bytes, bytearray)) else request.SerializeToString())


def to_request(items: Iterable[OtlpItem | None]) -> tuple[Any, int]:
    """Regroup spans into one :data:`LazyRequest`, one ``ResourceSpans``/``ScopeSpans`` per origin (``None``
    items skipped); and the span count."""
    request = LazyRequest()
    by_origin: dict[int, Any] = {}
    count = 0
    for item in items:
        if item is None:  # a refused span that stood in its trace: never forwarded
            continue
        origin = item.origin
        spans = by_origin.get(id(origin))
        if spans is None:
            resource_spans = request.resource_spans.add(resource=origin.resource, schema_url=origin.resource_schema_url)
            spans = by_origin[id(origin)] = resource_spans.scope_spans.add(scope=origin.scope, schema_url=origin.scope_schema_url).spans
        spans.append(item.span)
        count += 1
    return request, count


def request_span_count(request: Any) -> int:
    """The spans of a request message (full or lazy)."""
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


_FRAME = 6  # at most a one-byte tag and a five-byte length in front of an embedded message


def split_request(request: Any, *, max_bytes: int | None = None, max_spans: int | None = None) -> tuple[list[tuple[Any, int, int]], list[bytes]]:
    """Cut ``request`` (a :data:`LazyRequest`) into lazy requests of at most ``max_bytes`` serialized bytes and
    ``max_spans`` spans, in span order, each span keeping its resource and scope.

    Returns ``(pieces, oversized)``: pieces as ``(request, spans, bytes)`` (``bytes`` an upper bound of the
    serialized size), and the encoded spans that alone, with their resource and scope, exceed ``max_bytes``.
    The pieces share no message with ``request`` (copies).
    """
    pieces: list[tuple[Any, int, int]] = []
    oversized: list[bytes] = []
    current = LazyRequest()
    spans = size = 0
    group: Any = None  # the spans of the ScopeSpans of `current` the next span of the same origin goes into

    def flush() -> None:
        nonlocal current, spans, size, group
        if spans:
            pieces.append((current, spans, size))
        current, spans, size, group = LazyRequest(), 0, 0, None

    for resource_spans in request.resource_spans:
        resource, resource_url = resource_spans.resource, resource_spans.schema_url
        resource_head = LazyResourceSpans(resource=resource, schema_url=resource_url).ByteSize() + _FRAME
        for scope_spans in resource_spans.scope_spans:
            scope, scope_url = scope_spans.scope, scope_spans.schema_url
            scope_head = LazyScopeSpans(scope=scope, schema_url=scope_url).ByteSize() + _FRAME
            group = None  # a new origin opens a new ResourceSpans/ScopeSpans
            for span in scope_spans.spans:
                span_size = len(span) + _FRAME
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
                    added = current.resource_spans.add(resource=resource, schema_url=resource_url)
                    group = added.scope_spans.add(scope=scope, schema_url=scope_url).spans
                group.append(span)
                spans += 1
                size += opening + span_size
    flush()
    return pieces, oversized


__all__: Sequence[str] = [
    "ANNOTATION_PREFIX", "HeldSpan", "Origin", "OtlpItem", "annotate_item", "annotated", "encoded_attributes", "encoded_span_count", "full_view",
    "holds_a_key", "invalid_reason", "held_view", "wire_planning_view", "lazy_request", "needs_full_view", "planning_view", "read_request", "request_span_count", "set_attributes",
    "orphan_span", "split_request", "stand_in", "to_request", "traces_by_span_id", "under_parent", "view_of", "Orphan", "orphan", "held_span_id",
]
