"""The decision rules (DESIGN.md, "Decisions"), one small function each, in the table's order.

Each rule looks at one step and the trace's groups and returns its findings: a
decision with a reason code and the related steps, or nothing. The first finding
with a decision decides; the others that fence (review, conflict) and the notes
explain. No rule ever returns a decision that schedules a write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.model import (
    CONFLICT, EFFECT_UNKNOWN, ERROR, OK, READ, REPLAY, REVIEW, SKIP, SOURCE_HTTP_METHOD, SOURCE_MCP_HINT, STATUS_UNKNOWN, TIMEOUT, WRITE, Decision,
    Effect, ToolStep,
)
from otel_tracefence.planner.groups import TraceGroups


@dataclass(frozen=True, slots=True)
class Finding:
    """What one rule says of a step: ``decision`` is ``None`` for a note that never decides."""

    decision: Decision | None
    reason: str
    related: Sequence[ToolStep] = ()


Rule = Callable[[ToolStep, TraceGroups], Sequence[Finding]]
NONE: tuple[Finding, ...] = ()

# The effects a rule declares it finds anything for; a rule not here may find something for any.
_ONLY_FOR: dict[Rule, frozenset[Effect]] = {}


def only_for(*effects: Effect) -> Callable[[Rule], Rule]:
    """Declare that a rule finds nothing for a step of any other effect. The rule still tests the effect itself (it
    is right when called alone); the planner does not call it for the others (:func:`rules_for`).
    tests/planner/test_planner.py checks every declaration against the rule."""

    def declare(rule: Rule) -> Rule:
        _ONLY_FOR[rule] = frozenset(effects)
        return rule

    return declare


def rules_for(effect: Effect, rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """``rules`` (in order) less those declared (:func:`only_for`) to find nothing for a step of ``effect``."""
    return tuple(rule for rule in rules if effect in _ONLY_FOR.get(rule, (effect,)))


def malformed(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A malformed tool span or row is never guessed: review, one reason per field at fault."""
    return tuple(Finding(REVIEW, f.reason_code) for f in step.malformed) if step.malformed else NONE


