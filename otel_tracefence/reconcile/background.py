"""``tracefence serve``'s background reconciling (``service.reconcile_interval_s``): every interval, the open review
items that are due are checked and their verdicts recorded (:mod:`otel_tracefence.reconcile.runner`), on a thread
of its own with a review-store connection of its own, never on the intake path.

An item is due when this loop has not seen it yet, or its plan changed since (a new ``updated_time`` it did not
write itself), or its last answer was ``undetermined`` (or its write failed) and its wait is over: the interval,
doubled at each such answer in a row, up to ``backoff_max_s``. An item found twice, or with no reconciler for any
held call, waits for a change of its plan or a person. The loop's memory is one entry per open item.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from otel_tracefence.reconcile.runner import ItemOutcome, ReconcileRunner, open_items, reconcile_items
from otel_tracefence.review.verdicts import Verdict

logger = logging.getLogger(__name__)

BACKOFF_MAX_S = 3600.0


@dataclass(frozen=True)
class _Seen:
    updated_ns: int  # the item's updated_time after the loop's last look (its own write included)
    due: float  # monotonic seconds; inf: until the item changes
    attempts: int  # undetermined answers in a row


class ReconcileLoop:
    """Reconcile due open items every ``interval_s`` seconds until :meth:`stop`. ``open_store()`` opens the loop's
    own review store (called again after a failure). ``clock``: monotonic seconds, for tests."""

    def __init__(
        self,
        open_store: Callable[[], Any],
        runner: ReconcileRunner,
        interval_s: float,
        *,
        backoff_max_s: float = BACKOFF_MAX_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be above 0, not {interval_s!r}")
        self._open_store = open_store
        self.runner = runner
        self.interval_s = interval_s
        self.backoff_max_s = max(backoff_max_s, interval_s)
        self._clock = clock
        self._seen: dict[str, _Seen] = {}
        self._store: Any = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> None:
        """Start the loop's thread (a daemon); the first pass comes one interval after."""
        self._thread = threading.Thread(target=self._run, name="tracefence-reconcile-loop", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop after the pass under way (waited for up to ``timeout_s`` seconds) and close the store."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._thread is None or not self._thread.is_alive():
            self._close()

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self.run_once()

    def _close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                logger.debug("reconcile loop: closing the review store failed", exc_info=True)

    def run_once(self) -> list[ItemOutcome]:
        """One pass: the due items checked and recorded. Never raises: a store failure is logged once until the
        store works again, and the next pass opens it anew."""
        try:
            if self._store is None:
                self._store = self._open_store()
            items = list(open_items(self._store))
        except Exception as exc:  # noqa: BLE001 - the loop outlives a store outage
            if not self._failing:
                logger.error("reconcile loop: the review store cannot be read (%s: %s); trying again every %g s", type(exc).__name__, exc, self.interval_s)
            self._failing = True
            self._close()
            return []
        if self._failing:
            logger.info("reconcile loop: the review store answers again")
            self._failing = False
        now = self._clock()
        self._seen = {item.trace_id: self._seen[item.trace_id] for item in items if item.trace_id in self._seen}
        due = [item for item in items if self._due(item, now)]
        if not due:
            return []
        outcomes = reconcile_items(self._store, due, self.runner)
        now = self._clock()
        for item, outcome in zip(due, outcomes):
            self._note(item, outcome, now)
        return outcomes

    def _due(self, item: Any, now: float) -> bool:
        seen = self._seen.get(item.trace_id)
        return seen is None or seen.updated_ns != item.updated_time.ToNanoseconds() or seen.due <= now

    def _note(self, item: Any, outcome: ItemOutcome, now: float) -> None:
        if outcome.action in ("resolved", "skipped"):
            self._seen.pop(item.trace_id, None)
            return
        updated_ns = outcome.updated_ns or item.updated_time.ToNanoseconds()
        before = self._seen.get(item.trace_id)
        again = outcome.action == "failed" or outcome.verdict is Verdict.UNDETERMINED
        if not again:
            self._seen[item.trace_id] = _Seen(updated_ns, math.inf, 0)
            return
        attempts = before.attempts + 1 if before is not None and before.updated_ns == item.updated_time.ToNanoseconds() else 1
        wait = min(self.interval_s * 2 ** (attempts - 1), self.backoff_max_s)
        self._seen[item.trace_id] = _Seen(updated_ns, now + wait, attempts)
