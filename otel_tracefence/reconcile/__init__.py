"""Reconcilers: the operator's read-only checks that ask the system owning an effect whether a held write took
effect (issue 25). otel-tracefence never calls a tool: it calls the check the operator gave it and records the
answer as a verdict with its line of evidence (:meth:`ReviewStore.record_verdict
<otel_tracefence.review.store.SQLiteReviewStore.record_verdict>`).

A reconciler is ``function(request: ReconcileRequest) -> ReconcileResult``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from otel_tracefence.review.verdicts import Verdict

__all__ = ["ReconcileRequest", "ReconcileResult", "RelatedCall", "Verdict"]


@dataclass(frozen=True)
class RelatedCall:
    """A call of another trace the held write's decision concerns (the write index's link)."""

    trace_id: str
    call_id: str
    reason: str


@dataclass(frozen=True)
class ReconcileRequest:
    """The held write a reconciler is asked about. ``arguments``: the call's arguments where the redaction policy
    kept them (the stored raw value), else ``None``; ``arguments_sha256``: their hash, always.
    ``start_time_ns``: nanoseconds since the Unix epoch. ``reasons``: the step's reason codes."""

    trace_id: str
    call_id: str
    tool: str
    idempotency_key: str
    arguments: object | None
    arguments_sha256: str
    start_time_ns: int
    reasons: tuple[str, ...] = ()
    related_traces: tuple[RelatedCall, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ReconcileResult:
    """A reconciler's answer: the :class:`Verdict` and one line of evidence (what it looked up and found)."""

    verdict: Verdict
    evidence: str
