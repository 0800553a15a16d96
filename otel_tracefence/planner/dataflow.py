"""Data flow between the steps of a trace, through hashes of id-like tokens: notes, never decisions.

The seed (000) saw an agent's step 8 use the page id ``pg_8812`` that step 7's
``pager.trigger`` returned. When a later step's arguments hold a token
(``normalize/tokens.py``) whose first appearance in the trace is an earlier
step's recorded result, the two are linked: the later step is noted
``consumes_result_of`` and the earlier ``result_consumed_by``, each naming the
other in its related call ids. Only the tokens' hashes
(``ToolStep.argument_tokens`` / ``result_tokens``) are compared.

A token's *origin* is the first place it appears in trace order, a step's
arguments before its result: a token an earlier step was given (its arguments),
or that came in earlier arguments, was not returned by a later result, so an
echo (``ticket.get("TCK-1234")`` returning ``TCK-1234``) is no link.

A token first seen in a step's arguments, when an earlier step's result a replay
would need was not recorded (a committed write, or a read with unstable
results), may have come from that result: the trace cannot show it (there is no
value to hash), so both are noted, ``may_consume_unrecorded_result`` and
``unrecorded_result_may_be_consumed``. Such an unrecorded result is what makes
the trace ``static`` (``result_not_recorded``); these notes say which later step
may have used it.

Building the index is linear in the number of tokens; each step keeps at most
``max_related + 1`` links per note, so ``related_call_ids_truncated`` shows there
were more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from otel_tracefence import reasons
from otel_tracefence.model import Effect, ToolStatus, ToolStep
from otel_tracefence.planner.groups import TraceGroups
from otel_tracefence.planner.rules import NONE, Finding


def _needs_injection(step: ToolStep) -> bool:
    """A step whose recorded result a replay must inject: a committed write, or a read with unstable results."""
    if step.effect is Effect.WRITE:
        return step.status is ToolStatus.OK
    return step.effect is Effect.READ and not step.result_stable


@dataclass(slots=True)
class DataFlow:
    """Links by step identity (``id(step)``): each maps a step to the steps it is linked with, in trace order."""

    sources: dict[int, list[ToolStep]] = field(default_factory=dict)  # later step -> earlier steps whose result it consumes
    consumers: dict[int, list[ToolStep]] = field(default_factory=dict)  # earlier step -> later steps consuming its result
    unrecorded_sources: dict[int, list[ToolStep]] = field(default_factory=dict)
    unrecorded_consumers: dict[int, list[ToolStep]] = field(default_factory=dict)

    @classmethod
    def build(cls, ordered: Sequence[ToolStep], max_related: int = 50) -> "DataFlow":
        """The links of a trace's steps, given in trace order."""
        flow = cls()
        cap = max_related + 1
        origin: dict[int, ToolStep | None] = {}  # token hash -> the step whose result it first appeared in, or None (arguments)
        unrecorded: list[ToolStep] = []  # earlier steps whose result a replay needs and nobody recorded
        for step in ordered:
            new_in_arguments = False
            for token in step.argument_tokens:
                if token not in origin:
                    origin[token] = None
                    new_in_arguments = True
                    continue
                source = origin[token]
                if source is not None and source is not step:
                    _link(flow.sources, step, source, cap)
                    _link(flow.consumers, source, step, cap)
            if new_in_arguments and unrecorded:
                for source in unrecorded[:cap]:
                    _link(flow.unrecorded_sources, step, source, cap)
                    _link(flow.unrecorded_consumers, source, step, cap)
            for token in step.result_tokens:
                origin.setdefault(token, step)
            if not step.result_recorded and not step.requested_only and _needs_injection(step):
                unrecorded.append(step)
        return flow


def _link(table: dict[int, list[ToolStep]], step: ToolStep, other: ToolStep, cap: int) -> None:
    linked = table.get(id(step))
    if linked is None:
        table[id(step)] = [other]
    elif len(linked) < cap and not any(o is other for o in linked):
        linked.append(other)


def _note(table: dict[int, list[ToolStep]] | None, step: ToolStep, reason: str) -> Sequence[Finding]:
    linked = table.get(id(step)) if table else None
    return (Finding(None, reason, linked),) if linked else NONE


def consumes_result_of(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Note on a step whose arguments hold a token an earlier step's recorded result returned (it names that step)."""
    return _note(groups.flow and groups.flow.sources, step, reasons.CONSUMES_RESULT_OF)


def result_consumed_by(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Note on a step whose recorded result returned a token later steps' arguments hold (it names them)."""
    return _note(groups.flow and groups.flow.consumers, step, reasons.RESULT_CONSUMED_BY)


def may_consume_unrecorded_result(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Note on a step whose arguments hold a token seen nowhere earlier, after a result a replay needs went unrecorded."""
    return _note(groups.flow and groups.flow.unrecorded_sources, step, reasons.MAY_CONSUME_UNRECORDED_RESULT)


def unrecorded_result_may_be_consumed(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """Note on a committed write (or unstable read) without a recorded result that a later step's new token may come from."""
    return _note(groups.flow and groups.flow.unrecorded_consumers, step, reasons.UNRECORDED_RESULT_MAY_BE_CONSUMED)


FLOW_NOTES = (consumes_result_of, result_consumed_by, may_consume_unrecorded_result, unrecorded_result_may_be_consumed)
"""The data-flow notes, in the order their reasons are listed; rules like ``rules.NOTE_RULES``, reading ``groups.flow``."""
