"""A write with no result inside an agent run that ended in error: its outcome is not shown (docs/DECISIONS.md 957).

A run that fails while its tools run cancels or abandons what is still running (the Microsoft Agent Framework
cancels a sibling call when a middleware aborts the run; an asyncio task cancelled by a deadline; a thread left to
finish after the run gave up): such a call's span ends unset, with no result and no error of its own. With content
captured elsewhere the commit rule holds it already (401); this is the same rule where nothing in the trace records a
result: the run's own error is the evidence that silence here is not a commit."""

from __future__ import annotations

from dataclasses import replace

from otel_tracefence.core import reasons
from otel_tracefence.core.model import OK, WRITE, MalformedField, ToolStep
from otel_tracefence.normalize.span_kinds import is_agent_boundary
from otel_tracefence.normalize.span_view import STATUS_ERROR, SpanView


def hold_writes_of_failed_runs(steps: dict[str, ToolStep], by_id: dict[str, SpanView]) -> None:
    """Hold (``write_outcome_unrecorded``) each write of ``steps`` (span id -> step, updated in place) recorded ok with
    no result whose nearest enclosing agent or model span ended in error, naming that span. Reads, failed writes and
    writes with a result are as before."""
    for sid, step in steps.items():
        if step.effect is not WRITE or step.status is not OK or step.result_recorded or step.span_id is None:
            continue
        run = _enclosing_run(by_id.get(sid), by_id)
        if run is not None and run.status_code == STATUS_ERROR:
            why = (f"the run it belongs to, span {run.span_id} ({run.name!r}), ended in error and it recorded no result: "
                   "it may have been cancelled or abandoned, so whether it committed cannot be read")
            steps[sid] = replace(step, malformed=step.malformed + (MalformedField("status", why, reason=reasons.WRITE_OUTCOME_UNRECORDED),))


def _enclosing_run(span: SpanView | None, by_id: dict[str, SpanView]) -> SpanView | None:
    """The nearest agent or model span above ``span`` (``span_kinds.is_agent_boundary``), or ``None``; bounded by the
    number of spans (a parent cycle cannot loop)."""
    parent_id = span.parent_span_id if span is not None else None
    for _ in range(len(by_id)):
        parent = by_id.get(parent_id) if parent_id else None
        if parent is None:
            return None
        if is_agent_boundary(parent.attributes):
            return parent
        parent_id = parent.parent_span_id
    return None
