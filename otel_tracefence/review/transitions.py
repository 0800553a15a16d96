"""The review queue's rules, apart from any database: what an upsert or a resolution makes of an item
and which history events it writes. Every store (SQLite, PostgreSQL) reads the stored item under its
own lock or row lock, calls these, and writes what they return in the same transaction.

* :func:`prepare_plan`: the plan as it is stored (validated, copied, raw values stripped unless kept);
* :func:`apply_upsert`: insert, or merge a redelivered, late or re-decided plan into the stored item
  (never losing a step), reopening a resolved item whose plan changed in substance;
* :func:`apply_resolve`: a resolution, which never overwrites the history;
* :func:`apply_verdict`: a verdict on the effect (:mod:`otel_tracefence.review.verdicts`);
* :func:`back_links` and :func:`apply_links`: an earlier trace's item learns of the later traces whose decisions
  name its calls (retries across traces, docs/decisions/retries.md item 817), in the transaction that stores them.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Callable

from google.protobuf.message import DecodeError

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import TracePlan
from otel_tracefence.review import verdicts
from otel_tracefence.review.events import ReviewEvent
from otel_tracefence.review.verdicts import Verdict
from otel_tracefence.core.schema import plan_to_proto

PLAN_WRITTEN, PLAN_UPDATED, RESOLVED, REOPENED, VERDICT = "plan_written", "plan_updated", "resolved", "reopened", "verdict"


@dataclass(frozen=True)
class Change:
    """What one upsert or resolution writes: the whole item, its ``created_ns`` and ``updated_ns`` (the
    indexed columns, nanoseconds since the Unix epoch) and the history events to append, oldest first."""

    item: pb.ReviewItem
    created_ns: int
    updated_ns: int
    events: tuple[ReviewEvent, ...]


def strip_raw_values(plan: pb.TracePlan) -> None:
    """Clear every step's ``arguments_json`` and ``result_value`` in place (their SHA-256 stay)."""
    for decision in plan.steps:
        decision.step.ClearField("arguments_json")
        decision.step.ClearField("result_value")


def prepare_plan(plan: TracePlan | pb.TracePlan, *, store_raw_values: bool) -> pb.TracePlan:
    """The ``tracefence.v1.TracePlan`` to store: a copy (the caller's message is not modified), raw values
    stripped unless ``store_raw_values``. Raises :class:`ValueError` for a plan with no trace id or no tool
    step (class unspecified), :class:`TypeError` for another type."""
    if isinstance(plan, TracePlan):
        message = plan_to_proto(plan)
    elif isinstance(plan, pb.TracePlan):
        message = pb.TracePlan()
        message.CopyFrom(plan)
    else:
        raise TypeError(f"plan must be a TracePlan, not {type(plan).__name__}")
    if not message.trace_id:
        raise ValueError("the plan has no trace id")
    if message.replay_class == pb.REPLAY_CLASS_UNSPECIFIED:
        raise ValueError(f"trace {message.trace_id}: a plan with no tool step has nothing to review")
    if not store_raw_values:
        strip_raw_values(message)
    return message


def check_resolution(resolved_by: object, note: object) -> None:
    """Raise :class:`ValueError` when ``resolved_by`` is not a non-blank str, :class:`TypeError` when ``note`` is no str."""
    if not isinstance(resolved_by, str) or not resolved_by.strip():
        raise ValueError("resolved_by must name who resolved the item")
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, not {type(note).__name__}")


def substance(plan: pb.TracePlan) -> tuple[int, builtins.list[pb.StepDecision]]:
    """What a resolution was based on: the class and the steps, raw values aside (``partial`` aside too)."""
    copy = pb.TracePlan()
    copy.CopyFrom(plan)
    strip_raw_values(copy)
    return copy.replay_class, builtins.list(copy.steps)


def _step_identity(decision: pb.StepDecision) -> tuple[str, str]:
    return (decision.step.span_id, decision.step.call_id)


def keep_missing_steps(stored: pb.TracePlan, new: pb.TracePlan) -> None:
    """Carry into ``new`` every step of ``stored`` it lacks, so an update never drops an uncertain write.

    Replay classes are ordered from safest to most restrictive in the schema
    (dynamic=1 ... review=4), so the more restrictive is the larger value.
    """
    present = {_step_identity(d) for d in new.steps}
    missing = [d for d in stored.steps if _step_identity(d) not in present]
    if not missing:
        return
    new.steps.extend(missing)
    new.partial = True
    new.replay_class = max(new.replay_class, stored.replay_class)


def _class_name(value: int) -> str:
    return pb.ReplayClass.Name(value).removeprefix("REPLAY_CLASS_").lower()


