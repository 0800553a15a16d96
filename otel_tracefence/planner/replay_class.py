"""A trace's replay class (DESIGN.md, "Replay class"): the most restrictive that applies."""

from __future__ import annotations

from typing import Sequence

from otel_tracefence.model import Decision, Effect, ReplayClass, StepDecision


def replay_class(decisions: Sequence[StepDecision]) -> ReplayClass | None:
    """``None`` for a trace without tool steps; else review > static > injected > dynamic."""
    if not decisions:
        return None
    if any(d.decision in (Decision.REVIEW, Decision.CONFLICT) for d in decisions):
        return ReplayClass.REVIEW
    if all(d.step.effect is Effect.READ for d in decisions):
        return ReplayClass.DYNAMIC
    if any(d.decision is Decision.SKIP and not d.step.result_recorded for d in decisions):
        return ReplayClass.STATIC
    return ReplayClass.INJECTED
