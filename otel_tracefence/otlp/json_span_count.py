"""The number of spans in an OTLP/JSON ``ExportTraceServiceRequest``, counted without reading the request.

A pre-scan for the span bound: it walks the request's structure (the request object, each ``resourceSpans``
element, each ``scopeSpans`` element) and, in each ``spans`` array, decodes one element at a time with the
standard library's C scanner (``json.JSONDecoder.raw_decode``) and lets it go, so its memory is one span's, not the
whole body's objects, and nothing is converted to protobuf. Every value it does not need (a resource, a scope, an
attribute, an unknown key) is skipped the same way.

It counts what the reader (:mod:`otel_tracefence.otlp.json_reader`) reads as spans: the elements of the ``spans``
arrays under ``scopeSpans`` / ``scope_spans`` (and OTLP 0.x's ``instrumentationLibrarySpans`` /
``instrumentation_library_spans``) under ``resourceSpans`` / ``resource_spans``, every element, readable or not
(an element that is not a span is one the reader would reject: it is still a span sent). JSON it cannot walk (not
JSON, nested too deep, not an object at the top) gives ``None``: the reader then says what is wrong, as before.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Callable

_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_REQUEST_KEYS = frozenset({"resourceSpans", "resource_spans"})
_RESOURCE_KEYS = frozenset({"scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans"})


class _Malformed(Exception):
    """The text is not JSON the walk can follow."""


def count_json_spans(text: str) -> int | None:
    """The spans of the OTLP/JSON request ``text`` (one JSON object), or ``None`` when it is not JSON, not an object,
    or nested past Python's recursion limit. Its memory is that of the largest single value it skips (a span, a
    resource), never that of the whole request."""
    counted = [0]
    try:
        i = _ws(text, 0)
        if text[i] != "{":
            return None
        end = _object(text, i, lambda key, at: _resource_spans(text, at, counted) if key in _REQUEST_KEYS else _skip(text, at))
        if _ws(text, end) != len(text):
            return None
    except (_Malformed, IndexError, ValueError, RecursionError):  # ValueError: JSONDecodeError, an int past the digit limit
        return None
    return counted[0]


def _resource_spans(text: str, at: int, counted: list[int]) -> int:
    if text[at] != "[":
        return _skip(text, at)
    return _array(text, at, lambda i: _object(text, i, lambda key, j: _scope_spans(text, j, counted) if key in _RESOURCE_KEYS else _skip(text, j)) if text[i] == "{" else _skip(text, i))


def _scope_spans(text: str, at: int, counted: list[int]) -> int:
    if text[at] != "[":
        return _skip(text, at)
    return _array(text, at, lambda i: _object(text, i, lambda key, j: _spans(text, j, counted) if key == "spans" else _skip(text, j)) if text[i] == "{" else _skip(text, i))


def _spans(text: str, at: int, counted: list[int]) -> int:
    if text[at] != "[":
        return _skip(text, at)

    def one(i: int) -> int:
        counted[0] += 1
        return _skip(text, i)

    return _array(text, at, one)


def _ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]  # always matches (possibly empty)


def _skip(text: str, i: int) -> int:
    """The end of the JSON value starting at ``i`` (decoded by the C scanner and let go)."""
    _, end = _DECODER.raw_decode(text, i)
    return end


def _object(text: str, i: int, on_value: Callable[[str, int], int]) -> int:
    """Walk the object at ``i`` (``text[i] == "{"``); ``on_value(key, at)`` returns the end of each value."""
    i = _ws(text, i + 1)
    if text[i] == "}":
        return i + 1
    while True:
        if text[i] != '"':
            raise _Malformed
        key, i = scanstring(text, i + 1)
        i = _ws(text, i)
        if text[i] != ":":
            raise _Malformed
        i = _ws(text, on_value(key, _ws(text, i + 1)))
        if text[i] == ",":
            i = _ws(text, i + 1)
        elif text[i] == "}":
            return i + 1
        else:
            raise _Malformed


def _array(text: str, i: int, on_element: Callable[[int], int]) -> int:
    """Walk the array at ``i`` (``text[i] == "["``); ``on_element(at)`` returns the end of each element."""
    i = _ws(text, i + 1)
    if text[i] == "]":
        return i + 1
    while True:
        i = _ws(text, on_element(i))
        if text[i] == ",":
            i = _ws(text, i + 1)
        elif text[i] == "]":
            return i + 1
        else:
            raise _Malformed


__all__ = ["count_json_spans"]
