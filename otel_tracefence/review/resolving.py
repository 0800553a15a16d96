"""A review store's resolutions and verdicts: the one body both stores share (SQLite, ``review/store.py``; PostgreSQL,
``review/postgres.py``), over each store's ``_change`` (read the item, write what a transition makes, in one
transaction, under the item's row lock on PostgreSQL) and ``_clock`` (nanoseconds since the epoch)."""

from __future__ import annotations

from typing import Callable

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import transitions, verdicts
from otel_tracefence.review.verdicts import Verdict, parse_verdict


class Resolutions:
    """``resolve`` and ``record_verdict`` for a store that has ``_change`` and ``_clock``. Raises what the store's
    ``_change`` raises when the database fails (:class:`~otel_tracefence.review.store.ReviewStoreError`)."""

    _clock: Callable[[], int]

    def _change(self, trace_id: str, make: Callable[[pb.ReviewItem, int], transitions.Change]) -> pb.ReviewItem:
        raise NotImplementedError

    def resolve(self, trace_id: str, *, resolved_by: str, note: str, verdict: Verdict | str = "") -> pb.ReviewItem:
        """Mark the item resolved by ``resolved_by`` (a person or system) with ``note``.

        Sets state ``RESOLVED``, ``resolved_by``, ``resolution_note`` and
        ``resolved_time`` (= the new ``updated_time``), and appends a ``resolved``
        event to the history in the same transaction. Resolving a resolved item
        again shows the latest resolution on the item and adds a second event
        (the first stays in the history). ``verdict`` (optional, a person's): recorded on the event and as the
        item's latest verdict; a person's resolution resolves whatever the verdict (it overrules any), and
        ``found_twice`` still marks the item ``duplicate_effect_found``
        (:mod:`otel_tracefence.review.verdicts`). Returns the stored item. Raises
        :class:`KeyError` for an unknown trace id, :class:`ValueError` when
        ``resolved_by`` is empty or blank or ``verdict`` is unknown, :class:`TypeError` when ``note`` is no str.
        """
        transitions.check_resolution(resolved_by, note)
        given = parse_verdict(verdict, allow_none=True)
        item = self._change(trace_id, lambda stored, updated_ns: transitions.apply_resolve(
            stored, updated_ns, resolved_by=resolved_by, note=note, now_ns=self._clock(), verdict=given
        ))  # fmt: skip
        verdicts.report(item.trace_id, resolved_by, given, note, resolved=item.state == pb.REVIEW_STATE_RESOLVED)
        return item

    def record_verdict(self, trace_id: str, *, actor: str, verdict: Verdict | str, evidence: str) -> pb.ReviewItem:
        """Record ``actor``'s ``verdict`` on the item's effect with its line of ``evidence``, in the history (event
        ``resolved`` or ``verdict``) and as the item's latest: ``found_once`` / ``absent`` resolve the item;
        ``found_twice`` keeps it open, marks it ``duplicate_effect_found``, logs a WARNING and counts
        ``tracefence.review.duplicate_effects``; ``undetermined`` keeps it open with the evidence
        (:func:`otel_tracefence.review.transitions.apply_verdict`). Returns the stored item. Raises :class:`KeyError`
        for an unknown trace id, :class:`ValueError` for a blank actor or an unknown verdict."""
        given = verdicts.check_verdict(actor, verdict, evidence)
        item = self._change(trace_id, lambda stored, updated_ns: transitions.apply_verdict(
            stored, updated_ns, actor=actor, verdict=given, evidence=evidence, now_ns=self._clock()
        ))  # fmt: skip
        verdicts.report(item.trace_id, actor, given, evidence, resolved=item.state == pb.REVIEW_STATE_RESOLVED)
        return item
