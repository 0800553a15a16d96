"""Rules across traces: a trace's writes against the writes of traces planned before it (issue 25).

A retry is usually another trace: a job runner re-runs the agent, a user presses "try again", a queue
redelivers. After a trace is planned alone (:func:`otel_tracefence.planner.plan_trace`), each of its
writes is looked up among the earlier traces' writes that the same door remembers (the write index,
``otel_tracefence/pipeline/write_index.py``) and these rules apply (docs/DECISIONS.md 590-594):

* ``idempotency_key_reused_across_traces``: the same tool and idempotency key as a write of an earlier
  trace, with other canonical arguments (both hashes known): ``conflict``. The key was meant for one
  effect; two effects claim it, and the destination deduplicates one away or charges twice.
* ``retry_of_held_write``: the same tool and key (or, for a write without a key, the same canonical
  arguments) as an earlier trace's write that was held (``review`` or ``conflict``) and is not resolved:
  ``review``. The first one's outcome is unknown; this one may have made the effect a second time.
* ``repeats_committed_write`` (a note): the same key and arguments as an earlier trace's committed write;
  the decision stands (the key did its job), the link is kept for the reviewer.

Reads never match, nor steps the model only requested. Within one trace the planner's rules stand. Each
finding links the earlier call as a :class:`~otel_tracefence.core.model.RelatedTrace`. Pure functions,
no I/O: the index is handed in as a lookup.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from otel_tracefence.core import reasons
from otel_tracefence.core.model import CONFLICT, REVIEW, SKIP, WRITE, RelatedTrace, StepDecision, ToolStep, TracePlan
from otel_tracefence.planner.replay_class import replay_class

_HELD = (REVIEW, CONFLICT)


@dataclass(frozen=True, slots=True)
class IndexedWrite:
    """One write as the index remembers it: where it was (trace and call id, start time in nanoseconds
    since the epoch), what it was (tool, idempotency key, canonical-arguments SHA-256 or ``None``), and how
    its trace's plan left it: ``held`` (``review`` / ``conflict``), ``committed`` (``skip``, a committed
    write), and ``resolved`` once a person or reconciler closed its review item."""

    trace_id: str
    call_id: str
    tool: str
    idempotency_key: str | None
    arguments_sha256: str | None
    start_time_unix_nano: int
    held: bool
    committed: bool
    resolved: bool = False


def index_keys(step: ToolStep) -> tuple[tuple[str, str, str], ...]:
    """The keys a write is found by: ``(tool, "key", idempotency key)`` when it has a key, and
    ``(tool, "args", arguments SHA-256)`` when its arguments were read. A read, or a step the model only
    requested, has none."""
    if step.effect is not WRITE or step.requested_only:
        return ()
    return keys_for(step.tool, step.idempotency_key, step.arguments_sha256)


def keys_for(tool: str, idempotency_key: str | None, arguments_sha256: str | None) -> tuple[tuple[str, str, str], ...]:
    """A write's index keys from its parts (:func:`index_keys` of a step; the index's own entries)."""
    keys = []
    if idempotency_key is not None:
        keys.append((tool, "key", idempotency_key))
    if arguments_sha256 is not None:
        keys.append((tool, "args", arguments_sha256))
    return tuple(keys)


def writes_of(plan: TracePlan) -> list[IndexedWrite]:
    """The writes of a planned trace, as the index keeps them."""
    return [
        IndexedWrite(
            trace_id=plan.trace_id,
            call_id=d.step.call_id,
            tool=d.step.tool,
            idempotency_key=d.step.idempotency_key,
            arguments_sha256=d.step.arguments_sha256,
            start_time_unix_nano=d.step.start_time_unix_nano,
            held=d.decision in _HELD,
            committed=d.decision is SKIP,
        )
        for d in plan.steps
        if index_keys(d.step)
    ]


def _findings(step: ToolStep, earlier: Sequence[IndexedWrite]) -> tuple[object, list[str], list[RelatedTrace]]:
    """The decision the earlier writes force on ``step`` (``None``: none), the reason codes and the links."""
    decision = None
    codes: list[str] = []
    links: list[RelatedTrace] = []
    keyed = step.idempotency_key is not None
    for other in earlier:
        same_key = keyed and other.idempotency_key == step.idempotency_key
        same_arguments = step.arguments_sha256 is not None and other.arguments_sha256 == step.arguments_sha256
        if same_key and step.arguments_sha256 is not None and other.arguments_sha256 is not None and not same_arguments:
            code = reasons.IDEMPOTENCY_KEY_REUSED_ACROSS_TRACES
            decision = CONFLICT
        elif other.held and not other.resolved and (same_key or (not keyed and other.idempotency_key is None and same_arguments)):
            code = reasons.RETRY_OF_HELD_WRITE
            decision = decision or REVIEW
        elif other.committed and same_key and same_arguments:
            code = reasons.REPEATS_COMMITTED_WRITE
        else:
            continue
        if code not in codes:
            codes.append(code)
        links.append(RelatedTrace(other.trace_id, other.call_id, code))
    return decision, codes, links


def against_earlier(plan: TracePlan, lookup: Callable[[ToolStep], Iterable[IndexedWrite]], max_related: int = 50) -> TracePlan:
    """``plan`` with the rules above applied: ``lookup(step)`` gives the earlier traces' writes that share
    one of :func:`index_keys` with ``step`` (any order; this trace's own are skipped). A fencing finding
    decides the step when it is more restrictive (``conflict`` over ``review`` over the rest), its codes
    go first; a note is added after the step's codes. At most ``max_related`` links per step, earliest
    first. The class is recomputed. Returns ``plan`` itself when nothing matched."""
    changed = False
    decisions: list[StepDecision] = []
    for d in plan.steps:
        if not index_keys(d.step):
            decisions.append(d)
            continue
        earlier = sorted(
            (w for w in lookup(d.step) if w.trace_id != plan.trace_id),
            key=lambda w: (w.start_time_unix_nano, w.trace_id, w.call_id),
        )
        decision, codes, links = _findings(d.step, earlier)
        if not codes:
            decisions.append(d)
            continue
        changed = True
        fencing = [c for c in codes if c not in reasons.NOTES]
        notes = [c for c in codes if c in reasons.NOTES and c not in d.reasons]
        own = [c for c in d.reasons if c not in fencing and not (fencing and c in reasons.NOT_FENCING)]
        new_decision = d.decision
        if decision is CONFLICT or (decision is REVIEW and d.decision is not CONFLICT):
            new_decision = decision
        decisions.append(
            replace(d, decision=new_decision, reasons=tuple(fencing + own + notes), related_traces=tuple(links[:max_related]))
        )
    if not changed:
        return plan
    steps = tuple(decisions)
    return replace(plan, steps=steps, replay_class=replay_class(steps))
