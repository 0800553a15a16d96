"""Tool calls a model requested, read from its recorded output.

* GenAI semantic conventions: ``gen_ai.output.messages`` (an attribute, or in a
  ``gen_ai.client.inference.operation.details`` event) holds messages whose ``parts``
  include ``{"type": "tool_call", "id", "name", "arguments"}``.
* GenAI span events as Strands Agents writes them: a ``gen_ai.choice`` event whose
  ``message`` holds content blocks ``{"toolUse": {"toolUseId", "name", "input"}}``. On an agent span, an event
  whose finish reason says the run paused for human input (``conventions.PAUSE_FINISH_REASONS``) records the
  pause: its text, when not JSON, holds no call (docs/DECISIONS.md 601).
* OpenAI-shaped messages: ``{"tool_calls": [{"id", "function": {"name", "arguments"}}]}``.
* OpenInference: ``llm.output_messages.<i>.message.tool_calls.<j>.tool_call.{id,
  function.name, function.arguments}``.
* Indexed completion keys, on any span that carries them, as OpenInference's above (docs/DECISIONS.md 440): older OpenLLMetry,
  ``gen_ai.completion.<i>.tool_calls.<j>.{id, name, arguments}``; LiteLLM's OpenTelemetry callback and OpenLLMetry's
  legacy form, ``gen_ai.completion.<i>.function_call.{name, arguments}`` (no id: the call's index is the slot's);
  the same under ``llm.completions.<i>`` (the Traceloop SDK before the gen_ai rename).
* Haystack: ``tool_call`` parts in a model span's recorded replies (``haystack.py``).
* LangSmith's OpenTelemetry export: a model run's ``gen_ai.completion``, LangChain's ``LLMResult`` whose
  generations' messages hold LangChain ``tool_calls`` ``[{"name", "args", "id"}]`` (``conventions.LANGSMITH_OUTPUT_KEY``).
* A framework's own output fields (DSPy ReAct's ``next_tool_name`` / ``next_tool_args``, ReActV2's ``tool_calls``) in
  OpenInference ``output.value``: ``output_fields.py`` (docs/DECISIONS.md 963).
* The Vercel AI SDK: ``ai.response.toolCalls``, JSON text of ``[{"toolCallId", "toolName", "args" | "input"}]``
  (``conventions.VERCEL_TOOL_CALLS_KEY``; docs/DECISIONS.md 341).

A requested call that no tool span records is a step too: the trace cannot show whether it ran.
A call the reader finds but cannot read (a call part or entry with no readable name or id, a part
of a type no convention above defines that names a tool, function or call) is never dropped: it is
described in the ``unread`` list of :func:`requested_calls`, and holds its trace (docs/DECISIONS.md 188).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from otel_tracefence.core.canonical import JSONTextError, parse_json_text
from otel_tracefence.core.config import Limits
from otel_tracefence.normalize.conventions import (
    GEN_AI_OPERATION, GEN_AI_OUTPUT_MESSAGES, INVOKE_AGENT, LANGSMITH_KIND_KEY, LANGSMITH_MODEL_KINDS, LANGSMITH_OUTPUT_KEY, PAUSE_FINISH_REASON_KEY, PAUSE_FINISH_REASONS, HAYSTACK_MODEL_OUTPUT_KEYS, INDEXED_CALL_PREFIXES, INDEXED_COMPLETION_PREFIXES, OPENINFERENCE_TOOL_CALL_PATTERN, OPENLLMETRY_MODEL_SPAN_KEY,
    OPENLLMETRY_TOOL_CALL_PATTERN, OUTPUT_EVENTS, OUTPUT_TOOL_KIND, OUTPUT_TOOLS_FIELD, OUTPUT_TOOLS_KEY,
    VERCEL_OUTPUT_KEYS, VERCEL_TOOL_CALLS_KEY, CALL_REFERENCE_KEYS, OUTPUT_FIELDS_KEY, CALL_RECORD_ARGUMENT_FIELDS, CALL_RECORD_KEYS, CALL_RECORD_LIST_FIELD, PROVIDER_RESPONSE_KEYS,
    COMPLETION_JSON_KEY, GEMINI_PART_CALL_KEYS,
)
from otel_tracefence.normalize import haystack
from otel_tracefence.normalize.provider_responses import provider_response_calls
from otel_tracefence.normalize.output_fields import Unread, output_field_calls
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.values import Arguments, arguments_from_value

_OPENINFERENCE = re.compile(OPENINFERENCE_TOOL_CALL_PATTERN)
_OPENLLMETRY = re.compile(OPENLLMETRY_TOOL_CALL_PATTERN)
_OUTPUT_EVENT_NAMES = frozenset(name for name, _ in OUTPUT_EVENTS)

Call = tuple[str | None, str, Any]  # (call id, tool name, raw arguments)
# Part types that hold no call: GenAI text, reasoning, blob, file, uri and tool_call_response parts, OpenAI,
# Anthropic and Bedrock content and result blocks. Any other type naming a tool, function or call may be a call.
NOT_CALL_PART_TYPES = frozenset({
    "text", "reasoning", "thinking", "redacted_thinking", "blob", "file", "uri", "image", "image_url", "audio",
    "input_text", "output_text", "refusal", "message", "tool_call_response", "tool_result", "function_call_output",
})
CALL_WORDS = ("tool", "function", "call")


@dataclass(frozen=True, slots=True)
class RequestedCall:
    """One tool call in a model's output: its id (if any), tool name and arguments."""

    call_id: str | None
    tool: str
    arguments: Arguments
    span: SpanView
    index: int
    echoed: bool = False  # read from a framework's output fields: no call id, recorded again around its model (963)


