"""Whether a plan allows a replay mode (seed 000's ``assert_dynamically_replayable``, with the plan in place of fixed
tool sets), and the refusal that names the first step breaking it and says what to do instead (docs/DECISIONS.md,
items 60 to 62)."""

from __future__ import annotations

from typing import Any

from otel_tracefence.agent.replay_errors import NonReplayableTraceError
from otel_tracefence.agent.replay_steps import PlanStep, ReplayMode, parse_mode, plan_steps, verdict_sentence
from otel_tracefence.core import reasons as rc
from otel_tracefence.core.model import Decision


def breaks(step: PlanStep, mode: ReplayMode) -> bool:
    """Whether ``step`` stops a replay in ``mode``: anything but ``replay`` in ``dynamic``; in ``injected``, a step
    in review or conflict, or a ``skip`` step whose result was not recorded."""
    if step.decision is Decision.REPLAY:
        return False
    if mode is ReplayMode.DYNAMIC:
        return True
    return step.decision is not Decision.SKIP or not step.result_recorded


def _flow(step: PlanStep) -> str:
    """What the data-flow notes say of the step's result, as a sentence (empty when nothing)."""
    if rc.RESULT_CONSUMED_BY in step.ref.reasons:
        return f" Its result was used by a later call ({', '.join(step.related)}): a regenerated value would make the replay diverge."
    if rc.UNRECORDED_RESULT_MAY_BE_CONSUMED in step.ref.reasons:
        return f" A later call ({', '.join(step.related)}) used an id no recorded value explains: it may have come from this result."
    return ""


def _advice(step: PlanStep, mode: ReplayMode | None, verdict: str = "") -> str:
    """Why the step cannot be re-executed (or injected), and what to do instead; ``verdict``: the review item's
    verdict sentence (:func:`~otel_tracefence.agent.replay_steps.verdict_sentence`), named for a held step."""
    ref = step.ref
    head = f"step {ref.index}: tool {ref.tool!r} (call {ref.call_id})"
    why = ", ".join(ref.reasons) or ref.decision
    if step.decision in (Decision.REVIEW, Decision.CONFLICT):
        return (
            f"{head} is held for {ref.decision} ({why}): the trace cannot show what this call did to the world. "
            f"Reconcile it with the owning system; until then use static inspection of the recorded steps. "
            f"Neither dynamic nor injected replay is allowed.{verdict}"
        )
    if step.decision is Decision.SKIP and not step.result_recorded:
        what = "a committed write" if rc.WRITE_COMMITTED in ref.reasons else "a read whose results are not stable"
        return (
            f"{head} is {what} whose result was not recorded ({why}): a replay would have to re-execute it "
            f"to give the agent its input, firing it again or regenerating a handle the agent may branch on."
            f"{_flow(step)} Use static inspection of the recorded steps."
        )
    if rc.UNSTABLE_RESULT in ref.reasons:
        return (
            f"{head} returns results that differ between executions ({why}): re-execution would regenerate the "
            f"value the agent branched on and the replay would diverge.{_flow(step)} Use static inspection, or injected "
            f"replay with the recorded result of call {ref.call_id}."
        )
    return (
        f"{head} is a committed write ({why}): re-execution would commit a second side effect.{_flow(step)} "
        f"Use static inspection, or injected replay with the recorded result of call {ref.call_id}."
    )


def refusal(trace_id: str, broken: list[PlanStep], mode: ReplayMode | None, verdict: str = "") -> NonReplayableTraceError:
    """The error for ``broken`` (steps in trace order, at least one): the first named with its advice, up to 10 others
    listed. ``mode`` ``None`` when a guard refuses one call. ``verdict``: the review item's verdict sentence."""
    first, others = broken[0], broken[1:]
    message = _advice(first, mode, verdict)
    if mode is not None:
        message = f"{mode.value} replay refused: " + message
    if others:
        listed = "; ".join(str(o.ref) for o in others[:10]) + ("; ..." if len(others) > 10 else "")
        message += f" {len(others)} other step(s) also break {mode.value if mode else 'this'} replay: {listed}."
    return NonReplayableTraceError(message, step=first.ref, mode=mode, others=[o.ref for o in others], trace_id=trace_id)


def assert_replayable(plan: Any, mode: ReplayMode | str) -> bool:
    """Refuse ``mode`` (``"dynamic"`` or ``"injected"``) unless every step of ``plan`` allows it; ``True`` if all do.

    ``dynamic`` passes only when every step is ``replay`` (a declared read with
    stable results); ``injected`` also accepts ``skip`` steps whose result was
    recorded (committed writes, unstable reads), which are then injected. A plan
    without tool steps passes both; a partial plan (``partial``: decided before its
    trace was complete) passes neither, since steps may be missing. Raises :class:`NonReplayableTraceError` for the
    first step in trace order that breaks the mode, listing the others in
    ``others`` and in its message (a review item's latest verdict and evidence too, when it has one);
    :class:`ValueError` for another mode;
    :class:`TypeError` for something that is not a plan. Source: seed 000's
    ``assert_dynamically_replayable``, with the plan in place of fixed tool sets.
    """
    checked = parse_mode(mode)
    trace_id, steps, partial = plan_steps(plan)
    broken = [s for s in steps if breaks(s, checked)]
    if broken:
        raise refusal(trace_id, broken, checked, verdict_sentence(plan))
    if partial:
        raise NonReplayableTraceError(
            f"{checked.value} replay refused: the plan of trace {trace_id} is partial (decided before the trace was complete: "
            f"evicted, its wait ran out, or spans came after it was decided), so steps may be missing and nobody can vouch for them. Plan the complete trace "
            f"again (tracefence plan on the exported spans), or use static inspection of the recorded steps.",
            step=None, mode=checked, trace_id=trace_id,
        )
    return True


def assert_dynamically_replayable(plan: Any) -> bool:
    """Seed 000's name for :func:`assert_replayable` ``(plan, "dynamic")``: refuse re-execution unless every step is a stable read."""
    return assert_replayable(plan, ReplayMode.DYNAMIC)
