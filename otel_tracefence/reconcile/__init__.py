"""Reconcilers: the operator's read-only checks that ask the system owning an effect whether a held write took
effect (issue 25). otel-tracefence never calls a tool: it calls the check the operator gave it and records the
answer as a verdict with its line of evidence (:meth:`ReviewStore.record_verdict
<otel_tracefence.review.store.SQLiteReviewStore.record_verdict>`).

A reconciler is ``function(request: ReconcileRequest) -> ReconcileResult``, registered per tool name in the config
(``reconcilers: {invoice.create: "billing_checks:find_invoice"}``) or through the entry-point group
``tracefence.reconcilers`` (:mod:`otel_tracefence.reconcile.registry`). It must only read: it is asked, possibly more
than once, whether the effect of a call happened; it never repeats the call. How its answers become verdicts, and
what a reconciler that raises, hangs or returns something else gives: :mod:`otel_tracefence.reconcile.runner`
(docs/decisions/retries.md).
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
    """The held write a reconciler is asked about. ``idempotency_key``: the call's key, ``None`` when it had none.
    ``arguments``: the call's arguments (a JSON value) where the review store kept them (``store_raw_values``, after
    the redaction policy), else ``None``; ``arguments_sha256``: the SHA-256 (hex) of their RFC 8785 canonical JSON,
    ``""`` when they were not recorded. ``start_time_ns``: nanoseconds since the Unix epoch (0 when no span recorded
    the call). ``reasons``: the step's reason codes. ``decision``: ``review`` or ``conflict``."""

    trace_id: str
    call_id: str
    tool: str
    idempotency_key: str | None
    arguments: object | None
    arguments_sha256: str
    start_time_ns: int
    reasons: tuple[str, ...] = ()
    decision: str = "review"
    related_traces: tuple[RelatedCall, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ReconcileResult:
    """A reconciler's answer: the :class:`Verdict` and one line of evidence (what it looked up and found)."""

    verdict: Verdict
    evidence: str