def _id(value: Any) -> str | None:
    return str(value) if value not in (None, "") and not isinstance(value, (dict, list)) else None


def _call(where: str, raw_id: Any, name: Any, arguments: Any) -> Call | Unread:
    """A call from its fields, or what made it unreadable: a name that is no non-empty string, an id
    given as something other than a string or number."""
    if not isinstance(name, str) or not name:
        return Unread(f"{where} with no readable name")
    call_id = _id(raw_id)
    if call_id is None and raw_id not in (None, ""):
        return Unread(f"{where} {name!r} whose id is not readable")
    return call_id, name, arguments


def _part_call(part: dict) -> Call | Unread | None:
    """A tool call held by one content part or block: GenAI ``tool_call``, Anthropic ``tool_use``,
    OpenAI Responses ``function_call``, Bedrock/Strands ``toolUse``; :class:`Unread` for one of these
    that cannot be read, or a part of another type that names a tool, function or call."""
    kind = part.get("type")
    if kind in ("tool_call", "function_call"):
        return _call(f"a {kind} part", part.get("call_id", part.get("id")), part.get("name"), part.get("arguments"))
    if kind == "tool_use":
        return _call("a tool_use part", part.get("id"), part.get("name"), part.get("input"))
    use = part.get("toolUse")
    if use is not None:
        if not isinstance(use, dict):
            return Unread("a toolUse block that is not an object")
        return _call("a toolUse block", use.get("toolUseId"), use.get("name"), use.get("input"))
    if kind is None:
        for key in GEMINI_PART_CALL_KEYS:
            if key in part:
                return _gemini_call(key, part[key])
    if isinstance(kind, str) and kind not in NOT_CALL_PART_TYPES and any(word in kind.lower() for word in CALL_WORDS):
        return Unread(f"a part of type {kind!r}, which no convention read here defines")
    return None


def _gemini_call(key: str, call: Any) -> Call | Unread:
    """A Gemini ``FunctionCall`` held by a part of no type (``GEMINI_PART_CALL_KEYS``, docs/DECISIONS.md 978)."""
    if not isinstance(call, dict):
        return Unread(f"a {key} part that is not an object")
    return _call(f"a {key} part", call.get("id"), call.get("name"), call.get("args", call.get("arguments")))


_CALL_PART_TYPES = frozenset({"tool_call", "function_call", "tool_use"})


def _block_calls(blocks: list) -> list[Call | Unread | None]:
    """:func:`_part_call` of each of one message's parts (or of a list of content blocks), in order; a part of a type
    no convention defines whose every reference names a call another part of the same list requests adds no call:
    ``None`` (:func:`_references`, docs/DECISIONS.md 961)."""
    found = [_part_call(block) if isinstance(block, dict) else None for block in blocks]
    if not any(isinstance(call, Unread) for call in found):
        return found
    requested = {call[0]: call for call in found if isinstance(call, tuple) and call[0] is not None}
    for index, (block, call) in enumerate(zip(blocks, found)):
        if isinstance(call, Unread) and block.get("type") not in _CALL_PART_TYPES and "toolUse" not in block and not _gemini_part(block):
            references = _references(block)
            if references and all(_same_call(requested.get(ref[0]), ref) for ref in references):
                found[index] = None
    return found


