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
_DEFAULT_KEYS = frozenset(shape.key for shape in DEFAULT_SHAPES)
MAX_DEPTH = 8  # how deep "anywhere" looks: content parts sit two or three levels down


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


def error_shape(result: Any, shapes: Iterable[ResultErrorShape]) -> ResultErrorShape | None:
    """The first shape that says ``result`` (a parsed JSON value) is an error, or ``None``."""
    shapes = tuple(shapes)
    keys = _DEFAULT_KEYS if shapes is DEFAULT_SHAPES else frozenset(shape.key for shape in shapes)
    if type(result) is dict and result.keys().isdisjoint(keys) and not any(isinstance(v, (dict, list)) for v in result.values()):
        return None  # the common flat object with none of the keys: what the walk below would find, without it
    for obj, level in _objects(result, 0):
        if obj.keys().isdisjoint(keys):  # no key any shape looks for
            continue
        for shape in shapes:
            if (level == 0 or shape.anywhere) and shape.key in obj and shape.says_error(obj[shape.key]):
                return shape
    return None
