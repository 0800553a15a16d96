"""A trace's replay class (DESIGN.md, "Replay class"): the most restrictive that applies."""

from __future__ import annotations

from typing import Sequence

from otel_tracefence.model import Decision, ReplayClass, StepDecision


def replay_class(decisions: Sequence[StepDecision]) -> ReplayClass | None:
    """``None`` for a trace without tool steps; else review > static > injected > dynamic.

    ``dynamic``: every step replays (a declared read with stable results). ``static``: some skipped
    step (a committed write, an unstable read) has no recorded result to inject. Else ``injected``.
    """
    if not decisions:
        return None
    if any(d.decision in (Decision.REVIEW, Decision.CONFLICT) for d in decisions):
        return ReplayClass.REVIEW
    if all(d.decision is Decision.REPLAY for d in decisions):  # declared reads with stable results
        return ReplayClass.DYNAMIC
    if any(d.decision is Decision.SKIP and not d.step.result_recorded for d in decisions):
        return ReplayClass.STATIC
    return ReplayClass.INJECTED