def _gemini_part(block: dict) -> bool:
    return block.get("type") is None and any(key in block for key in GEMINI_PART_CALL_KEYS)


def _references(part: dict) -> list[Call]:
    """The calls a part of an unknown type refers to: each nested object that is itself a readable call part (its id,
    tool and arguments), and each ``conventions.CALL_REFERENCE_KEYS`` value at its top level (an id alone: no tool,
    arguments ``None``). An empty list when it refers to none, or to one it names unreadably."""
    references: list[Call] = []
    for key, value in part.items():
        if isinstance(value, dict):
            nested = _part_call(value)
            if isinstance(nested, Unread) or (nested is not None and nested[0] is None):
                return []
            if nested is not None:
                references.append(nested)
        elif key in CALL_REFERENCE_KEYS:
            call_id = _id(value)
            if call_id is None:
                return []
            references.append((call_id, "", None))
    return references


def _same_call(requested: Call | None, reference: Call) -> bool:
    """True when ``reference`` names the ``requested`` call: its id, and its tool and arguments where it repeats
    them (JSON text and the value it holds are the same arguments)."""
    if requested is None:
        return False
    if not reference[1]:
        return True
    return requested[1] == reference[1] and _same_raw(requested[2], reference[2])


def _same_raw(first: Any, second: Any) -> bool:
    if first == second:
        return True
    try:
        first = parse_json_text(first) if isinstance(first, str) else first
        second = parse_json_text(second) if isinstance(second, str) else second
    except (JSONTextError, RecursionError):
        return False
    return bool(first == second)


def _message_calls(messages: Any, pause: bool = False) -> Iterator[Call | Unread]:
    """Tool calls in a list of messages or content blocks (or one message), in any of the shapes above. ``pause``:
    the output is an agent run's record of its pause for human input (:func:`_pause_record`), whose text, when it is
    not JSON, holds no call."""
    if isinstance(messages, str):
        try:
            messages = parse_json_text(messages)
        except JSONTextError as exc:  # a text that names no tool cannot hold a call (a plain-text answer)
            if _mentions_tools(messages) and not pause:
                yield Unread(f"recorded output that mentions tools but is {exc}")
            return
        except RecursionError:
            if _mentions_tools(messages) and not pause:
                yield Unread("recorded output that mentions tools but is nested too deep to read")
            return
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return
    for message, call in zip(messages, _block_calls(messages)):
        if not isinstance(message, dict):
            continue
        if call is not None:  # a list of content blocks rather than of messages
            yield call
            continue
        blocks = message.get("parts", message.get("content"))
        if isinstance(blocks, list):
            yield from (call for call in _block_calls(blocks) if call is not None)
        tool_calls = message.get("tool_calls")
        if tool_calls not in (None, []) and not isinstance(tool_calls, list):
            yield Unread("tool_calls that are not a list")
        for tool_call in tool_calls if isinstance(tool_calls, list) else ():
            function = tool_call.get("function") if isinstance(tool_call, dict) else None
            if not isinstance(function, dict):
                yield Unread("a tool_calls entry with no function")
                continue
            yield _call("a tool_calls entry", tool_call.get("id"), function.get("name"), function.get("arguments"))


def _completion_json_calls(value: Any) -> Iterator[Call | Unread]:
    """The calls in a span's whole completion recorded as JSON chat messages (``conventions.COMPLETION_JSON_KEY``,
    Langtrace; docs/DECISIONS.md 978); nothing for a plain-text completion (an answer, which holds no call)."""
    if isinstance(value, str) and value.lstrip()[:1] not in ("[", "{"):
        return
    yield from _message_calls(value)


def _langsmith_model_output(span: SpanView) -> bool:
    """Whether the span is LangSmith's record of a model run with its output (``conventions.LANGSMITH_*``)."""
    kind = span.attributes.get(LANGSMITH_KIND_KEY)
    return isinstance(kind, str) and kind.lower() in LANGSMITH_MODEL_KINDS and LANGSMITH_OUTPUT_KEY in span.attributes


