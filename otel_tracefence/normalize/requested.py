"""Tool calls a model requested, read from its recorded output.

GenAI semantic conventions: ``gen_ai.output.messages`` holds messages whose
``parts`` include ``{"type": "tool_call", "id", "name", "arguments"}``.
OpenInference: ``llm.output_messages.<i>.message.tool_calls.<j>.tool_call.{id,
function.name, function.arguments}``. A requested call that no tool span
records is a step too: the trace cannot show whether it ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from otel_tracefence.canonical import JSONTextError, parse_json_text
from otel_tracefence.config import Limits
from otel_tracefence.normalize import conventions as cv
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.values import Arguments, arguments_from_value

_OPENINFERENCE = re.compile(cv.OPENINFERENCE_TOOL_CALL_PATTERN)


@dataclass(frozen=True, slots=True)
class RequestedCall:
    """One tool call in a model's output: its id (if any), tool name and arguments."""

    call_id: str | None
    tool: str
    arguments: Arguments
    span: SpanView
    index: int


def _genai_calls(span: SpanView, limits: Limits) -> Iterator[tuple[str | None, str, Any]]:
    messages = span.attributes.get(cv.GEN_AI_OUTPUT_MESSAGES)
    if isinstance(messages, str):
        try:
            messages = parse_json_text(messages)
        except (JSONTextError, RecursionError):
            return
    if not isinstance(messages, list):
        return
    for message in messages:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict) and part.get("type") == "tool_call" and isinstance(part.get("name"), str):
                call_id = part.get("id")
                yield (str(call_id) if call_id not in (None, "") else None), part["name"], part.get("arguments")


def _index(digits: str) -> tuple[int, str]:
    """An index of ASCII digits as a sort key in numeric order, without ``int()``: an attribute key
    may hold more digits than ``int()`` converts (Python's 4300-digit limit raises ValueError)."""
    significant = digits.lstrip("0")
    return len(significant), significant


def _openinference_calls(span: SpanView) -> Iterator[tuple[str | None, str, Any]]:
    found: dict[tuple[tuple[int, str], tuple[int, str]], dict[str, Any]] = {}
    for key, value in span.attributes.items():
        if not key.startswith("llm.output_messages."):
            continue
        match = _OPENINFERENCE.match(key)
        if match:
            found.setdefault((_index(match.group(1)), _index(match.group(2))), {})[match.group(3)] = value
    for _, fields in sorted(found.items()):
        name = fields.get("function.name")
        if isinstance(name, str) and name:
            call_id = fields.get("id")
            yield (str(call_id) if call_id not in (None, "") else None), name, fields.get("function.arguments")


def requested_calls(span: SpanView, limits: Limits) -> list[RequestedCall]:
    """Every tool call the model asked for in this (model or agent) span's recorded output."""
    attributes = span.attributes
    if cv.GEN_AI_OUTPUT_MESSAGES not in attributes and attributes.get("openinference.span.kind") != "LLM":
        return []  # the common case, checked without scanning every attribute key
    calls = []
    for index, (call_id, tool, raw) in enumerate([*_genai_calls(span, limits), *_openinference_calls(span)]):
        arguments = arguments_from_value(raw, limits) if raw is not None else Arguments()
        calls.append(RequestedCall(call_id, tool, arguments, span, index))
    return calls
