"""The ``tracefence.*`` attributes written on exported spans (DESIGN.md, "Annotations written on export").

One function computes them for a planned trace; each door only copies them
onto its own kind of span (SDK ``ReadableSpan`` here, OTLP protobuf in the service).
Enum values are read as ``member._value_`` (the Enum API's own field, the same string as ``member.value``):
``value`` is a Python-level property, and these run for every decided trace.
"""

from __future__ import annotations

from typing import Any, Mapping

from otel_tracefence.core.model import SCHEMA_VERSION, StepDecision, TracePlan
from otel_tracefence.pipeline.plan import PlannedTrace
from otel_tracefence.pipeline.write_index import retries_unchecked

REPLAY_CLASS = "tracefence.replay.class"
STEP_DECISION = "tracefence.step.decision"
STEP_REASONS = "tracefence.step.reasons"
STEP_RELATED_CALL_IDS = "tracefence.step.related_call_ids"
RELATED_TRACES = "tracefence.related_traces"  # on a tool span whose decision concerns earlier traces: their ids (hex), earliest first
STEP_EFFECT = "tracefence.step.effect"
STEP_STATUS = "tracefence.step.status"
STEP_ATTEMPT_OF = "tracefence.step.attempt_of"
PLAN_SCHEMA_VERSION = "tracefence.plan.schema_version"
TRACE_PARTIAL = "tracefence.trace.partial"
TRACE_LATE = "tracefence.trace.late"
TRACE_REASONS = "tracefence.trace.reasons"
TRACE_RETRIES_UNCHECKED = "tracefence.trace.retries_unchecked"  # the write index was unavailable: its writes were not checked against earlier traces


def trace_attributes(plan: TracePlan) -> dict[str, Any]:
    """Attributes for every span of a trace with tool steps (empty for a trace without)."""
    if plan.replay_class is None:
        return {}
    attributes: dict[str, Any] = {REPLAY_CLASS: plan.replay_class._value_, PLAN_SCHEMA_VERSION: SCHEMA_VERSION}
    if plan.partial:
        attributes[TRACE_PARTIAL] = True
    if retries_unchecked(plan):
        attributes[TRACE_RETRIES_UNCHECKED] = True
    return attributes


def span_attributes(planned: PlannedTrace, common: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Extra attributes by span id (hex) for every span the plan says something about.

    Tool spans get their step's decision, reasons, related call ids, effect and
    status; a dispatch attempt gets the span id of the step it belongs to.
    Spans not listed get :func:`trace_attributes` only (``common``: that, when the caller has it already).
    Different spans under one span id (each step malformed at ``span_id``) are also listed by ``(span id,
    sequence)``, each with its own step's attributes, and :data:`CLASHING` is then a key: read them with
    :func:`attributes_of` (docs/DECISIONS.md 360).
    """
    if common is None:
        common = trace_attributes(planned.plan)
    if not common:
        return {}
    by_span: dict[str, dict[str, Any]] = {}
    for decision in planned.plan.steps:
        step = decision.step
        if not step.span_id:
            continue  # a call the model requested that no span records: it lives in the plan only
        if step.malformed and any(f.field == "span_id" for f in step.malformed):  # one of several spans under one id
            by_span[(step.span_id, step.sequence)] = _step_attributes(common, decision)  # type: ignore[index]
            by_span[CLASHING] = common  # type: ignore[index]
        earlier = by_span.get(step.span_id)
        if earlier is not None and _DECISION_RANK[earlier[STEP_DECISION]] >= _DECISION_RANK[decision.decision._value_]:
            # One span that ran several calls (a Haystack ToolInvoker): it carries its most restrictive step.
            _merge_lists(earlier, decision)
            continue
        by_span[step.span_id] = _step_attributes(common, decision)
        if earlier is not None:
            _merge_lists(by_span[step.span_id], None, earlier)
    for attempt, owner in planned.normalized.attempt_of.items():
        by_span[attempt] = {**common, STEP_ATTEMPT_OF: owner}
    return by_span


_DECISION_RANK = {"replay": 0, "skip": 1, "review": 2, "conflict": 3}
CLASHING: Any = ("clashing",)
"""A key of :func:`span_attributes`' result when some spans share one span id: look them up with :func:`attributes_of`."""


def attributes_of(by_span: dict[Any, dict[str, Any]], span_id: str, sequence: int, common: dict[str, Any]) -> dict[str, Any]:
    """The attributes for the span ``span_id`` that arrived ``sequence``-th, from :func:`span_attributes`' result: its
    own step's when several spans share its id (each span its own step, never another's), else the id's."""
    if CLASHING in by_span:
        own = by_span.get((span_id, sequence))
        if own is not None:
            return own
    return by_span.get(span_id, common)


def _step_attributes(common: dict[str, Any], decision: StepDecision) -> dict[str, Any]:
    step = decision.step
    attributes = {
        **common,
        STEP_DECISION: decision.decision._value_,
        STEP_REASONS: list(decision.reasons),
        STEP_RELATED_CALL_IDS: list(decision.related_call_ids),
        STEP_EFFECT: step.effect._value_,
        STEP_STATUS: step.status._value_,
    }
    if decision.related_traces:
        attributes[RELATED_TRACES] = list(dict.fromkeys(r.trace_id for r in decision.related_traces))
    return attributes


def _merge_lists(into: dict[str, Any], decision: StepDecision | None, other: dict[str, Any] | None = None) -> None:
    """Add another step's reasons and related call ids (of ``decision`` or of ``other``'s attributes) to ``into``."""
    reasons = list(decision.reasons) if decision is not None else other[STEP_REASONS]
    related = list(decision.related_call_ids) if decision is not None else other[STEP_RELATED_CALL_IDS]
    into[STEP_REASONS] = into[STEP_REASONS] + [r for r in reasons if r not in into[STEP_REASONS]]
    into[STEP_RELATED_CALL_IDS] = into[STEP_RELATED_CALL_IDS] + [c for c in related if c not in into[STEP_RELATED_CALL_IDS]]


def late_attributes(replay_class: str | None, *, partial: bool = False) -> dict[str, Any]:
    """Attributes for a span that arrived after its trace was decided (empty when the trace has
    no tool step: such a trace, late spans included, is passed through untouched). ``partial``:
    the trace's latest plan is flagged partial (a late tool span always makes it so)."""
    if not replay_class:
        return {}
    attributes: dict[str, Any] = {REPLAY_CLASS: replay_class, PLAN_SCHEMA_VERSION: SCHEMA_VERSION}
    if partial:
        attributes[TRACE_PARTIAL] = True
    attributes[TRACE_LATE] = True
    return attributes


def unplanned_attributes(reason: str) -> dict[str, Any]:
    """Attributes for every span of a trace handed on without a plan (``reason``, e.g.
    ``reasons.NOT_PLANNED_AT_SHUTDOWN``, ``reasons.NOT_PLANNED_ERROR``): it fails closed, as ``review`` and partial,
    whatever its spans hold."""
    return {REPLAY_CLASS: "review", PLAN_SCHEMA_VERSION: SCHEMA_VERSION, TRACE_PARTIAL: True, TRACE_REASONS: [reason]}


def merged(original: Mapping[str, Any] | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The span's own attributes with ours on top."""
    return {**(original or {}), **extra}