def _langchain_generation_calls(value: Any) -> Iterator[Call | Unread]:
    """The LangChain tool calls of every generation's message in a LangSmith model run's output (an ``LLMResult`` as
    JSON text). Output that is not that shape but names tools is unread; a plain answer holds no call."""
    if isinstance(value, str):
        try:
            value = parse_json_text(value)
        except (JSONTextError, RecursionError) as exc:
            if _mentions_tools(value):
                yield Unread(f"a LangSmith model output that mentions tools but is not JSON ({exc})")
            return
    generations = value.get("generations") if isinstance(value, dict) else None
    if not isinstance(generations, list):
        if isinstance(value, (dict, list)) and _mentions_tools(str(value)):
            yield Unread("a LangSmith model output that mentions tools but holds no generations")
        return
    for group in generations:
        for generation in group if isinstance(group, list) else (group,):
            message = generation.get("message") if isinstance(generation, dict) else None
            if isinstance(message, dict) and message.get("lc") is not None and isinstance(message.get("kwargs"), dict):
                message = message["kwargs"]  # LangChain's serialized form (langchain_core.load.dumpd)
            tool_calls = message.get("tool_calls") if isinstance(message, dict) else None
            if tool_calls in (None, []):
                continue
            if not isinstance(tool_calls, list):
                yield Unread("LangChain tool_calls that are not a list")
                continue
            for tool_call in tool_calls:
                if not isinstance(tool_call, dict) or "args" not in tool_call:
                    yield Unread("a LangChain tool_calls entry with no args")
                    continue
                yield _call("a LangChain tool_calls entry", tool_call.get("id"), tool_call.get("name"), tool_call.get("args"))


def _vercel_calls(value: Any) -> Iterator[Call | Unread]:
    """The calls of the Vercel AI SDK's ``ai.response.toolCalls``: JSON text of a list of
    ``{"toolCallId", "toolName", "input"}`` (AI SDK 5) or ``{..., "args": JSON text}`` (AI SDK 4). Text that does
    not parse, a value that is no list, or an entry that is no object is :class:`Unread`: the calls it holds are
    unknown."""
    if isinstance(value, str):
        try:
            value = parse_json_text(value)
        except JSONTextError as exc:
            yield Unread(f"{VERCEL_TOOL_CALLS_KEY} that is {exc}")
            return
        except RecursionError:
            yield Unread(f"{VERCEL_TOOL_CALLS_KEY} nested too deep to read")
            return
    if not isinstance(value, list):
        yield Unread(f"{VERCEL_TOOL_CALLS_KEY} that is not a list")
        return
    for entry in value:
        if not isinstance(entry, dict):
            yield Unread(f"an {VERCEL_TOOL_CALLS_KEY} entry that is not an object")
            continue
        yield _call(f"an {VERCEL_TOOL_CALLS_KEY} entry", entry.get("toolCallId"), entry.get("toolName"), entry.get("input", entry.get("args")))


def _record_calls(key: str, value: Any) -> Iterator[Call | Unread]:
    """The call records (``{"toolCallId", "toolName", "args"|"input"}``) in a framework's own output object under
    ``key`` (``conventions.CALL_RECORD_KEYS``, docs/DECISIONS.md 959): the object itself, the list under
    ``toolCalls``, or a list of records. A value that is not JSON, and objects without both a call id and a tool
    name, hold no record: such an output is the framework's, not a list of calls."""
    if isinstance(value, str):
        try:
            value = parse_json_text(value)
        except (JSONTextError, RecursionError):
            return
    if isinstance(value, dict) and isinstance(value.get(CALL_RECORD_LIST_FIELD), list):
        value = value[CALL_RECORD_LIST_FIELD]
    for entry in value if isinstance(value, list) else (value,):
        if isinstance(entry, dict) and "toolCallId" in entry and "toolName" in entry:
            arguments = next((entry[field] for field in CALL_RECORD_ARGUMENT_FIELDS if field in entry), None)
            yield _call(f"a {key} record", entry.get("toolCallId"), entry.get("toolName"), arguments)


def _pause_record(span: SpanView, event_attributes: Mapping[str, Any]) -> bool:
    """True for an agent span's output event whose finish reason says the run paused for human input
    (``conventions.PAUSE_FINISH_REASONS``): its message is the framework's record of the pause, not the model's output
    (docs/DECISIONS.md 601)."""
    reason = event_attributes.get(PAUSE_FINISH_REASON_KEY)
    return isinstance(reason, str) and reason in PAUSE_FINISH_REASONS and span.attributes.get(GEN_AI_OPERATION) == INVOKE_AGENT


