"""Summary spans: a framework's ``execute_tool`` span that reports calls other spans ran, and is no call itself.

After parallel tool calls, Google ADK opens ``execute_tool (merged)`` and trpc-agent-go ``execute_tool (merged
tools)``: ``gen_ai.operation.name`` = ``execute_tool``, a placeholder tool name (``(merged tools)``), arguments
``N/A``, and as result the merged responses of the real calls, whose own spans are its siblings
(``conventions.SUMMARY_TOOL_NAME_PATTERN``, with sources). Read as a step it is a call of unknown effect with
malformed arguments: a read-only trace held for a call that never happened. A span is such a summary, and is no
step, only when everything says so (docs/DECISIONS.md 441):

* its tool name is a placeholder in parentheses, which no model can call;
* it records no arguments of a call (none, or a value that is no object with fields: ``N/A``);
* it carries no ``tracefence.effect`` of its own, and its status is no error;
* its recorded result names at least two other steps of the trace (by call id, or by tool name where the step has
  no call id of its own) among its siblings or the spans below it: the calls it summarises are in the trace;
  or it records no result at all and at least two sibling steps ended before it started (Google ADK 2.x's default
  telemetry schema records no content on the summary: "each merged call has its own execute_tool span carrying its
  content", google/adk-python src/google/adk/telemetry/tracing.py, trace_merged_tool_calls; docs/DECISIONS.md 552).

Anything short of that leaves it a step, held as before (fail closed).
"""

from __future__ import annotations

import re
from typing import Mapping

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ERROR, ToolStep
from otel_tracefence.normalize.conventions import RESULT_KEYS, SUMMARY_TOOL_NAME_PATTERN, TRACEFENCE_EFFECT
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.values import event_result, span_arguments

_PLACEHOLDER = re.compile(SUMMARY_TOOL_NAME_PATTERN)


def _result_text(span: SpanView) -> str | None:
    for key in RESULT_KEYS:
        value = span.attributes.get(key)
        if isinstance(value, str):
            return value
    value = event_result(span.events)
    return value if isinstance(value, str) else None


def _below(span: SpanView, ancestor_id: str, by_id: Mapping[str, SpanView]) -> bool:
    seen = set()
    parent = span.parent_span_id
    while parent and parent not in seen:
        if parent == ancestor_id:
            return True
        seen.add(parent)
        above = by_id.get(parent)
        parent = above.parent_span_id if above is not None else None
    return False


def _is_summary(sid: str, step: ToolStep, steps: Mapping[str, ToolStep], by_id: Mapping[str, SpanView], config: TraceFenceConfig) -> bool:
    span = by_id[sid]
    if TRACEFENCE_EFFECT in span.attributes or step.status is ERROR:
        return False
    arguments = span_arguments(span.attributes, config.limits, span.events).value
    if isinstance(arguments, (dict, list)) and arguments:
        return False
    text = _result_text(span)
    if not text:
        return text is None and _ran_before(sid, span, steps, by_id) >= 2
    named = 0
    for other_id, other in steps.items():
        if other_id == sid or _PLACEHOLDER.match(other.tool):
            continue
        other_span = by_id[other_id]
        if other_span.parent_span_id != span.parent_span_id and not _below(other_span, sid, by_id):
            continue
        mark = other.tool if other.call_id_from_span else other.call_id
        if mark and mark in text:
            named += 1
    return named >= 2


def _ran_before(sid: str, span: SpanView, steps: Mapping[str, ToolStep], by_id: Mapping[str, SpanView]) -> int:
    """How many other steps (no placeholders) are ``span``'s siblings and ended before it started."""
    count = 0
    for other_id, other in steps.items():
        if other_id == sid or _PLACEHOLDER.match(other.tool):
            continue
        other_span = by_id[other_id]
        end = other_span.end_time_unix_nano
        if other_span.parent_span_id == span.parent_span_id and end is not None and end <= span.start_time_unix_nano:
            count += 1
    return count


def summary_spans(steps: Mapping[str, ToolStep], by_id: Mapping[str, SpanView], config: TraceFenceConfig) -> list[str]:
    """The span ids among ``steps`` (span id to the step it reads as) that are summary spans, no calls."""
    candidates = [sid for sid, step in steps.items() if step.tool.startswith(("(", " ")) and _PLACEHOLDER.match(step.tool)]
    return [sid for sid in candidates if _is_summary(sid, steps[sid], steps, by_id, config)]
