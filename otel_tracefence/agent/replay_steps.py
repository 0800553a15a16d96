"""Plans as the replay guard reads them: the two replay modes, the steps of a plan in trace order.

A plan is a :class:`otel_tracefence.core.model.TracePlan`, or the protobuf ``tracefence.v1.TracePlan`` /
``ReviewItem`` the CLI and the review store give; :func:`plan_steps` reads any of them into :class:`PlanStep`
values, numbered from 1 in trace order as seed 000 numbers them ("step 7"). An unknown protobuf decision is read as
``review``: never replayed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from otel_tracefence.core.model import Decision, TracePlan
from otel_tracefence.core.schema import DECISION


class ReplayMode(str, enum.Enum):
    """How a replay treats tool calls: re-execute all (``dynamic``) or inject recorded results of skipped steps (``injected``)."""

    DYNAMIC = "dynamic"
    INJECTED = "injected"


@dataclass(frozen=True, slots=True)
class StepRef:
    """One step of the plan as the guard names it: ``index`` counts from 1 in trace order."""

    index: int
    call_id: str
    tool: str
    decision: str  # replay, skip, review, conflict
    reasons: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"step {self.index} ({self.call_id}) {self.tool!r} [{self.decision}: {', '.join(self.reasons) or '-'}]"


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One step of a plan with what the guard checks of it: its decision, the SHA-256 of its canonical arguments
    and of its recorded result (``None`` when not recorded), the raw result when the plan kept it, and the call ids
    the data-flow notes relate it to."""

    ref: StepRef
    decision: Decision
    arguments_sha256: str | None
    result_recorded: bool
    result_sha256: str | None
    result_value: str | None
    related: tuple[str, ...] = ()


_PB_DECISIONS = {number: decision for decision, number in DECISION.items()}  # tracefence.v1.Decision -> Decision


def plan_steps(plan: Any) -> tuple[str, list[PlanStep], bool]:
    """(trace id, steps in trace order, partial) of a model plan, a protobuf ``TracePlan`` or a ``ReviewItem``."""
    if hasattr(plan, "plan") and hasattr(plan, "resolved_by"):  # tracefence.v1.ReviewItem
        plan = plan.plan
    steps: list[PlanStep] = []
    if isinstance(plan, TracePlan):
        for i, d in enumerate(plan.steps, 1):
            s = d.step
            ref = StepRef(i, s.call_id, s.tool, d.decision.value, tuple(d.reasons))
            steps.append(PlanStep(ref, d.decision, s.arguments_sha256, s.result_recorded, s.result_sha256, s.result_value, tuple(d.related_call_ids)))
        return plan.trace_id, steps, bool(plan.partial)
    if hasattr(plan, "steps") and hasattr(plan, "replay_class"):  # tracefence.v1.TracePlan
        for i, d in enumerate(plan.steps, 1):
            s = d.step
            decision = _PB_DECISIONS.get(d.decision, Decision.REVIEW)  # an unknown decision is never replayed
            ref = StepRef(i, s.call_id, s.tool, decision.value, tuple(d.reasons))
            steps.append(
                PlanStep(
                    ref, decision, s.arguments_sha256 or None, s.result_recorded, s.result_sha256 or None,
                    s.result_value if s.result_value else None, tuple(d.related_call_ids),
                )
            )
        return plan.trace_id, steps, bool(plan.partial)
    raise TypeError(f"not a plan: {type(plan).__name__} (expected a TracePlan or a tracefence.v1 TracePlan / ReviewItem)")


def verdict_sentence(plan: Any) -> str:
    """What a ``ReviewItem``'s latest verdict says, as a sentence for a refusal (``""`` for a plan that is no review
    item, or an item without a verdict): the verdict, who gave it, its evidence, and whether the item is resolved. A
    verdict never makes a held step replayable: the trace still cannot show what the call did."""
    if not (hasattr(plan, "plan") and hasattr(plan, "verdict_by")) or not plan.verdict:
        return ""
    from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
    from otel_tracefence.review.verdicts import verdict_from_proto

    try:
        verdict = verdict_from_proto(plan.verdict)
    except ValueError:
        verdict = f"unknown ({plan.verdict})"
    state = "resolved" if plan.state == pb.REVIEW_STATE_RESOLVED else "open"
    evidence = f": {plan.verdict_evidence}" if plan.verdict_evidence else ""
    return f" Its review item is {state}; latest verdict {verdict}, by {plan.verdict_by}{evidence}."


def parse_mode(mode: ReplayMode | str) -> ReplayMode:
    """``mode`` as a :class:`ReplayMode`; raises :class:`ValueError` for anything but ``dynamic`` or ``injected``."""
    try:
        return ReplayMode(mode)
    except ValueError:
        raise ValueError(f"mode must be 'dynamic' or 'injected', not {mode!r}") from None