def _event_calls(span: SpanView) -> Iterator[Call | Unread]:
    for event in span.events:
        if event.name not in _OUTPUT_EVENT_NAMES:
            continue
        for name, key in OUTPUT_EVENTS:
            if event.name == name and key in event.attributes:
                yield from _message_calls(event.attributes[key], _pause_record(span, event.attributes))


def _index(digits: str) -> tuple[int, str]:
    """An index of ASCII digits as a sort key in numeric order, without ``int()``: an attribute key
    may hold more digits than ``int()`` converts (Python's 4300-digit limit raises ValueError)."""
    significant = digits.lstrip("0")
    return len(significant), significant


def _indexed_calls(span: SpanView, prefix: str | tuple, pattern: re.Pattern[str], name_field: str, arguments_field: str) -> Iterator[Call | Unread]:
    """Calls flattened into indexed attribute keys (OpenInference; OpenLLMetry and LiteLLM, ``conventions.OPENLLMETRY_TOOL_CALL_PATTERN``).
    A key of no call index (LiteLLM's ``function_call``) is the slot's one call, after its indexed ones; one that repeats
    an indexed call of its slot (same name and arguments: OpenLLMetry wrote ``function_call`` from ``tool_calls[0]``) is
    that call, read once."""
    found: dict[tuple[tuple[int, str], tuple[int, str]], dict[str, Any]] = {}
    for key, value in span.attributes.items():
        if not key.startswith(prefix):
            continue
        match = pattern.match(key)
        if match:
            slot = match.group(2)
            call = _index(slot) if slot is not None else _SLOT_CALL
            found.setdefault((_index(match.group(1)), call), {})[match.group(3)] = value
    for (message, call), fields in sorted(found.items()):
        if call == _SLOT_CALL:
            indexed = [f for (m, c), f in found.items() if m == message and c != _SLOT_CALL]
            if any(f.get(name_field) == fields.get(name_field) and f.get(arguments_field) == fields.get(arguments_field) for f in indexed):
                continue
            where = f"{_where(prefix)}{message[1] or 0} function call"
        else:
            where = f"{_where(prefix)}{message[1] or 0} tool call {call[1] or 0}"
        yield _call(where, fields.get("id"), fields.get(name_field), fields.get(arguments_field))


# The sort key of a completion slot's call of no index (LiteLLM's function_call): after every indexed one.
_SLOT_CALL = (1 << 30, "")
# A newline, then one of conventions.INDEXED_CALL_PREFIXES and a digit: one key of the joined keys that may hold a call.
_INDEXED_KEY = re.compile("\n(?:" + "|".join(re.escape(prefix) for prefix in INDEXED_CALL_PREFIXES) + ")[0-9]")


def _where(prefix: str | tuple) -> str:
    return prefix if isinstance(prefix, str) else prefix[0]


def has_indexed_call_keys(attributes: Mapping[str, Any]) -> bool:
    """True when an attribute key is one of ``conventions.INDEXED_CALL_PREFIXES`` followed by a slot index: the span
    may hold requested calls in indexed keys, whatever its kind (docs/DECISIONS.md 440). Asked of every span
    (``trace.quiet``): one C-level join of the keys and three substring tests, the pattern only where one matched."""
    if not attributes:
        return False
    try:
        keys = "\n" + "\n".join(attributes)
    except TypeError:  # a key that is no string (only a view built by hand): the string keys
        keys = "\n" + "\n".join(key for key in attributes if isinstance(key, str))
    if "\ngen_ai.completion." in keys or "\nllm.output_messages." in keys or "\nllm.completions." in keys:
        return _INDEXED_KEY.search(keys) is not None
    return False


def _mentions_tools(text: str) -> bool:
    """True when a recorded output's text names a tool or function: one that cannot be parsed may then hold
    requested calls, which are unread (``requested_call_unread``, docs/DECISIONS.md 188, 386)."""
    lowered = text.lower()
    return "tool" in lowered or "function" in lowered


def recorded_output(span: SpanView) -> bool:
    """True when the span recorded its model's output in a form a reader above looks for (content
    capture is opt-in in every convention: without it, no call can be read, and none is missing)."""
    attributes = span.attributes
    if GEN_AI_OUTPUT_MESSAGES in attributes or any(key in attributes for key in HAYSTACK_MODEL_OUTPUT_KEYS + VERCEL_OUTPUT_KEYS):
        return True
    if _langsmith_model_output(span):
        return True
    if any(event.name in _OUTPUT_EVENT_NAMES for event in span.events):
        return True
    return has_indexed_call_keys(attributes)


