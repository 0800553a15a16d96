# cython: annotation_typing=True
"""A reader of an OTLP ``Span``'s wire format that builds the planning view straight from its bytes (issue 29).

The service's reference path reads a span with protobuf (upb): ``SpanHead`` for a span no convention reads, ``SpanBody`` then ``KeyValue`` / ``Span.Event`` per attribute and event for
one that holds a marker (``otlp_spans.full_view``), then copies each field out of the messages into a :class:`SpanView`. This module reads the same fields from the bytes (compiled with
Cython as part of the engine: ``compiled.ENGINE_SOURCES``) and builds the same :class:`SpanView`, field for field, with no protobuf object per span, attribute or event.

It follows protobuf's rules for the wire format as upb applies them (docs/DECISIONS.md 671: field order and repetition, merging, oneofs, unknown
fields and groups, varint, tag and length sizes, strict UTF-8), checked against protobuf itself by tests/service/test_wire_reader.py and bench/fuzz_wire_span.py.

It reads nothing it is not sure of: bytes that break a rule above, or nest deeper than :data:`_MAX_DEPTH` messages, give ``None``, and the caller
reads the span with protobuf, which then refuses it with its own ``DecodeError`` and reason (or reads it: whatever protobuf says stands). So a refusal is always protobuf's.
"""

from __future__ import annotations

import struct
from typing import Any

import cython

from otel_tracefence.normalize.span_view import _NO_ATTRIBUTES, _OTLP_KIND, SpanEvent, SpanView, duplicate_keys

_MASK64 = 0xFFFFFFFFFFFFFFFF
_MAX_DEPTH = 48  # messages and groups nested below the span: past it, protobuf decides (its own limit is 100)
_STATUS_NAMES = ("unset", "ok", "error")  # OTLP Status.code 0, 1, 2 (span_view's _OTLP_STATUS)
_ATTRIBUTES: dict[bytes, tuple[str, Any]] = {}  # an encoded KeyValue -> (key, value), for values that never change
_ATTRIBUTES_MAX = 8192
_ATTRIBUTE_CACHED_BYTES = 256  # longer encodings (arguments, results) are mostly unique: not cached
_IMMUTABLE = (str, bool, int, float, bytes, type(None))
_unpack_double = struct.Struct("<d").unpack


class Unreadable(Exception):
    """Bytes this reader does not read (malformed, or past what it reads): protobuf decides."""