def what_changed(old: pb.TracePlan, new: pb.TracePlan) -> str:
    """Why a resolved item reopens, for a person: the class change and the call ids added or changed."""
    parts = []
    if old.replay_class != new.replay_class:
        parts.append(f"class {_class_name(old.replay_class)} -> {_class_name(new.replay_class)}")
    old_steps = {_step_identity(d): d for d in substance(old)[1]}
    added, changed = [], []
    for d in substance(new)[1]:
        before = old_steps.get(_step_identity(d))
        if before is None:
            added.append(d.step.call_id or d.step.span_id)
        elif before != d:
            changed.append(d.step.call_id or d.step.span_id)
    if added:
        parts.append("steps added: " + ", ".join(added))
    if changed:
        parts.append("steps changed: " + ", ".join(changed))
    return "; ".join(parts) or "steps reordered"


def _event(kind: str, item: pb.ReviewItem, time_ns: int, actor: str, note: str = "", verdict: Verdict | None = None, evidence: str = "") -> ReviewEvent:
    return ReviewEvent(
        kind=kind, time_ns=time_ns, actor=actor, note=note, state=item.state, replay_class=item.plan.replay_class,
        verdict=verdict.value if verdict else "", evidence=evidence,
    )  # fmt: skip


def apply_upsert(stored: pb.ReviewItem | None, stored_updated_ns: int, plan: pb.TracePlan, *, service_name: str, now_ns: int) -> Change:
    """The item after storing ``plan`` (from :func:`prepare_plan`) over ``stored`` (``None``: no item yet).

    A new item is ``OPEN``, created and updated at ``now_ns``: event ``plan_written``. An update replaces
    the plan but never loses a step (:func:`keep_missing_steps`), keeps ``created_time``, and sets
    ``updated_time`` to ``max(now_ns, stored_updated_ns + 1)`` (strictly later, even on a coarse clock).
    ``service_name`` replaces the stored one only when non-empty. When the plan's :func:`substance`
    changed: event ``plan_updated``, and a resolved item reopens (state ``OPEN``; ``resolved_by``,
    ``resolution_note`` and ``resolved_time`` cleared; event ``reopened`` whose note says who had resolved
    it and :func:`what_changed`). An update that changes nothing of substance (a redelivery) writes no
    event and leaves a resolution as it was. Event actors: ``service_name`` (may be ``""``).
    """
    if stored is None:
        item = pb.ReviewItem(trace_id=plan.trace_id, plan=plan, state=pb.REVIEW_STATE_OPEN, service_name=service_name)
        item.created_time.FromNanoseconds(now_ns)
        item.updated_time.FromNanoseconds(now_ns)
        return Change(item, now_ns, now_ns, (_event(PLAN_WRITTEN, item, now_ns, service_name),))
    item = pb.ReviewItem()
    item.CopyFrom(stored)
    new = pb.TracePlan()
    new.CopyFrom(plan)
    updated_ns = max(now_ns, stored_updated_ns + 1)
    keep_missing_steps(item.plan, new)
    changed = substance(item.plan) != substance(new)
    why = what_changed(item.plan, new) if changed else ""
    item.plan.CopyFrom(new)
    if service_name:
        item.service_name = service_name
    events = []
    reopened_from = ""
    if changed and item.state == pb.REVIEW_STATE_RESOLVED:
        reopened_from = item.resolved_by
        item.state = pb.REVIEW_STATE_OPEN
        item.ClearField("resolved_by")
        item.ClearField("resolution_note")
        item.ClearField("resolved_time")
        verdicts.clear(item)  # given on the old plan
    item.updated_time.FromNanoseconds(updated_ns)
    if changed:
        events.append(_event(PLAN_UPDATED, item, updated_ns, service_name, why))
    if reopened_from:
        events.append(_event(REOPENED, item, updated_ns, service_name, f"the plan changed after {reopened_from} resolved it: {why}"))
    return Change(item, item.created_time.ToNanoseconds(), updated_ns, tuple(events))


def apply_resolve(stored: pb.ReviewItem, stored_updated_ns: int, *, resolved_by: str, note: str, now_ns: int, verdict: Verdict | None = None, evidence: str = "") -> Change:
    """The item after a resolution (checked with :func:`check_resolution`): state ``RESOLVED``,
    ``resolved_by``, ``resolution_note``, and ``resolved_time`` = ``updated_time`` =
    ``max(now_ns, stored_updated_ns + 1)``; event ``resolved`` (actor ``resolved_by``, the note, the verdict and
    ``evidence``). ``verdict`` (a person's, or a resolving one of :func:`apply_verdict`) becomes the item's latest
    (:func:`~otel_tracefence.review.verdicts.mark`, its evidence ``evidence`` or else the note). Resolving a
    resolved item again shows the latest resolution on the item and adds a second event."""
    item = pb.ReviewItem()
    item.CopyFrom(stored)
    updated_ns = max(now_ns, stored_updated_ns + 1)
    item.state = pb.REVIEW_STATE_RESOLVED
    item.resolved_by = resolved_by
    item.resolution_note = note
    item.resolved_time.FromNanoseconds(updated_ns)
    item.updated_time.FromNanoseconds(updated_ns)
    if verdict is not None:
        verdicts.mark(item, verdict, by=resolved_by, evidence=evidence or note)
    return Change(item, item.created_time.ToNanoseconds(), updated_ns, (_event(RESOLVED, item, updated_ns, resolved_by, note, verdict, evidence),))


