"""Annotating a span as bytes: the fence's extra attributes encoded once per value (bounded caches) and appended
to the span's encoding (protobuf's merge rule for a repeated field), or, when the span already holds one of
those keys, the span re-encoded with the key replaced. Part of the compiled engine (the service's hot path)."""

from __future__ import annotations

from typing import Any

import cython

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

ANNOTATION_PREFIX = b"tracefence."  # every key the fence sets starts so: a span holding it may need a key replaced


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


def _key_values(extra: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=any_value(v)) for k, v in extra.items()]


def set_attributes(span: Span, extra: dict[str, Any]) -> None:
    """Put ``extra`` on the span, replacing attributes of the same key (a span may pass two fences)."""
    if not extra:
        return
    existing = [i for i, kv in enumerate(span.attributes) if kv.key in extra]
    for index in reversed(existing):
        del span.attributes[index]
    span.attributes.extend(_key_values(extra))


_ENCODED: dict[tuple, bytes] = {}  # (key, type, value) -> that one attribute encoded as a Span's attributes field
_ENCODED_MAX = 65536
_VALUE_TYPES = (str, bool, int, float)


@cython.ccall
def _encoded_attribute(key: str, value: Any) -> bytes:
    """``Span(attributes=[KeyValue(key, value)])`` encoded by protobuf, cached per attribute: a trace's class, its
    decisions and reasons repeat across spans; only a step's own values (its call id, index) are new."""
    kind = type(value)
    if kind is list:
        cached = True
        for item in value:  # a loop, not all() over a generator
            if type(item) is not str:
                cached = False
                break
        marker: tuple = (key, kind, tuple(value))
    else:
        cached = kind in _VALUE_TYPES
        marker = (key, kind, value)  # the type tells True from 1 and 1 from 1.0
    encoded = _ENCODED.get(marker) if cached else None
    if encoded is None:
        encoded = Span(attributes=[KeyValue(key=key, value=any_value(value))]).SerializeToString()
        if cached:
            if len(_ENCODED) >= _ENCODED_MAX:
                _ENCODED.clear()
            _ENCODED[marker] = encoded
    return encoded


_RECENT: dict[int, tuple[Any, tuple[bytes, ...] | None, bytes]] = {}  # id(attribute set) -> _annotation's record of it
_RECENT_MAX = 16


@cython.ccall
def _annotation(extra: dict[str, Any]) -> tuple:
    """``(extra, its keys as _prefixed_keys gives them, its encoding)``: what annotating a span with ``extra`` reads,
    made once per attribute set.

    The fence gives every span of a trace but its steps one dict: the records of the last few dicts are kept
    by the dict's identity (each record holds its dict, so an id is never reused while it is there, and is one
    tuple, replaced whole). ``extra`` must not be changed once encoded (the fence builds a dict per trace or span).
    """
    found = _RECENT.get(id(extra))
    if found is not None and found[0] is extra:
        return found
    found = (extra, _prefixed_keys(extra), b"".join([_encoded_attribute(key, value) for key, value in extra.items()]))
    if len(_RECENT) >= _RECENT_MAX:
        _RECENT.clear()
    _RECENT[id(extra)] = found
    return found


def encoded_attributes(extra: dict[str, Any]) -> bytes:
    """``Span(attributes=extra)`` as protobuf encodes it: appended to an encoded span, it adds ``extra`` after the
    span's own attributes (protobuf merges concatenated encodings; a repeated field's elements are appended). The
    encoding of a repeated field is the concatenation of its elements' encodings, each made and cached per attribute;
    the whole is kept per dict (:func:`_annotation`)."""
    return _annotation(extra)[2]


_KEYS_OF: dict[tuple[str, ...], tuple[bytes, ...] | None] = {}  # an annotation's keys -> their bytes (None: one without the prefix)
_KEYS_OF_MAX = 256


@cython.ccall
def _prefixed_keys(extra: dict[str, Any]) -> tuple[bytes, ...] | None:
    """The UTF-8 bytes of ``extra``'s keys, or ``None`` when one of them does not start with ``ANNOTATION_PREFIX``
    (every key the fence sets does); kept per tuple of keys (a handful: a step's annotation is a dict of its own,
    with the same keys as every other step's)."""
    names = tuple(extra)
    found = _KEYS_OF.get(names, ())
    if found == ():
        found = tuple([key.encode() for key in names])
        for key_bytes in found:
            if not key_bytes.startswith(ANNOTATION_PREFIX):
                found = None
                break
        if len(_KEYS_OF) >= _KEYS_OF_MAX:
            _KEYS_OF.clear()
        _KEYS_OF[names] = found
    return found


def holds_a_key(span: bytes, extra: dict[str, Any]) -> bool:
    """True when the UTF-8 bytes of one of ``extra``'s keys occur anywhere in ``span``.

    Every key the fence sets starts with ``ANNOTATION_PREFIX``: a key occurs only where the prefix does, so the
    span is searched for the prefix (which most spans lack), and each place it occurs is compared with all the keys
    at once (``bytes.startswith`` with a tuple), not each key searched for in the whole span. A key without the
    prefix (none the fence sets) is searched for. (``find``, not ``in``: CPython's ``bytes.__contains__`` first
    tries its argument as an integer, and raises and clears a ``TypeError`` for every ``bytes`` one.)"""
    return _holds_a_key(span, _annotation(extra)[1], extra)


@cython.ccall
def _holds_a_key(span: bytes, keys: tuple[bytes, ...] | None, extra: dict[str, Any]) -> bool:
    """:func:`holds_a_key`, given ``extra``'s keys as :func:`_prefixed_keys` gives them."""
    if keys is None:
        for key in extra:
            if span.find(key.encode()) >= 0:
                return True
        return False
    at = span.find(ANNOTATION_PREFIX)
    while at >= 0:
        if span.startswith(keys, at):
            return True
        at = span.find(ANNOTATION_PREFIX, at + 1)
    return False


@cython.ccall
def annotated(span: bytes, extra: dict[str, Any]) -> bytes:
    """The encoded span with ``extra`` attributes set, replacing attributes of the same key.

    A span whose bytes hold none of ``extra``'s keys (:func:`holds_a_key`) has no attribute of those keys (a key
    is encoded as its UTF-8 bytes): the encoding of ``extra`` is appended. Otherwise (a span that passed another
    fence, or a key's text anywhere in it) it is parsed, changed with :func:`set_attributes` and encoded again.
    What is read of ``extra`` (its keys' bytes, its encoding) is made once per dict (:func:`_annotation`)."""
    if not extra:
        return span
    record = _annotation(extra)
    if _holds_a_key(span, record[1], extra):
        message = Span.FromString(span)
        set_attributes(message, extra)
        return message.SerializeToString()
    return span + record[2]

