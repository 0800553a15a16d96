"""Haystack's own tracer: tool calls inside one component span, and the model's requested calls.

Haystack 2.x (``haystack-ai``, content tracing on): a ``ToolInvoker`` component span runs
every tool call of one model turn. It records the component's input and output as JSON in
``haystack.component.input`` and ``haystack.component.output``: the input's ``messages``
hold the assistant's ``tool_call`` content parts (``tool_name``, ``arguments``, ``id``),
the output's ``tool_messages`` hold ``tool_call_result`` parts (``result``, ``origin``
naming the call, ``error``). Each call is read as the GenAI ``execute_tool`` span it would
have been, so one rule set reads it.

Haystack 3.x (``opentelemetry-haystack``) gives each call a ``haystack.agent.step.tool``
span of its own (``conventions.py`` reads it); the model's replies, with the calls it asked
for, are in ``haystack.agent.step.llm.output`` (2.x: a chat generator's
``haystack.component.output``).
"""

from __future__ import annotations

from typing import Any, Iterator

from otel_tracefence.core.canonical import JSONTextError, parse_json_text
from otel_tracefence.normalize import conventions as cv
from otel_tracefence.normalize.span_view import SpanView


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return parse_json_text(value)
        except (JSONTextError, RecursionError):
            return None
    return value


def _parts(container: Any, list_key: str, part_key: str) -> Iterator[dict]:
    """The ``part_key`` objects in the content of every message of ``container[list_key]``."""
    messages = container.get(list_key) if isinstance(container, dict) else None
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content", message.get("_content")) if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            inner = part.get(part_key) if isinstance(part, dict) else None
            if isinstance(inner, dict):
                yield inner


def requested(span: SpanView) -> list[tuple[str | None, str, Any]]:
    """The tool calls (call id, tool name, arguments) in the replies a Haystack model span records."""
    found = []
    for key in cv.HAYSTACK_MODEL_OUTPUT_KEYS:
        value = span.attributes.get(key)
        if not isinstance(value, str) or '"tool_call"' not in value:  # most components' output: no JSON parse
            continue
        for call in _parts(_json(value), "replies", "tool_call"):
            name = call.get("tool_name")
            if isinstance(name, str) and name:
                call_id = call.get("id")
                found.append((str(call_id) if call_id not in (None, "") else None, name, call.get("arguments")))
    return found


def labels_are_ambiguous(span: SpanView, calls: list[SpanView]) -> bool:
    """True when ``tracefence.*`` labels sit on an invoker span that ran several calls: ``declare()``
    inside each tool body wrote onto the one shared span, the last call's label winning, so which
    call a label is about cannot be known (its calls are then held, ``malformed_effect``)."""
    return len(calls) > 1 and any(key.startswith("tracefence.") for key in span.attributes)


def tool_calls(span: SpanView) -> list[SpanView]:
    """Each tool call of a ``ToolInvoker`` span as a GenAI ``execute_tool`` view of the same span
    (same ids and times), with its result and error flag when the output records them.
    Empty when the input records no readable call (content tracing off, another shape).
    The span's ``tracefence.*`` labels are given to its call only when it ran one."""
    attributes = span.attributes
    calls = list(_parts(_json(attributes.get(cv.HAYSTACK_COMPONENT_INPUT)), "messages", "tool_call"))
    results: dict[str, dict] = {}
    for result in _parts(_json(attributes.get(cv.HAYSTACK_COMPONENT_OUTPUT)), "tool_messages", "tool_call_result"):
        origin = result.get("origin")
        if isinstance(origin, dict) and origin.get("id") not in (None, ""):
            results.setdefault(str(origin["id"]), result)
    views = []
    for call in calls:
        name = call.get("tool_name")
        if not isinstance(name, str) or not name:
            continue
        call_attributes: dict[str, Any] = {cv.GEN_AI_OPERATION: cv.EXECUTE_TOOL, cv.GEN_AI_TOOL_NAME: name}
        if len(calls) == 1:
            for key, value in attributes.items():
                if key.startswith("tracefence."):
                    call_attributes[key] = value  # labels on the invoker span are its one call's
        call_id = call.get("id")
        if call_id not in (None, ""):
            call_attributes["gen_ai.tool.call.id"] = str(call_id)
        if "arguments" in call:
            call_attributes["gen_ai.tool.call.arguments"] = call["arguments"]
        result = results.get(str(call_id)) if call_id not in (None, "") else None
        if result is not None:
            if "result" in result:
                call_attributes["gen_ai.tool.call.result"] = result["result"]
            if result.get("error") is not None:  # read as the span attribute is: only a boolean says (DECISIONS 253)
                call_attributes[cv.FAILURE_FLAG_KEYS[0]] = result["error"]
        views.append(
            SpanView(
                trace_id=span.trace_id,
                span_id=span.span_id,
                name=f"{cv.EXECUTE_TOOL_PREFIX}{name}",
                attributes=call_attributes,
                parent_span_id=span.parent_span_id,
                parent_is_remote=span.parent_is_remote,
                start_time_unix_nano=span.start_time_unix_nano,
                end_time_unix_nano=span.end_time_unix_nano,
                status_code=span.status_code,
                status_message=span.status_message,
                sequence=span.sequence,
                status_undefined=span.status_undefined,
            )
        )
    return views
