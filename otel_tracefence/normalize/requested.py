"""Tool calls a model requested, read from its recorded output.

* GenAI semantic conventions: ``gen_ai.output.messages`` (an attribute, or in a
  ``gen_ai.client.inference.operation.details`` event) holds messages whose ``parts``
  include ``{"type": "tool_call", "id", "name", "arguments"}``.
* GenAI span events as Strands Agents writes them: a ``gen_ai.choice`` event whose
  ``message`` holds content blocks ``{"toolUse": {"toolUseId", "name", "input"}}``.
* OpenAI-shaped messages: ``{"tool_calls": [{"id", "function": {"name", "arguments"}}]}``.
* OpenInference: ``llm.output_messages.<i>.message.tool_calls.<j>.tool_call.{id,
  function.name, function.arguments}``.
* Older OpenLLMetry: ``gen_ai.completion.<i>.tool_calls.<j>.{id, name, arguments}``.
* Haystack: ``tool_call`` parts in a model span's recorded replies (``haystack.py``).

A requested call that no tool span records is a step too: the trace cannot show whether it ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from otel_tracefence.canonical import JSONTextError, parse_json_text
from otel_tracefence.config import Limits
from otel_tracefence.normalize.conventions import (
    GEN_AI_OUTPUT_MESSAGES, HAYSTACK_MODEL_OUTPUT_KEYS, OPENINFERENCE_TOOL_CALL_PATTERN, OPENLLMETRY_MODEL_SPAN_KEY, OPENLLMETRY_TOOL_CALL_PATTERN, OUTPUT_EVENTS,
)
from otel_tracefence.normalize import haystack
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.values import Arguments, arguments_from_value

_OPENINFERENCE = re.compile(OPENINFERENCE_TOOL_CALL_PATTERN)
_OPENLLMETRY = re.compile(OPENLLMETRY_TOOL_CALL_PATTERN)
_OUTPUT_EVENT_NAMES = frozenset(name for name, _ in OUTPUT_EVENTS)

Call = tuple[str | None, str, Any]  # (call id, tool name, raw arguments)


@dataclass(frozen=True, slots=True)
class RequestedCall:
    """One tool call in a model's output: its id (if any), tool name and arguments."""

    call_id: str | None
    tool: str
    arguments: Arguments
    span: SpanView
    index: int


def _id(value: Any) -> str | None:
    return str(value) if value not in (None, "") and not isinstance(value, (dict, list)) else None


def _part_call(part: dict) -> Call | None:
    """A tool call held by one content part or block: GenAI ``tool_call``, Anthropic ``tool_use``,
    OpenAI Responses ``function_call``, Bedrock/Strands ``toolUse``."""
    kind = part.get("type")
    if kind in ("tool_call", "function_call") and isinstance(part.get("name"), str):
        return _id(part.get("call_id", part.get("id"))), part["name"], part.get("arguments")
    if kind == "tool_use" and isinstance(part.get("name"), str):
        return _id(part.get("id")), part["name"], part.get("input")
    use = part.get("toolUse")
    if isinstance(use, dict) and isinstance(use.get("name"), str):
        return _id(use.get("toolUseId")), use["name"], use.get("input")
    return None


