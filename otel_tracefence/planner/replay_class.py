"""A trace's replay class (DESIGN.md, "Replay class"): the most restrictive that applies."""

from __future__ import annotations

from typing import Sequence

from otel_tracefence.core.model import (
    CLASS_DYNAMIC, CLASS_INJECTED, CLASS_REVIEW, CLASS_STATIC, CONFLICT, REPLAY, REVIEW, SKIP, ReplayClass, StepDecision,
)


def replay_class(decisions: Sequence[StepDecision]) -> ReplayClass | None:
    """``None`` for a trace without tool steps; else review > static > injected > dynamic.

    ``dynamic``: every step replays (a declared read with stable results). ``static``: some skipped
    step (a committed write, an unstable read) has no recorded result to inject. Else ``injected``.
    """
    if not decisions:
        return None
    if any(d.decision in (REVIEW, CONFLICT) for d in decisions):
        return CLASS_REVIEW
    if all(d.decision is REPLAY for d in decisions):  # declared reads with stable results
        return CLASS_DYNAMIC
    if any(d.decision is SKIP and not d.step.result_recorded for d in decisions):
        return CLASS_STATIC
    return CLASS_INJECTED
