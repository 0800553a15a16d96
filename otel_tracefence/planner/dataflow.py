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
were more. One rule, :func:`data_flow`, gives the four notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from otel_tracefence.core import reasons
from otel_tracefence.core.model import OK, READ, WRITE, ToolStep
from otel_tracefence.planner.groups import TraceGroups
from otel_tracefence.planner.rules import NONE, Finding


def _needs_injection(step: ToolStep) -> bool:
    """A step whose recorded result a replay must inject: a committed write, or a read with unstable results."""
    if step.effect is WRITE:
        return step.status is OK
    return step.effect is READ and not step.result_stable


@dataclass(slots=True)
class DataFlow:
    """Links by step identity (``id(step)``): each maps a step to the steps it is linked with, in trace order."""

    sources: dict[int, list[ToolStep]] = field(default_factory=dict)  # later step -> earlier steps whose result it consumes
    consumers: dict[int, list[ToolStep]] = field(default_factory=dict)  # earlier step -> later steps consuming its result
    unrecorded_sources: dict[int, list[ToolStep]] = field(default_factory=dict)
    unrecorded_consumers: dict[int, list[ToolStep]] = field(default_factory=dict)
    linked: set[int] = field(default_factory=set)  # every step with a link of any kind

    @classmethod
    def build(cls, ordered: Sequence[ToolStep], max_related: int = 50) -> "DataFlow | None":
        """The links of a trace's steps, given in trace order; ``None`` when no step's arguments hold a
        token, so nothing consumes anything and there is no link (the common case, built for nothing)."""
        if not any(s.argument_tokens for s in ordered):
            return None
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
        for table in (flow.sources, flow.consumers, flow.unrecorded_sources, flow.unrecorded_consumers):
            flow.linked.update(table)
        return flow


def _link(table: dict[int, list[ToolStep]], step: ToolStep, other: ToolStep, cap: int) -> None:
    linked = table.get(id(step))
    if linked is None:
        table[id(step)] = [other]
    elif len(linked) < cap and not any(o is other for o in linked):
        linked.append(other)


def data_flow(step: ToolStep, groups: TraceGroups) -> Sequence[Finding]:
    """The data-flow notes of a step, in this order, each naming the linked steps:

    * ``consumes_result_of``: its arguments hold a token an earlier step's recorded result returned;
    * ``result_consumed_by``: its recorded result returned a token later steps' arguments hold;
    * ``may_consume_unrecorded_result``: its arguments hold a token seen nowhere earlier, after a
      result a replay needs went unrecorded;
    * ``unrecorded_result_may_be_consumed``: it is such an unrecorded result (a committed write,
      or a read with unstable results), and a later step's new token may come from it.

    One rule for the four, so a trace without links costs one set lookup per step.
    """
    flow = groups.flow
    key = id(step)
    if flow is None or key not in flow.linked:
        return NONE
    findings = []
    for table, reason in (
        (flow.sources, reasons.CONSUMES_RESULT_OF),
        (flow.consumers, reasons.RESULT_CONSUMED_BY),
        (flow.unrecorded_sources, reasons.MAY_CONSUME_UNRECORDED_RESULT),
        (flow.unrecorded_consumers, reasons.UNRECORDED_RESULT_MAY_BE_CONSUMED),
    ):
        linked = table.get(key)
        if linked:
            findings.append(Finding(None, reason, linked))
    return findings


FLOW_NOTES = (data_flow,)
"""The data-flow note rule, taking ``(step, groups)`` like ``rules.NOTE_RULES`` and reading ``groups.flow``."""