@cython.cclass
class _Reader:
    """A cursor over one encoded message: ``buf`` its bytes, ``pos`` the next byte, ``end`` the message's end."""

    data: bytes
    buf: cython.p_uchar
    pos: cython.Py_ssize_t
    end: cython.Py_ssize_t

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.buf = data
        self.pos = 0
        self.end = len(data)

    @cython.cfunc
    def varint(self) -> cython.ulonglong:
        """A varint of at most 10 bytes, its low 64 bits."""
        buf = self.buf
        pos: cython.Py_ssize_t = self.pos
        end: cython.Py_ssize_t = self.end
        result: cython.ulonglong = 0
        shift: cython.int = 0
        byte: cython.ulonglong
        while True:
            if pos >= end or shift > 63:
                raise Unreadable
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        self.pos = pos
        return result if cython.compiled else result & _MASK64  # C: unsigned long long already

    @cython.cfunc
    def small(self) -> cython.ulonglong:
        """A tag or a length: a varint of at most 5 bytes whose value fits 32 bits."""
        buf = self.buf
        pos: cython.Py_ssize_t = self.pos
        end: cython.Py_ssize_t = self.end
        result: cython.ulonglong = 0
        shift: cython.int = 0
        byte: cython.ulonglong
        while True:
            if pos >= end or shift > 28:
                raise Unreadable
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        if result > 0xFFFFFFFF:
            raise Unreadable
        self.pos = pos
        return result

    @cython.cfunc
    def tag(self) -> cython.ulonglong:
        """The next field's tag (field number << 3 | wire type), checked: a field number other than 0, a wire type
        protobuf defines, not an end of group."""
        tag: cython.ulonglong = self.small()
        wire: cython.ulonglong = tag & 7
        if tag < 8 or wire == 4 or wire > 5:
            raise Unreadable
        return tag

    @cython.cfunc
    def length(self) -> cython.Py_ssize_t:
        """A length-delimited field's length, checked against the message's end; ``pos`` at its first byte."""
        size: cython.ulonglong = self.small()
        if size > cython.cast(cython.ulonglong, self.end - self.pos):
            raise Unreadable
        return cython.cast(cython.Py_ssize_t, size)

    @cython.cfunc
    def fixed(self, size: cython.Py_ssize_t) -> cython.ulonglong:
        """A little-endian fixed32 (``size`` 4) or fixed64 (8)."""
        pos: cython.Py_ssize_t = self.pos
        if self.end - pos < size:
            raise Unreadable
        buf = self.buf
        result: cython.ulonglong = 0
        i: cython.Py_ssize_t
        for i in range(size - 1, -1, -1):
            result = (result << 8) | buf[pos + i]
        self.pos = pos + size
        return result if cython.compiled else result & _MASK64  # C: unsigned long long already

    @cython.cfunc
    def text(self) -> str:
        """A length-delimited string, decoded as strict UTF-8 (protobuf's check of a proto3 string)."""
        size: cython.Py_ssize_t = self.length()
        start: cython.Py_ssize_t = self.pos
        self.pos = start + size
        if size == 0:
            return ""
        try:  # C: the UTF-8 decoder on the buffer itself (Python: a slice of the bytes)
            return self.buf[start : start + size].decode("utf-8")
        except UnicodeDecodeError:
            raise Unreadable from None

    @cython.cfunc
    def chunk(self) -> bytes:
        """A length-delimited field's bytes."""
        size: cython.Py_ssize_t = self.length()
        start: cython.Py_ssize_t = self.pos
        self.pos = start + size
        return self.buf[start : start + size]  # C: one bytes object made from the buffer (no slice object)

    @cython.cfunc
    def bytes8(self) -> bytes:
        """The next 8 bytes (a double's)."""
        if self.end - self.pos < 8:
            raise Unreadable
        self.pos += 8
        return self.buf[self.pos - 8 : self.pos]

    @cython.cfunc
    def skip(self, tag: cython.ulonglong, depth: cython.int) -> cython.void:
        """Skip the value of a field read with ``tag`` (an unknown field, or a known one with another wire type)."""
        wire: cython.ulonglong = tag & 7
        if wire == 0:
            self.varint()
        elif wire == 1:
            self.fixed(8)
        elif wire == 2:
            size: cython.Py_ssize_t = self.length()  # read first: ``pos += length()`` would add to the old pos
            self.pos += size
        elif wire == 5:
            self.fixed(4)
        else:  # 3, a group: its fields to the end of group of the same number
            if depth >= _MAX_DEPTH:
                raise Unreadable
            while True:
                inner: cython.ulonglong = self.small()
                if inner & 7 == 4:
                    if inner >> 3 != tag >> 3:
                        raise Unreadable
                    return
                if inner < 8 or inner & 7 > 5:
                    raise Unreadable
                self.skip(inner, depth + 1)

    @cython.cfunc
    def sub(self, size: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Enter an embedded message of ``size`` bytes: returns the enclosing end (give it to :meth:`leave`)."""
        outer: cython.Py_ssize_t = self.end
        self.end = self.pos + size
        return outer

    @cython.cfunc
    def leave(self, outer: cython.Py_ssize_t) -> cython.void:
        self.pos = self.end
        self.end = outer


@cython.cfunc
def _any_value(reader: _Reader, state: list, depth: cython.int) -> cython.void:
    """Merge one encoded ``AnyValue`` (the reader's current message) into ``state`` (``[case, value]``: case 0
    unset, else the oneof member's field number; an array's value a list of states, a kvlist's a list of
    ``(key, state)``), as protobuf merges a repeated occurrence."""
    if depth >= _MAX_DEPTH:
        raise Unreadable
    while reader.pos < reader.end:
        tag: cython.ulonglong = reader.tag()
        field: cython.ulonglong = tag >> 3
        wire: cython.ulonglong = tag & 7
        if field == 1 and wire == 2:
            state[0], state[1] = 1, reader.text()
        elif field == 2 and wire == 0:
            state[0], state[1] = 2, reader.varint() != 0
        elif field == 3 and wire == 0:
            value: cython.ulonglong = reader.varint()
            state[0], state[1] = 3, _signed64(value)
        elif field == 4 and wire == 1:
            state[0], state[1] = 4, _unpack_double(reader.bytes8())[0]
        elif (field == 5 or field == 6) and wire == 2:
            size: cython.Py_ssize_t = reader.length()
            if state[0] != field:
                state[0], state[1] = field, []
            outer: cython.Py_ssize_t = reader.sub(size)
            _values(reader, state[1], field == 6, depth + 1)
            reader.leave(outer)
        elif field == 7 and wire == 2:
            state[0], state[1] = 7, reader.chunk()
        elif field == 8 and wire == 0:
            state[0], state[1] = 8, _signed32(reader.varint())
        else:
            reader.skip(tag, depth)


@cython.cfunc
def _values(reader: _Reader, into: list, keyed: cython.bint, depth: cython.int) -> cython.void:
    """The elements (field 1) of an encoded ``ArrayValue`` (``keyed`` false: states) or ``KeyValueList``
    (``(key, state)``) appended to ``into``."""
    if depth >= _MAX_DEPTH:
        raise Unreadable
    while reader.pos < reader.end:
        tag: cython.ulonglong = reader.tag()
        if tag != 0x0A:  # field 1, length-delimited
            reader.skip(tag, depth)
            continue
        size: cython.Py_ssize_t = reader.length()
        outer: cython.Py_ssize_t = reader.sub(size)
        if keyed:
            into.append(_key_value(reader, depth + 1))
        else:
            state: list = [0, None]
            _any_value(reader, state, depth + 1)
            into.append(state)
        reader.leave(outer)


@cython.cfunc
def _key_value(reader: _Reader, depth: cython.int) -> tuple:
    """An encoded ``KeyValue`` (the reader's current message) as ``(key, state)``."""
    if depth >= _MAX_DEPTH:
        raise Unreadable
    key: str = ""
    state: list = [0, None]
    while reader.pos < reader.end:
        tag: cython.ulonglong = reader.tag()
        if tag == 0x0A:  # key
            key = reader.text()
        elif tag == 0x12:  # value: occurrences merge
            size: cython.Py_ssize_t = reader.length()
            outer: cython.Py_ssize_t = reader.sub(size)
            _any_value(reader, state, depth + 1)
            reader.leave(outer)
        elif tag == 0x18:  # key_strindex (int32): read, not used
            reader.varint()
        else:
            reader.skip(tag, depth)
    return key, state


def _python(state: list) -> Any:
    """A state of :func:`_any_value` as ``any_value_to_python`` gives the ``AnyValue``."""
    case = state[0]
    if case == 5:
        return [_python(item) for item in state[1]]
    if case == 6:
        return {key: _python(item) for key, item in state[1]}
    return state[1]


@cython.cfunc
@cython.inline
def _signed64(value: cython.ulonglong) -> cython.longlong:
    """An ``int64`` from its varint's 64 bits."""
    if cython.compiled:
        return cython.cast(cython.longlong, value)
    return value - 18446744073709551616 if value >= 9223372036854775808 else value


@cython.cfunc
@cython.inline
def _signed32(value: cython.ulonglong) -> cython.longlong:
    """An ``int32`` (or an enum) from its varint: the low 32 bits, signed."""
    if cython.compiled:
        low32: cython.uint = cython.cast(cython.uint, value)  # C: the low 32 bits
        return cython.cast(cython.int, low32)
    low = value & 0xFFFFFFFF
    return low - 4294967296 if low >= 2147483648 else low


@cython.cfunc
@cython.inline
def _unsigned32(value: cython.ulonglong) -> cython.ulonglong:
    """A ``uint32`` from its varint: the low 32 bits."""
    if cython.compiled:
        low32: cython.uint = cython.cast(cython.uint, value)
        return low32
    return value & 0xFFFFFFFF


@cython.cfunc
def _attribute(data: bytes) -> tuple:
    """An encoded ``KeyValue`` as ``(key, value)``; short ones with an immutable value kept by their encoding."""
    reader = _Reader(data)
    key, state = _key_value(reader, 1)
    found = (key, _python(state))
    if len(data) <= _ATTRIBUTE_CACHED_BYTES and type(found[1]) in _IMMUTABLE:
        if len(_ATTRIBUTES) >= _ATTRIBUTES_MAX:
            _ATTRIBUTES.clear()
        _ATTRIBUTES[data] = found
    return found


@cython.cfunc
def _event(reader: _Reader) -> SpanEvent:
    """An encoded ``Span.Event`` (the reader's current message) as the reference path's :class:`SpanEvent`."""
    name: str = ""
    dropped: cython.ulonglong = 0
    attributes: dict = {}
    while reader.pos < reader.end:
        tag: cython.ulonglong = reader.tag()
        if tag == 0x09:  # time_unix_nano (fixed64): not read
            reader.fixed(8)
        elif tag == 0x12:
            name = reader.text()
        elif tag == 0x1A:
            size: cython.Py_ssize_t = reader.length()
            outer: cython.Py_ssize_t = reader.sub(size)
            key, state = _key_value(reader, 2)
            attributes[key] = _python(state)
            reader.leave(outer)
        elif tag == 0x20:
            dropped = _unsigned32(reader.varint())
        else:
            reader.skip(tag, 1)
    return SpanEvent(name, attributes, dropped)


def read_span(data: bytes, sequence: int = 0, full: bool = True) -> SpanView | None:
    """The planning view of an encoded span: what ``otlp_spans.full_view(data, sequence)`` gives (``full``), or
    ``from_otlp_head(SpanHead.FromString(data), sequence)`` (not ``full``: attributes and events are skipped
    unread, as ``SpanHead`` skips them); ``None`` when the bytes are not read here (:class:`Unreadable`): the
    caller reads them with protobuf."""
    try:
        return _read(data, sequence, full)
    except Unreadable:
        return None


def read_ids(data: bytes) -> tuple[bytes, bytes, bytes] | None:
    """``(trace_id, span_id, parent_span_id)`` of an encoded span, its head checked as ``SpanHead`` checks it (the
    ids of ``SpanHead.FromString(data)``), or ``None`` (:func:`read_span`)."""
    try:
        return _head_ids(data)
    except Unreadable:
        return None


@cython.cfunc
def _head_ids(data: bytes) -> tuple:
    reader = _Reader(data)
    ids: list = [b"", b"", b"", b"", b""]  # by field number: 1 trace_id, 2 span_id, 4 parent_span_id
    while reader.pos < reader.end:
        tag: cython.ulonglong = reader.tag()
        if tag == 0x0A or tag == 0x12 or tag == 0x22:
            ids[tag >> 3] = reader.chunk()
        elif tag == 0x2A:  # the name and the status are checked as SpanHead checks them
            reader.text()
        elif tag == 0x7A:
            _status(reader, [0, ""])
        else:
            reader.skip(tag, 1)
    return ids[1], ids[2], ids[4]


@cython.cfunc
def _status(reader: _Reader, status: list) -> cython.void:
    """Merge an encoded ``Status`` (the next field's value) into ``status`` (``[code, message]``)."""
    size: cython.Py_ssize_t = reader.length()
    outer: cython.Py_ssize_t = reader.sub(size)
    while reader.pos < reader.end:
        tag: cython.ulonglong = reader.tag()
        if tag == 0x12:
            status[1] = reader.text()
        elif tag == 0x18:
            status[0] = _signed32(reader.varint())
        else:
            reader.skip(tag, 2)
    reader.leave(outer)


@cython.cfunc
def _span_attributes(encoded: list) -> tuple:
    """``(attributes, duplicate keys)`` from a span's attributes' encodings in order, a repeated key keeping its last value (each cached or read)."""
    read: dict = {}  # typed: C-level dict calls, not Python ones
    cache: dict = _ATTRIBUTES
    for one in encoded:
        found = cache.get(one)
        if found is None:
            found = _attribute(one)
        read[found[0]] = found[1]
    if len(read) == len(encoded):
        return read, ()
    return read, duplicate_keys([(cache.get(one) or _attribute(one))[0] for one in encoded])


@cython.cfunc
def _read(data: bytes, sequence: object, full: cython.bint) -> SpanView:
    reader = _Reader(data)
    trace_id: bytes = b""
    span_id: bytes = b""
    parent: bytes = b""
    name: str = ""
    kind: cython.longlong = 0
    start: cython.ulonglong = 0
    end: cython.ulonglong = 0
    flags: cython.ulonglong = 0
    dropped_attributes: cython.ulonglong = 0
    dropped_events: cython.ulonglong = 0
    status: list = [0, ""]
    encoded: list = []  # the attributes' encodings, in order
    events: list = []
    while reader.pos < reader.end:
        tag: cython.ulonglong = reader.tag()
        if tag == 0x0A:
            trace_id = reader.chunk()
        elif tag == 0x12:
            span_id = reader.chunk()
        elif tag == 0x22:
            parent = reader.chunk()
        elif tag == 0x2A:
            name = reader.text()
        elif tag == 0x30:
            kind = _signed32(reader.varint())
        elif tag == 0x39:
            start = reader.fixed(8)
        elif tag == 0x41:
            end = reader.fixed(8)
        elif tag == 0x4A and full:
            encoded.append(reader.chunk())
        elif tag == 0x50:
            dropped_attributes = _unsigned32(reader.varint())
        elif tag == 0x5A and full:
            size: cython.Py_ssize_t = reader.length()
            outer: cython.Py_ssize_t = reader.sub(size)
            events.append(_event(reader))
            reader.leave(outer)
        elif tag == 0x60:
            dropped_events = _unsigned32(reader.varint())
        elif tag == 0x7A:
            _status(reader, status)
        elif tag == 0x85:  # flags: field 16, fixed32
            flags = reader.fixed(4)
        else:
            reader.skip(tag, 1)
    attributes: object = _NO_ATTRIBUTES
    duplicates: tuple = ()
    if full:
        attributes, duplicates = _span_attributes(encoded)
    code: cython.longlong = status[0]
    known: cython.bint = 0 <= code < 3
    kind_name = _OTLP_KIND[kind] if 0 <= kind < len(_OTLP_KIND) else "unspecified"
    return SpanView(
        trace_id.hex(),
        span_id.hex(),
        name,
        attributes,
        parent.hex() or None,
        bool(flags & 0x100 and flags & 0x200),  # OTLP flags: the parent's remoteness known (bit 8), remote (bit 9)
        start,
        end or None,
        _STATUS_NAMES[code] if known else "error",  # a code OTLP does not define: not ok, and held (status_undefined)
        status[1],
        tuple(events),
        sequence,
        duplicate_keys=duplicates,
        kind=kind_name,
        dropped_attributes=dropped_attributes,
        dropped_events=dropped_events,
        status_undefined=None if known else code,
    )


__all__ = ["Unreadable", "read_ids", "read_span"]
