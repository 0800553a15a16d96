"""Planner: a trace's steps to its plan. A pure, deterministic function with no I/O."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.config import Limits
from otel_tracefence.core.model import CONFLICT, EFFECT_UNKNOWN, READ, REVIEW, WRITE, StepDecision, ToolStep, TracePlan, step_order
from otel_tracefence.planner.dataflow import FLOW_NOTES, DataFlow
from otel_tracefence.planner.groups import TraceGroups
from otel_tracefence.planner.replay_class import replay_class
from otel_tracefence.planner.rules import DECISION_RULES, NOTE_RULES, rules_for

_FENCING = (REVIEW, CONFLICT)
_DEFAULT_LIMITS = Limits()
_RULES = DECISION_RULES + NOTE_RULES + FLOW_NOTES
# The rules for a step of each effect: those declared to find nothing for it are not called (rules.only_for).
_READ_RULES, _WRITE_RULES, _UNKNOWN_RULES = (rules_for(effect, _RULES) for effect in (READ, WRITE, EFFECT_UNKNOWN))


@cython.ccall
def _rules_for(step: ToolStep) -> tuple:
    """The rules :func:`_decide` calls for ``step``: by identity, as the rules test the effect (an enum's hash is a
    Python-level call); every rule for any other value."""
    effect = step.effect
    if effect is READ:
        return _READ_RULES
    if effect is WRITE:
        return _WRITE_RULES
    return _UNKNOWN_RULES if effect is EFFECT_UNKNOWN else _RULES


@cython.ccall
def _decide(step: ToolStep, groups: TraceGroups, max_related: int) -> StepDecision:
    decision = None
    reason_codes: list[str] = []
    related: list[str] = []
    truncated = False
    for rule in _rules_for(step):
        for finding in rule(step, groups):
            if finding.decision is not None:
                if decision is None:
                    decision = finding.decision
                elif finding.decision not in _FENCING:
                    continue  # a replay or skip that does not decide explains nothing
            if finding.reason not in reason_codes:
                reason_codes.append(finding.reason)
            for other in finding.related:
                if other is step or other.call_id in related or (other.call_id == step.call_id and finding.reason != reasons.CALL_ID_EXECUTED_MORE_THAN_ONCE):
                    continue
                if len(related) >= max_related:
                    truncated = True
                    break
                related.append(other.call_id)
    if truncated:
        reason_codes.append(reasons.RELATED_CALL_IDS_TRUNCATED)
    assert decision is not None, "every step meets a deciding rule"
    return StepDecision(step, decision, tuple(reason_codes), tuple(related))


def plan_trace(trace_id: str, steps: Iterable[ToolStep], *, partial: bool = False, limits: Limits = _DEFAULT_LIMITS) -> TracePlan:
    """Plan one trace: a decision per step (in trace order) and the trace's replay class.

    The order of ``steps`` never changes the plan: steps are ordered by start time
    (nanoseconds), then source position, then call and span id. Cost is linear in
    the number of steps (groups by hashing; at most ``limits.max_related_call_ids``
    related ids per step). A trace with no step gets ``replay_class`` ``None``.
    """
    ordered = sorted(steps, key=step_order)
    keys = list(map(step_order, ordered))
    if any(map(tuple.__eq__, keys, keys[1:])):
        # Steps alike in time, position and ids (only steps built directly can be): order
        # them by their whole content, so the input order never shows through.
        ordered.sort(key=lambda s: (s.order_key, repr(s)))
        # The groups tell steps apart by identity: the same object given twice is two steps.
        seen: set[int] = set()
        ordered = [replace(s) if id(s) in seen else seen.add(id(s)) or s for s in ordered]
    groups = TraceGroups.build(ordered, limits.max_related_call_ids)
    groups.flow = DataFlow.build(ordered, limits.max_related_call_ids)
    decisions = tuple(_decide(step, groups, limits.max_related_call_ids) for step in ordered)
    return TracePlan(trace_id=trace_id, replay_class=replay_class(decisions), steps=decisions, partial=partial)
