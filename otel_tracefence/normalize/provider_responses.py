"""Requested calls in a model provider's raw response, or a run's chat transcript, recorded as a span's output
(docs/DECISIONS.md 967, 982).

OpenInference records the provider's response body as ``output.value`` on its LLM spans; with
``OPENINFERENCE_HIDE_OUTPUT_MESSAGES`` (or an instrumentation that writes no indexed output messages) it is the only
record of the calls the model asked for. An agent framework may record its run's messages (OpenAI's chat format) as
its agent span's output (CrewAI's TaskOutput): where no model span records them, they are the requests' only record.
The formats are a table, ``conventions.PROVIDER_RESPONSE_CALLS``: for each, the path to its call objects and the keys
of a call's id, tool name and arguments. Read only where the span's other keys gave no call."""

from __future__ import annotations

from typing import Any, Iterator

from otel_tracefence.core.canonical import JSONTextError, parse_json_text
from otel_tracefence.normalize.conventions import PROVIDER_RESPONSE_CALLS

Call = tuple[str | None, str, Any]  # (call id, tool name, raw arguments), as requested.py's
_TOP_KEYS = frozenset(path[0] for _, path, *_ in PROVIDER_RESPONSE_CALLS)
_CALL_TYPES = {"OpenAI Responses": "function_call", "Anthropic Messages": "tool_use"}  # the item type a list's calls have


def provider_response_calls(value: Any) -> Iterator[Call]:
    """The calls in one recorded response body (JSON text or a parsed object), in order; nothing for a value that is
    no JSON object with a provider format's top-level key."""
    if isinstance(value, str):
        if not value.startswith("{") or not any(f'"{key}"' in value for key in _TOP_KEYS):
            return
        try:
            value = parse_json_text(value)
        except (JSONTextError, RecursionError):
            return
    if not isinstance(value, dict) or _TOP_KEYS.isdisjoint(value):
        return
    for name, path, id_key, name_path, arguments_path, _ in PROVIDER_RESPONSE_CALLS:
        for call in _walk(value, path):
            if not isinstance(call, dict) or (name in _CALL_TYPES and call.get("type") != _CALL_TYPES[name]):
                continue
            tool = _at(call, name_path)
            if isinstance(tool, str) and tool:
                call_id = call.get(id_key)
                yield (str(call_id) if isinstance(call_id, (str, int)) and call_id != "" else None), tool, _at(call, arguments_path)


def _walk(value: Any, path: tuple) -> Iterator[Any]:
    """Every value at ``path`` in ``value`` ("*": each item of a list)."""
    if not path:
        yield value
        return
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(value, list):
            for item in value:
                yield from _walk(item, rest)
    elif isinstance(value, dict) and head in value:
        yield from _walk(value[head], rest)


def _at(value: Any, path: tuple) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