def apply_verdict(stored: pb.ReviewItem, stored_updated_ns: int, *, actor: str, verdict: Verdict, evidence: str, now_ns: int) -> Change:
    """The item after ``actor``'s ``verdict`` (checked with :func:`~otel_tracefence.review.verdicts.check_verdict`):
    ``found_once`` and ``absent`` resolve it (:func:`apply_resolve`, note ``""``, the evidence on the event);
    ``found_twice`` and ``undetermined`` leave its state (open stays open: a resolution is a person's to give) and
    write event ``verdict``; ``found_twice`` sets ``duplicate_effect_found``. Either way the verdict becomes the
    item's latest and ``updated_time`` moves on."""
    if verdict in verdicts.RESOLVING:
        return apply_resolve(stored, stored_updated_ns, resolved_by=actor, note="", now_ns=now_ns, verdict=verdict, evidence=evidence)
    item = pb.ReviewItem()
    item.CopyFrom(stored)
    updated_ns = max(now_ns, stored_updated_ns + 1)
    item.updated_time.FromNanoseconds(updated_ns)
    verdicts.mark(item, verdict, by=actor, evidence=evidence)
    return Change(item, item.created_time.ToNanoseconds(), updated_ns, (_event(VERDICT, item, updated_ns, actor, "", verdict, evidence),))


MAX_LATER_TRACES = 50
"""Most later-trace links one item keeps (the first ones: the retries that matter most are the first)."""


def back_links(changes: builtins.list[Change]) -> dict[str, builtins.list[pb.RelatedTrace]]:
    """Earlier trace id -> the links its item gains from ``changes`` (items just stored): for each call of an
    earlier trace a stored step's decision names (``related_traces``), the later trace, the naming step's call id
    and the reason, once each; links to a trace stored in the same ``changes`` included. Sorted by trace id, the
    order the stores lock rows in."""
    links: dict[str, builtins.list[pb.RelatedTrace]] = {}
    for change in changes:
        later = change.item.trace_id
        for decision in change.item.plan.steps:
            for related in decision.related_traces:
                if related.trace_id == later:
                    continue
                link = pb.RelatedTrace(trace_id=later, call_id=decision.step.call_id, reason=related.reason)
                if link not in links.setdefault(related.trace_id, []):
                    links[related.trace_id].append(link)
    return dict(sorted(links.items()))


def apply_links(stored: pb.ReviewItem, stored_updated_ns: int, links: builtins.list[pb.RelatedTrace]) -> Change | None:
    """The earlier item with ``links`` added to ``later_traces`` (those it lacks, up to :data:`MAX_LATER_TRACES`),
    or ``None`` when it has them all. Neither its state, its plan, its ``updated_time`` nor its history changes: a
    later trace's decision is news about that trace, kept on its own item; this is the way back to it."""
    new = [link for link in links if link not in stored.later_traces][: max(0, MAX_LATER_TRACES - len(stored.later_traces))]
    if not new:
        return None
    item = pb.ReviewItem()
    item.CopyFrom(stored)
    item.later_traces.extend(new)
    return Change(item, item.created_time.ToNanoseconds(), stored_updated_ns, ())


def link_earlier(changes: builtins.list[Change], read: Callable[[str], tuple[int, bytes] | None], write: Callable[[Change], None]) -> None:
    """Add :func:`back_links` of ``changes`` to the earlier items, in the caller's transaction: ``read(trace_id)``
    gives the stored ``(updated_ns, item bytes)`` (locked for update) or ``None``; ``write(change)`` stores one. An
    earlier trace with no item (its write committed: not queued) gets none; an earlier item that cannot be read is
    left as it is. Neither ever fails the changes themselves."""
    for trace_id, links in back_links(changes).items():
        row = read(trace_id)
        if row is None:
            continue
        try:
            stored = pb.ReviewItem.FromString(row[1])
        except (DecodeError, TypeError):
            continue  # ``review list`` names an unreadable item; it must not cost the later trace its own
        linked = apply_links(stored, row[0], links)
        if linked is not None:
            write(linked)


def migrated_events(item: pb.ReviewItem) -> builtins.list[ReviewEvent]:
    """The history synthesized for an item stored before histories existed (schema version 1): ``plan_written``
    at its ``created_time`` (the class it has now: earlier ones are not known), then, when it is resolved,
    ``resolved`` at its ``resolved_time`` with who and the note."""
    created_ns = item.created_time.ToNanoseconds()
    note = "synthesized when the review database was migrated from schema version 1: earlier plan updates are not known"
    events = [ReviewEvent(PLAN_WRITTEN, created_ns, item.service_name, note, pb.REVIEW_STATE_OPEN, item.plan.replay_class)]
    if item.state == pb.REVIEW_STATE_RESOLVED:
        events.append(_event(RESOLVED, item, item.resolved_time.ToNanoseconds(), item.resolved_by, item.resolution_note))
    return events
