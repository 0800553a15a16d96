"""Results that say the call failed although its span says ok: the shapes, in one place.

A tool span whose status is OK (or unset) but whose recorded result is an error is
not a committed write: its status is ``error`` with the note ``error_in_result``.
The shapes below are what producers really record; operators add their own with
``result_error_shapes`` in the YAML config (:class:`~otel_tracefence.config.ResultErrorShape`).

Sources:

* MCP ``CallToolResult.isError`` (MCP specification, "Tools", error handling);
  Anthropic's ``tool_result`` blocks use ``is_error``.
* Content parts ``{"type": "error", ...}`` (MCP and agent frameworks' error parts).
* A top-level ``"error"`` object or message (JSON-RPC 2.0, most HTTP APIs).
* ``"response_status": "Error"`` (OpenLLMetry and CrewAI tool outputs); a top-level
  ``"status"`` of ``error``, ``failed`` or ``failure`` (LangChain's ``ToolMessage``
  ``status: "error"``, most job APIs); ``"success": false`` and ``"ok": false``.
* GraphQL: a non-empty top-level ``"errors"`` list (GraphQL specification, "Response").
* An HTTP status code of 500 to 599 (RFC 9110 section 15.6, server errors); 4xx are
  refusals, which the API did not carry out, so they are not listed.
"""

from __future__ import annotations

from typing import Any, Iterable

import cython

from otel_tracefence.config import ResultErrorShape

DEFAULT_SHAPES: tuple[ResultErrorShape, ...] = (
    ResultErrorShape(key="isError", equals=True, anywhere=True),
    ResultErrorShape(key="is_error", equals=True, anywhere=True),
    ResultErrorShape(key="type", equals="error", anywhere=True),
    ResultErrorShape(key="error", present=True),
    ResultErrorShape(key="response_status", equals="error"),
    ResultErrorShape(key="status", equals="error"),
    ResultErrorShape(key="status", equals="failed"),
    ResultErrorShape(key="status", equals="failure"),
    ResultErrorShape(key="success", equals=False),
    ResultErrorShape(key="ok", equals=False),
    ResultErrorShape(key="errors", present=True),
    ResultErrorShape(key="status_code", at_least=500, below=600, anywhere=True),
    ResultErrorShape(key="statusCode", at_least=500, below=600, anywhere=True),
    ResultErrorShape(key="http_status", at_least=500, below=600, anywhere=True),
)
MAX_DEPTH = 8  # how deep "anywhere" looks: content parts sit two or three levels down

ShapeIndex = dict[str, tuple[tuple[int, ResultErrorShape], ...]]


def _shape_index(shapes: tuple[ResultErrorShape, ...]) -> ShapeIndex:
    """Each key a shape looks for, with the shapes looking for it and their positions in ``shapes``, in order."""
    index: dict[str, list[tuple[int, ResultErrorShape]]] = {}
    for position, shape in enumerate(shapes):
        index.setdefault(shape.key, []).append((position, shape))
    return {key: tuple(entries) for key, entries in index.items()}


_DEFAULT_INDEX = _shape_index(DEFAULT_SHAPES)


def _objects(value: Any, depth: int) -> Iterable[tuple[dict, int]]:
    """Every JSON object in ``value`` down to ``MAX_DEPTH`` levels, with its depth (0 = the result itself)."""
    stack = [(value, depth)]
    while stack:
        node, level = stack.pop()
        if level > MAX_DEPTH:
            continue
        if isinstance(node, dict):
            yield node, level
            stack.extend((child, level + 1) for child in node.values() if isinstance(child, (dict, list)))
        elif isinstance(node, list):
            stack.extend((child, level + 1) for child in node if isinstance(child, (dict, list)))


# What each default shape said of a short scalar value, by (position in DEFAULT_SHAPES, type, value): the shapes
# are frozen and ``says_error`` depends on the shape and the value only, while each call is an interpreted pydantic
# method reading the shape's fields through pydantic's attribute hook (about 3,000 instructions). Bounded: values
# of other types, strings longer than _SAID_LONGEST and values past _SAID_MOST entries are asked every time.
_SAID: dict = {}
_SAID_MOST = 4096
_SAID_LONGEST = 64
_SAID_TYPES = frozenset({str, int, float, bool, type(None)})


@cython.ccall
def _says_error(shape: ResultErrorShape, position: int, value: Any, remembered: bool) -> bool:
    """``shape.says_error(value)``; with ``remembered`` (``shape`` is ``DEFAULT_SHAPES[position]``), what it
    said of a short scalar value before is taken from :data:`_SAID`."""
    kind = type(value)
    if not remembered or kind not in _SAID_TYPES or (kind is str and len(value) > _SAID_LONGEST):
        return shape.says_error(value)
    key = (position, kind, value)
    said = _SAID.get(key)
    if said is None:
        said = shape.says_error(value)
        if len(_SAID) < _SAID_MOST:
            _SAID[key] = said
    return said


@cython.ccall
def _first_shape(obj: dict, top: bool, index: ShapeIndex) -> ResultErrorShape | None:
    """The first shape (in the shapes' order) that says one object is an error: only the shapes that may look
    below the top (``anywhere``) unless ``top``. Reads only the object's keys some shape looks for."""
    found: ResultErrorShape | None = None
    found_at = -1
    remembered = index is _DEFAULT_INDEX
    for key, value in obj.items():
        entries = index.get(key)
        if entries is None:
            continue
        for position, shape in entries:
            if found is not None and position > found_at:
                break
            if (top or shape.anywhere) and _says_error(shape, position, value, remembered):
                found, found_at = shape, position
                break
    return found


@cython.ccall
def _flat(obj: dict) -> bool:
    """True when no value of ``obj`` is an object or array (a loop: no generator)."""
    for value in obj.values():
        if isinstance(value, (dict, list)):
            return False
    return True


def error_shape(result: Any, shapes: Iterable[ResultErrorShape]) -> ResultErrorShape | None:
    """The first shape that says ``result`` (a parsed JSON value) is an error, or ``None``. Objects are looked
    at from the result down, and the first object one shape says is an error gives the first such shape."""
    index = _DEFAULT_INDEX if shapes is DEFAULT_SHAPES else _shape_index(tuple(shapes))
    if type(result) is dict and _flat(result):
        return _first_shape(result, True, index)  # the common flat object: itself only, without the walk
    for obj, level in _objects(result, 0):
        shape = _first_shape(obj, level == 0, index)
        if shape is not None:
            return shape
    return None
