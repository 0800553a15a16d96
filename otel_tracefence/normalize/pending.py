"""Pending records: a tool span that records a call its framework held (for human approval) and did not run.

A framework that gates a call on approval may still record a tool span for it when the run pauses: the OpenAI Agents
SDK's function span of a call waiting for approval (arguments, no result: the body never ran), Google ADK's
``execute_tool`` span answered by its confirmation gate (``framework_texts.APPROVAL_PENDING_RESULTS``). After the
approval a resumed run runs the call, under the same call id, and records it again. Read as two steps, the trace
holds a call of unknown outcome beside its own run (``effect_unknown``, ``call_id_executed_more_than_once``): a
safe trace held. A span is such a pending record, superseded by the later run and no step of its own, only when
everything the trace shows says so (docs/DECISIONS.md 600):

* the span shows no run: no result and a status that is no error, or the framework's own approval-pending answer
  as its result (noted ``approval_pending``) on a span whose own record is no error; no ``tracefence.*`` label of its own (a body that ran could have set
  one), no span below it, its arguments recorded;
* its agent run stopped there: it is under an agent span, and nothing under that agent span started after it
  ended (no model call was given its outcome, no other call followed);
* a later step records the same call with a result: the same tool and canonical arguments, the same model call id
  (or neither has one), started after the pending span ended, in another agent run;
* no model call that started between the two asked for that tool again (the later step answers no new request).

The later step is noted ``resumes_pending_call``. Anything short of that leaves the span a step, held as before:
a call held for approval that never resumed is never read as committed (fail closed).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping, Sequence

from otel_tracefence.core import reasons
from otel_tracefence.core.model import OK, ToolStep, step_order
from otel_tracefence.normalize.conventions import TRACEFENCE_INPUTS
from otel_tracefence.normalize.framework_texts import APPROVAL_PENDING_RESULTS
from otel_tracefence.normalize.span_kinds import agent_name
from otel_tracefence.normalize.requested import RequestedCall
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.status import observed_status
from otel_tracefence.normalize.values import NOT_PARSED, Result

_ANSWERS = tuple((key, re.compile(pattern)) for _, _, key, pattern, _ in APPROVAL_PENDING_RESULTS)
_ANSWER_KEYS = frozenset(key for key, _ in _ANSWERS if key is not None)


def approval_pending(result: Result) -> bool:
    """True when a recorded result is a framework's answer that the call waits for approval
    (``framework_texts.APPROVAL_PENDING_RESULTS``): a one-field object holding the text, or the text itself."""
    if not result.recorded:
        return False
    parsed = result.parsed
    if type(parsed) is dict:
        if len(parsed) != 1:
            return False
        ((key, text),) = parsed.items()
        if key not in _ANSWER_KEYS or type(text) is not str:
            return False
    elif parsed is NOT_PARSED and type(result.value) is str:
        key, text = None, result.value
    else:
        return False
    text = text.strip()
    return any(want == key and pattern.fullmatch(text) for want, pattern in _ANSWERS)


def _shows_no_run(step: ToolStep, span: SpanView) -> bool:
    if step.requested_only or step.malformed or step.arguments_sha256 is None or any(key in span.attributes for key in TRACEFENCE_INPUTS):
        return False
    if reasons.APPROVAL_PENDING in step.notes:  # its status is the answer's error: the span's own record must be none
        return observed_status(span) is OK
    return not step.result_recorded and step.status is OK


def _agent_run(span: SpanView, by_id: Mapping[str, SpanView]) -> str | None:
    """The span id of the nearest agent span above ``span`` (``span_kinds.agent_name``), or ``None``."""
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):  # bounded: a parent cycle cannot loop forever
        parent = by_id.get(parent_id) if parent_id else None
        if parent is None:
            return None
        if agent_name(parent.attributes, parent.name) is not None:
            return parent.span_id
        parent_id = parent.parent_span_id
    return None


def _below(span: SpanView, ancestor_id: str, by_id: Mapping[str, SpanView]) -> bool:
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):
        if not parent_id:
            return False
        if parent_id == ancestor_id:
            return True
        parent = by_id.get(parent_id)
        parent_id = parent.parent_span_id if parent is not None else None
    return False


def _stopped_there(span: SpanView, run_id: str, end: int, by_id: Mapping[str, SpanView]) -> bool:
    """True when no span is below ``span``, and no span of the agent run ``run_id`` started after ``span`` ended."""
    for other in by_id.values():
        if other is span:
            continue
        if other.parent_span_id == span.span_id:
            return False
        if other.start_time_unix_nano >= end and _below(other, run_id, by_id):
            return False
    return True


def _later_run(pending: ToolStep, end: int, ordered: Sequence[ToolStep], taken: set[str]) -> ToolStep | None:
    for step in ordered:
        if (
            step.start_time_unix_nano >= end and step.span_id not in taken and step.span_id != pending.span_id
            and not step.requested_only and step.result_recorded and reasons.APPROVAL_PENDING not in step.notes
            and step.tool == pending.tool and step.arguments_sha256 == pending.arguments_sha256
            and step.call_id_from_span == pending.call_id_from_span and (pending.call_id_from_span or step.call_id == pending.call_id)
        ):
            return step
    return None


def _asked_again(pending: ToolStep, end: int, run: ToolStep, requests: Sequence[RequestedCall]) -> bool:
    """True when a model call that started after the pending span ended and before ``run`` started asked for the
    tool with the same arguments, or with arguments not recorded."""
    for request in requests:
        start = request.span.start_time_unix_nano
        if end <= start <= run.start_time_unix_nano and request.tool == pending.tool and request.arguments.sha256 in (None, pending.arguments_sha256):
            return True
    return False


def superseded(steps: Mapping[str, ToolStep], by_id: Mapping[str, SpanView], requests: Sequence[RequestedCall]) -> dict[str, str]:
    """The pending records among ``steps`` (span id to step) that a later run of their call supersedes: each one's
    span id to the span id of that run's step. ``{}`` for most traces (no step shows no run)."""
    candidates = [step for sid, step in steps.items() if _ended(by_id[sid]) and _shows_no_run(step, by_id[sid])]
    if not candidates:
        return {}
    found: dict[str, str] = {}
    ordered = sorted(steps.values(), key=step_order)
    for step in sorted(candidates, key=step_order):  # in trace order: the first pending record takes the first run
        span = by_id[step.span_id]
        end = span.end_time_unix_nano
        run = _later_run(step, end, ordered, set(found.values()))
        if run is None:
            continue
        agent_run = _agent_run(span, by_id)
        if agent_run is None or agent_run == _agent_run(by_id[run.span_id], by_id) or not _stopped_there(span, agent_run, end, by_id):
            continue
        if not _asked_again(step, end, run, requests):
            found[step.span_id] = run.span_id
    return found


def _ended(span: SpanView) -> bool:
    end = span.end_time_unix_nano
    return end is not None and end >= span.start_time_unix_nano


def folded(steps: list[ToolStep], root_steps: Mapping[str, ToolStep], resumed: Mapping[str, str]) -> list[ToolStep]:
    """``steps`` without the pending records (``resumed``: span id to the span id of the run that supersedes it,
    from :func:`superseded` over ``root_steps``), each superseding run noted ``resumes_pending_call``."""
    runs = set(resumed.values())
    kept = []
    for step in steps:
        if root_steps.get(step.span_id) is step:
            if step.span_id in resumed:
                continue
            if step.span_id in runs:
                step = replace(step, notes=step.notes + (reasons.RESUMES_PENDING_CALL,))
        kept.append(step)
    return kept