def _message_calls(messages: Any) -> Iterator[Call]:
    """Tool calls in a list of messages or content blocks (or one message), in any of the shapes above."""
    if isinstance(messages, str):
        try:
            messages = parse_json_text(messages)
        except (JSONTextError, RecursionError):
            return
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return
    for message in messages:
        if not isinstance(message, dict):
            continue
        call = _part_call(message)  # a list of content blocks rather than of messages
        if call is not None:
            yield call
            continue
        blocks = message.get("parts", message.get("content"))
        for part in blocks if isinstance(blocks, list) else ():
            call = _part_call(part) if isinstance(part, dict) else None
            if call is not None:
                yield call
        tool_calls = message.get("tool_calls")
        for tool_call in tool_calls if isinstance(tool_calls, list) else ():
            function = tool_call.get("function") if isinstance(tool_call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                yield _id(tool_call.get("id")), function["name"], function.get("arguments")


def _event_calls(span: SpanView) -> Iterator[Call]:
    for event in span.events:
        if event.name not in _OUTPUT_EVENT_NAMES:
            continue
        for name, key in OUTPUT_EVENTS:
            if event.name == name and key in event.attributes:
                yield from _message_calls(event.attributes[key])


def _index(digits: str) -> tuple[int, str]:
    """An index of ASCII digits as a sort key in numeric order, without ``int()``: an attribute key
    may hold more digits than ``int()`` converts (Python's 4300-digit limit raises ValueError)."""
    significant = digits.lstrip("0")
    return len(significant), significant


def _indexed_calls(span: SpanView, prefix: str, pattern: re.Pattern[str], name_field: str, arguments_field: str) -> Iterator[Call]:
    """Calls flattened into indexed attribute keys (OpenInference, older OpenLLMetry)."""
    found: dict[tuple[tuple[int, str], tuple[int, str]], dict[str, Any]] = {}
    for key, value in span.attributes.items():
        if not key.startswith(prefix):
            continue
        match = pattern.match(key)
        if match:
            found.setdefault((_index(match.group(1)), _index(match.group(2))), {})[match.group(3)] = value
    for _, fields in sorted(found.items()):
        name = fields.get(name_field)
        if isinstance(name, str) and name:
            yield _id(fields.get("id")), name, fields.get(arguments_field)


def _has_indexed_calls(span: SpanView) -> bool:
    """True for the model spans whose conventions flatten calls into indexed keys: OpenInference
    ``LLM`` spans, OpenLLMetry's (``llm.request.type``). Checked without scanning every key."""
    attributes = span.attributes
    return attributes.get("openinference.span.kind") == "LLM" or OPENLLMETRY_MODEL_SPAN_KEY in attributes


def _output_texts(span: SpanView) -> Iterator[str]:
    value = span.attributes.get(GEN_AI_OUTPUT_MESSAGES)
    if isinstance(value, str):
        yield value
    for event in span.events:
        for name, key in OUTPUT_EVENTS:
            if event.name == name and isinstance(event.attributes.get(key), str):
                yield event.attributes[key]


def unread_output(span: SpanView) -> str | None:
    """Why a model span's recorded output, which mentions tools, could not be read (cut off, not
    JSON), or ``None``: calls it may hold are then unknown, and the trace is held."""
    if not span.events and GEN_AI_OUTPUT_MESSAGES not in span.attributes:  # no recorded output at all
        return None
    for text in _output_texts(span):
        if "tool" not in text.lower() and "function" not in text.lower():
            continue
        try:
            parse_json_text(text)
        except JSONTextError as exc:
            return f"its recorded output mentions tools but is {exc}"
        except RecursionError:
            return "its recorded output mentions tools but is nested too deep to read"
    return None


# Every key one of the readers below looks for first: a span with none of them and no events requested nothing.
REQUEST_KEYS = frozenset((GEN_AI_OUTPUT_MESSAGES, *HAYSTACK_MODEL_OUTPUT_KEYS, "openinference.span.kind", OPENLLMETRY_MODEL_SPAN_KEY))


def requested_calls(span: SpanView, limits: Limits) -> list[RequestedCall]:
    """Every tool call the model asked for in this (model or agent) span's recorded output."""
    attributes = span.attributes
    if not span.events and REQUEST_KEYS.isdisjoint(attributes):  # most spans: one C-level set test
        return []
    found: list[Call] = []
    if GEN_AI_OUTPUT_MESSAGES in attributes:
        found.extend(_message_calls(attributes[GEN_AI_OUTPUT_MESSAGES]))
    if span.events:
        found.extend(_event_calls(span))
    if HAYSTACK_MODEL_OUTPUT_KEYS[0] in attributes or HAYSTACK_MODEL_OUTPUT_KEYS[1] in attributes:
        found.extend(haystack.requested(span))
    if _has_indexed_calls(span):
        found.extend(_indexed_calls(span, "llm.output_messages.", _OPENINFERENCE, "function.name", "function.arguments"))
        found.extend(_indexed_calls(span, "gen_ai.completion.", _OPENLLMETRY, "name", "arguments"))
    calls = []
    for index, (call_id, tool, raw) in enumerate(found):
        arguments = arguments_from_value(raw, limits) if raw is not None else Arguments()
        calls.append(RequestedCall(call_id, tool, arguments, span, index))
    return calls