def idempotency_key_conflict(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """The same tool and key with different canonical arguments: every call of the group is fenced."""
    if step.idempotency_key is None or not groups.conflicting_keys:  # most traces: an empty set, no key built
        return NONE
    key = (step.tool, step.idempotency_key)
    if key not in groups.conflicting_keys:
        return NONE
    return (Finding(CONFLICT, reasons.IDEMPOTENCY_KEY_CONFLICT, groups.by_key[key].window(0, None, groups.max_related)),)


@only_for(WRITE, EFFECT_UNKNOWN)
def call_id_executed_more_than_once(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """The model asked once, the tool ran more than once, and the call is not a declared read."""
    if step.effect is READ or step.call_id_from_span or step.requested_only:
        return NONE
    group = groups.by_call_id.get(step.call_id) if groups.by_call_id else None
    if group is None or len(group) < 2:
        return NONE
    return (Finding(CONFLICT, reasons.CALL_ID_EXECUTED_MORE_THAN_ONCE, group.window(0, None, groups.max_related)),)


def idempotency_key_reused_arguments_unavailable(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """The same tool and key where some call's arguments were not recorded: cannot be compared, never assumed equal."""
    if step.idempotency_key is None or not groups.uncomparable_keys:  # most traces: an empty set, no key built
        return NONE
    key = (step.tool, step.idempotency_key)
    if key not in groups.uncomparable_keys:
        return NONE
    return (Finding(REVIEW, reasons.IDEMPOTENCY_KEY_REUSED_ARGUMENTS_UNAVAILABLE, groups.by_key[key].window(0, None, groups.max_related)),)


# Findings that name no related step are the same every time: built once (Finding is frozen).
_EFFECT_UNKNOWN = (Finding(REVIEW, reasons.EFFECT_UNKNOWN),)
_WRITE_DISPATCHED_MORE_THAN_ONCE = (Finding(REVIEW, reasons.WRITE_DISPATCHED_MORE_THAN_ONCE),)
_WRITE_COMMITTED = (Finding(SKIP, reasons.WRITE_COMMITTED),)
_UNSTABLE_RESULT = (Finding(SKIP, reasons.UNSTABLE_RESULT),)
_UNSTABLE_RESULT_NOT_RECORDED = (Finding(SKIP, reasons.UNSTABLE_RESULT), Finding(None, reasons.RESULT_NOT_RECORDED))
_DECLARED_READ = (Finding(REPLAY, reasons.DECLARED_READ),)
_HINTED_READ = (Finding(REPLAY, reasons.HINTED_READ),)
_HINT_SOURCES = (SOURCE_MCP_HINT, SOURCE_HTTP_METHOD)
_RESULT_NOT_RECORDED = (Finding(None, reasons.RESULT_NOT_RECORDED),)
_REQUESTED_NOT_RECORDED = (Finding(None, reasons.REQUESTED_NOT_RECORDED),)


@only_for(EFFECT_UNKNOWN)
def effect_unknown(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Nobody declared the effect: hold it."""
    return _EFFECT_UNKNOWN if step.effect is EFFECT_UNKNOWN else NONE


_UNCERTAIN_WRITE = {
    TIMEOUT: reasons.WRITE_TIMEOUT,
    STATUS_UNKNOWN: reasons.WRITE_STATUS_UNKNOWN,
    ERROR: reasons.WRITE_ERROR,
}
_UNCERTAIN_WRITE_FINDINGS = {status: (Finding(REVIEW, reason),) for status, reason in _UNCERTAIN_WRITE.items()}


@only_for(WRITE)
def write_outcome_uncertain(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A write that timed out, errored or has no known end: even with a key, the trace cannot show it was honoured."""
    if step.effect is not WRITE or step.status not in _UNCERTAIN_WRITE:
        return NONE
    return _UNCERTAIN_WRITE_FINDINGS[step.status]


@only_for(WRITE)
def write_dispatched_more_than_once(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A write with several dispatch attempts inside one step."""
    if step.effect is not WRITE or step.attempts < 2:
        return NONE
    return _WRITE_DISPATCHED_MORE_THAN_ONCE


@only_for(WRITE)
def repeats_earlier_write(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A write with the same tool and canonical arguments as an earlier one: a possible second effect."""
    if step.effect is not WRITE:
        return NONE
    entry = groups.repeats.get(id(step)) if groups.repeats else None  # most traces repeat nothing
    if entry is None or entry[1] == 0:
        return NONE
    group, position = entry
    return (Finding(REVIEW, reasons.REPEATS_EARLIER_WRITE, group.window(0, position, groups.max_related)),)


@only_for(WRITE)
def repeat_arguments_uncompared(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A write of a tool that another write of the trace shares, both with arguments recorded but not comparable
    (``groups.UNCOMPARED_ARGUMENTS``: too large, too deep, not I-JSON): they may be one call made twice, and which
    was first cannot make the other safe, so each is held, naming the others (docs/DECISIONS.md 501)."""
    if step.effect is not WRITE or groups.uncompared_writes is None:  # most traces: None, nothing looked up
        return NONE
    group = groups.uncompared_writes.get(id(step))
    if group is None:
        return NONE
    others = [s for s in group.window(0, None, groups.max_related + 1) if s is not step]
    return (Finding(REVIEW, reasons.REPEAT_ARGUMENTS_UNCOMPARED, others),)


_WRITE_OUTCOME_UNRECORDED = (Finding(REVIEW, reasons.WRITE_OUTCOME_UNRECORDED),)


@cython.ccall
def producer_records_results(step: ToolStep, groups: TraceGroups) -> bool:
    """Whether the producer of ``step`` (a tool step with no result) records results (docs/DECISIONS.md 401).

    A producer the conventions table says records none by default (content capture opt-in: the GenAI semantic
    conventions) is taken at its word: no. Else another tool step of that producer in the trace with a result says
    yes; other readable steps of it all without one say no (content capture off); a step alone of its producer
    takes the table's default (``ToolStep.producer_records_results``), and no producer known, no. A step not read
    from a span (a row: producer ``""``) is not judged so: its writer declared its status and result."""
    default = step.producer_records_results
    if default is False or not step.producer:  # opt-in content; or a row, whose status its writer declared
        return False
    counts = groups.results_by_producer.get(step.producer) if groups.results_by_producer else None
    if counts is None:
        return default is True
    if counts[0] > 0:
        return True
    others_without = counts[1] - (0 if step.malformed else 1)
    return default is True and others_without <= 0


@only_for(WRITE)
def write_outcome_unrecorded(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A write recorded ok (or unset) with no result, where its producer records results: its outcome went where
    the trace does not show (a cancelled task, an error sent only to the model's stream). It is shown committed
    only on evidence, never on silence (docs/DECISIONS.md 401): review. Where the producer records no results
    (content capture off) it is committed as before, class ``static``."""
    if step.effect is not WRITE or step.status is not OK or step.result_recorded or step.requested_only:
        return NONE
    return _WRITE_OUTCOME_UNRECORDED if producer_records_results(step, groups) else NONE


@only_for(WRITE)
def write_committed(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A write recorded ok: never re-fire it; a replay injects its recorded result."""
    if step.effect is WRITE and step.status is OK:
        return _WRITE_COMMITTED
    return NONE


@only_for(READ)
def unstable_result(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A read whose results differ between executions is never re-executed: skip, and a replay injects
    its recorded result (seed 000, "Decision boundary": a handle the agent may branch on must be injected,
    not re-derived). Without a recorded result there is nothing to inject (``result_not_recorded``, class
    ``static``). The label is ``tracefence.result_stable`` = false or the tool rule's ``result: unstable``."""
    if step.effect is not READ or step.result_stable:
        return NONE
    return _UNSTABLE_RESULT if step.result_recorded else _UNSTABLE_RESULT_NOT_RECORDED


@only_for(READ)
def declared_read(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A declared read replays, whatever its status. A read only hints say (MCP ``readOnlyHint``, a
    safe HTTP method: DESIGN.md's effect sources after the declaration and the operator's rules)
    replays too, labelled ``hinted_read``, not ``declared_read`` (docs/DECISIONS.md 189)."""
    if step.effect is not READ:
        return NONE
    return _HINTED_READ if step.effect_source in _HINT_SOURCES else _DECLARED_READ


DECISION_RULES: tuple[Rule, ...] = (
    malformed,
    idempotency_key_conflict,
    call_id_executed_more_than_once,
    idempotency_key_reused_arguments_unavailable,
    effect_unknown,
    write_outcome_uncertain,
    write_dispatched_more_than_once,
    repeats_earlier_write,
    repeat_arguments_uncompared,
    write_outcome_unrecorded,
    write_committed,
    unstable_result,
    declared_read,
)


def repeated_later(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Note on a write or read that later calls repeat, linking them."""
    entry = groups.repeats.get(id(step)) if groups.repeats else None  # most traces repeat nothing
    if entry is None:
        return NONE
    group, position = entry
    if position + 1 >= len(group):
        return NONE
    return (Finding(None, reasons.REPEATED_LATER, group.window(position + 1, None, groups.max_related)),)


@only_for(READ)
def repeated_read(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Repeated reads are linked, not fenced."""
    if step.effect is not READ:
        return NONE
    entry = groups.repeats.get(id(step)) if groups.repeats else None  # most traces repeat nothing
    if entry is None or entry[1] == 0:
        return NONE
    group, position = entry
    return (Finding(None, reasons.REPEATED_READ, group.window(0, position, groups.max_related)),)


@only_for(WRITE)
def result_not_recorded(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """A committed write whose result was not recorded: a replay would have to re-fire it (class ``static``)."""
    if step.effect is WRITE and step.status is OK and not step.result_recorded:
        return _RESULT_NOT_RECORDED
    return NONE


def requested_not_recorded(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """The model requested the call but no tool span records it: whether it ran is unknown."""
    return _REQUESTED_NOT_RECORDED if step.requested_only else NONE


def arguments_unavailable(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Says why the arguments are unavailable, so absence is never silently taken as equality."""
    return (Finding(None, step.arguments_unavailable),) if step.arguments_unavailable else NONE


def normalizer_notes(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """How the normalizer read the span (``arguments_unwrapped``, ``error_in_result``): said, never deciding."""
    return tuple(Finding(None, note) for note in step.notes) if step.notes else NONE


NOTE_RULES: tuple[Rule, ...] = (
    repeated_later,
    repeated_read,
    result_not_recorded,
    requested_not_recorded,
    arguments_unavailable,
    normalizer_notes,
)
