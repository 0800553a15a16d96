"""The review queue's history and the interface every store implements.

Each item keeps an append-only history of :class:`ReviewEvent`: a plan written
or updated, a resolution, a reopening. Nothing in it is ever rewritten;
resolving twice adds a second ``resolved`` event.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Iterable, Protocol

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.review.verdicts import Verdict, parse_verdict, verdict_from_proto, verdict_to_proto

EVENT_KINDS = ("plan_written", "plan_updated", "resolved", "reopened", "verdict")
"""The kinds of :class:`ReviewEvent`, in the order a first item usually sees them."""


@dataclass(frozen=True)
class ReviewEvent:
    """One entry of an item's history.

    ``kind``: one of :data:`EVENT_KINDS`. ``time_ns``: nanoseconds since the
    Unix epoch, the item's ``updated_time`` after the event. ``actor``: who
    (``resolved_by`` for a resolution; the writer's service name, or ``""``,
    for plan events). ``note``: the resolution note, or why an item reopened.
    ``state``: the ``tracefence.v1.ReviewState`` after the event.
    ``replay_class``: the ``tracefence.v1.ReplayClass`` value after the event.
    ``verdict``: the :class:`~otel_tracefence.review.verdicts.Verdict` value the event records (``resolved``,
    ``verdict``), ``""`` for none; ``evidence``: its line of evidence (a reconciler's answer), ``""`` for none.
    """

    kind: str
    time_ns: int
    actor: str
    note: str
    state: int
    replay_class: int
    verdict: str = ""
    evidence: str = ""


def event_to_proto(event: ReviewEvent) -> pb.ReviewEvent:
    """The ``tracefence.v1.ReviewEvent`` of ``event`` (``kind`` ``plan_written`` -> ``REVIEW_EVENT_KIND_PLAN_WRITTEN``)."""
    message = pb.ReviewEvent(
        kind=pb.ReviewEventKind.Value("REVIEW_EVENT_KIND_" + event.kind.upper()),
        actor=event.actor,
        note=event.note,
        state=event.state,
        replay_class=event.replay_class,
        verdict=verdict_to_proto(parse_verdict(event.verdict, allow_none=True)),
        evidence=event.evidence,
    )
    message.time.FromNanoseconds(event.time_ns)
    return message


def event_from_proto(message: pb.ReviewEvent) -> ReviewEvent:
    """The :class:`ReviewEvent` of a ``tracefence.v1.ReviewEvent``. Raises :class:`ValueError` for an unspecified kind."""
    name = pb.ReviewEventKind.Name(message.kind).removeprefix("REVIEW_EVENT_KIND_").lower()
    if name not in EVENT_KINDS:
        raise ValueError(f"review event kind {message.kind} is not one of {', '.join(EVENT_KINDS)}")
    return ReviewEvent(
        name, message.time.ToNanoseconds(), message.actor, message.note, message.state, message.replay_class, verdict_from_proto(message.verdict), message.evidence
    )


class ReviewStore(Protocol):
    """What every review store offers (SQLite, PostgreSQL); see :class:`~otel_tracefence.review.store.SQLiteReviewStore` for each method's contract."""

    store_raw_values: bool

    def upsert(self, plan: TracePlan | pb.TracePlan, *, service_name: str = "") -> pb.ReviewItem: ...

    def get(self, trace_id: str) -> pb.ReviewItem | None: ...

    def trace_ids_starting(self, prefix: str, *, limit: int = 10) -> builtins.list[str]: ...

    def resolve(self, trace_id: str, *, resolved_by: str, note: str, verdict: Verdict | str = "") -> pb.ReviewItem: ...

    def record_verdict(self, trace_id: str, *, actor: str, verdict: Verdict | str, evidence: str) -> pb.ReviewItem: ...

    def history(self, trace_id: str) -> builtins.list[ReviewEvent]: ...

    def spans(self, trace_id: str) -> pb.ReviewSpans | None: ...

    def list(
        self,
        *,
        state: int | None = None,
        replay_classes: Iterable[ReplayClass | int] = (),
        service_name: str | None = None,
        page_size: int = 100,
        page_token: str = "",
        skipped: builtins.list | None = None,
        oldest_first: bool = False,
    ) -> tuple[builtins.list[pb.ReviewItem], str]: ...

    def close(self) -> None: ...
