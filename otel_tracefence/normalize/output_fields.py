"""Requested calls a framework records only in its own output fields (docs/DECISIONS.md 963).

DSPy's ReAct asks its model for the next call as output fields of a signature (``next_tool_name`` /
``next_tool_args``; ReActV2: ``tool_calls`` ``[{"name", "args"}]``), not as a provider's tool calls. The model's raw
answer holds them in the adapter's sections (``[[ ## next_tool_name ## ]]`` then the value; JSONAdapter: a JSON object),
and each module that returns the parsed prediction records it again (OpenInference ``output.value``). The forms are a
table, ``conventions.OUTPUT_FIELD_CALLS``. The calls carry no id; every record of one turn is one request
(``request_matching``: the records' nearest common span is above no tool step).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from otel_tracefence.core.canonical import JSONTextError, parse_json_text
from otel_tracefence.normalize.conventions import OUTPUT_FIELD_CALLS, OUTPUT_FIELD_SECTION
from otel_tracefence.normalize.values import literal_value

Call = tuple[str | None, str, Any]  # (call id, tool name, raw arguments), as requested.py's
_SECTION = re.compile(OUTPUT_FIELD_SECTION)
_MARK_WORDS = tuple(sorted({field for marks, *_ in OUTPUT_FIELD_CALLS for field in marks}))


class Unread(str):
    """What a call found in output fields could not be read from (``requested.Unread`` takes it as its own)."""

    __slots__ = ()


def output_field_calls(value: Any) -> Iterator[Call | Unread]:
    """The calls in one span's ``conventions.OUTPUT_FIELDS_KEY`` value, in order: each prediction object (JSON text of
    one, or of a list of them and of answers) and each raw answer in sections. Nothing when the value names no field of
    the table (one substring scan per field name: most spans' outputs)."""
    if not isinstance(value, str) or not any(word in value for word in _MARK_WORDS):
        return
    try:
        parsed: Any = parse_json_text(value)
    except (JSONTextError, RecursionError):
        parsed = value  # a raw answer recorded as text
    for item in parsed if isinstance(parsed, list) else (parsed,):
        if isinstance(item, str):
            sections = _sections(item)
            if sections:
                yield from _prediction_calls(sections, raw=True)
                continue
            try:
                item = parse_json_text(item)  # JSONAdapter's answer: a JSON object
            except (JSONTextError, RecursionError):
                continue
        if isinstance(item, dict):
            yield from _prediction_calls(item, raw=False)


def _sections(text: str) -> dict[str, str]:
    """The fields of a raw answer in sections (``[[ ## name ## ]]`` then its text), or ``{}`` when it has none."""
    pieces = _SECTION.split(text)
    return {pieces[i]: pieces[i + 1].strip() for i in range(1, len(pieces) - 1, 2)}


def _prediction_calls(fields: dict, raw: bool) -> Iterator[Call | Unread]:
    """The calls of one prediction (its fields; ``raw``: the texts of a raw answer, each value still to be read)."""
    keys = fields.keys()
    for marks, name_field, arguments_field, calls_field, _ in OUTPUT_FIELD_CALLS:
        if not marks <= keys:
            continue
        if name_field is not None:
            name = fields.get(name_field)
            arguments = fields.get(arguments_field) if arguments_field else None
            if isinstance(arguments, str):
                arguments = literal_value(arguments)
                if isinstance(arguments, str):
                    yield Unread(f"a {name_field} {name!r} whose {arguments_field} is no JSON or Python literal")
                    continue
            if not isinstance(name, str) or not name.strip():
                yield Unread(f"a {name_field} that is no tool name")
                continue
            yield (None, name.strip(), arguments if arguments is not None else {})
        elif calls_field is not None:
            yield from _listed_calls(fields.get(calls_field), calls_field, raw)


def _listed_calls(calls: Any, field: str, raw: bool) -> Iterator[Call | Unread]:
    """The calls of a ``{"name", "args"}`` list field. A module's echo of it as text that is no JSON (DSPy writes the
    ``ToolCalls`` model's ``str()``) holds nothing of its own: the model's raw answer of the turn holds the same calls."""
    if isinstance(calls, str):
        try:
            calls = parse_json_text(calls)
        except (JSONTextError, RecursionError):
            if raw:
                yield Unread(f"a {field} section that is not JSON")
            return
    if isinstance(calls, dict):
        calls = calls.get(field)
    if not isinstance(calls, list):
        if calls is not None:
            yield Unread(f"a {field} field that holds no list of calls")
        return
    for entry in calls:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            yield Unread(f"a {field} entry with no readable name")
            continue
        call_id = entry.get("id")
        if call_id is not None and not isinstance(call_id, (str, int)):
            yield Unread(f"a {field} entry {name!r} whose id is not readable")
            continue
        arguments = entry.get("args")
        yield (str(call_id) if call_id not in (None, "") else None, name, arguments if arguments is not None else {})