# Every key one of the readers below looks for first: a span with none of them and no events requested nothing.
REQUEST_KEYS = frozenset((GEN_AI_OUTPUT_MESSAGES, COMPLETION_JSON_KEY, *PROVIDER_RESPONSE_KEYS, *HAYSTACK_MODEL_OUTPUT_KEYS, *VERCEL_OUTPUT_KEYS, *CALL_RECORD_KEYS, "openinference.span.kind", OPENLLMETRY_MODEL_SPAN_KEY, LANGSMITH_KIND_KEY))


def output_tools(span: SpanView) -> frozenset:
    """The names of the output tools the span declares (pydantic-ai's ``model_request_parameters.output_tools``,
    kind ``output``; ``conventions.OUTPUT_TOOLS_KEY``, docs/DECISIONS.md 444): a call of one of them is the model's
    structured answer, which no tool runs. Empty when the span declares none or the declaration cannot be read."""
    value = span.attributes.get(OUTPUT_TOOLS_KEY)
    if isinstance(value, str):
        try:
            value = parse_json_text(value)
        except (JSONTextError, RecursionError):
            return frozenset()
    tools = value.get(OUTPUT_TOOLS_FIELD) if isinstance(value, dict) else None
    if not isinstance(tools, list):
        return frozenset()
    return frozenset(
        tool["name"] for tool in tools
        if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool.get("kind", OUTPUT_TOOL_KIND) == OUTPUT_TOOL_KIND
    )


def requested_calls(span: SpanView, limits: Limits, unread: list[Unread] | None = None) -> list[RequestedCall]:
    """Every tool call the model asked for in this (model or agent) span's recorded output, in order.
    Each call found but not readable is described in ``unread``, when given, instead."""
    attributes = span.attributes
    indexed = has_indexed_call_keys(attributes)
    if not span.events and not indexed and REQUEST_KEYS.isdisjoint(attributes):  # most spans: C-level tests
        return []
    found: list[Call | Unread] = []
    if GEN_AI_OUTPUT_MESSAGES in attributes:
        found.extend(_message_calls(attributes[GEN_AI_OUTPUT_MESSAGES]))
    if span.events:
        found.extend(_event_calls(span))
    if HAYSTACK_MODEL_OUTPUT_KEYS[0] in attributes or HAYSTACK_MODEL_OUTPUT_KEYS[1] in attributes:
        found.extend(haystack.requested(span))
    if VERCEL_TOOL_CALLS_KEY in attributes:
        found.extend(_vercel_calls(attributes[VERCEL_TOOL_CALLS_KEY]))
    if _langsmith_model_output(span):
        found.extend(_langchain_generation_calls(attributes[LANGSMITH_OUTPUT_KEY]))
    elif COMPLETION_JSON_KEY in attributes:
        found.extend(_completion_json_calls(attributes[COMPLETION_JSON_KEY]))
    for key in CALL_RECORD_KEYS:
        if key in attributes:
            found.extend(_record_calls(key, attributes[key]))
    if indexed:  # on any span, whatever its kind (docs/DECISIONS.md 440)
        found.extend(_indexed_calls(span, "llm.output_messages.", _OPENINFERENCE, "function.name", "function.arguments"))
        found.extend(_indexed_calls(span, INDEXED_COMPLETION_PREFIXES, _OPENLLMETRY, "name", "arguments"))
    if not found:  # a provider's raw response, where nothing else named a call (967; Logfire's key, 994)
        for key in PROVIDER_RESPONSE_KEYS:
            if key in attributes:
                found.extend(provider_response_calls(attributes[key]))
                if found:
                    break
    echoed = len(found)  # the calls read below are a framework's output fields (docs/DECISIONS.md 963)
    if OUTPUT_FIELDS_KEY in attributes:
        found.extend(output_field_calls(attributes[OUTPUT_FIELDS_KEY]))
    calls = []
    for index, item in enumerate(found):
        if isinstance(item, Unread):
            if unread is not None:
                unread.append(item)
            continue
        call_id, tool, raw = item
        arguments = arguments_from_value(raw, limits) if raw is not None else Arguments()
        calls.append(RequestedCall(call_id, tool, arguments, span, index, index >= echoed and call_id is None))
    return calls
