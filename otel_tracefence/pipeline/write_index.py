"""The write index: the writes a door has planned, so a trace's writes meet those of earlier traces.

Two kinds, one interface (:class:`WriteIndex`: ``plan_against``, ``failures``, ``on_unchecked``):

* :class:`MemoryWriteIndex`: ``tracefence plan`` for the traces of one run and the span processor for its
  lifetime, bounded by ``write_index_max_entries`` writes, oldest out first (counted in
  :attr:`MemoryWriteIndex.evicted`);
* :class:`StoreWriteIndex`: ``tracefence serve`` with a review store, the writes kept in the review database
  (``otel_tracefence/review/write_index_sqlite.py``, ``write_index_postgres.py``), so every worker and every
  replica sharing the database meets the same writes, and a resolved review item is read as resolved.

``plan_against`` applies the rules across traces (``otel_tracefence/planner/cross_trace.py``) to a trace
planned alone and then remembers its writes. Thread-safe: the processor plans on the SDK's threads.

An index that fails (a bug, a database that is down, a row it cannot read) never costs the trace: it is
planned as alone, each of its writes noted ``retries_unchecked`` (:func:`unchecked`; the door writes
``tracefence.trace.retries_unchecked`` on its spans), the failure counted in ``failures`` and through
``on_unchecked`` (the door's ``tracefence.write_index.unchecked`` counter), logged once per outage.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from typing import Callable, Protocol, Sequence

from otel_tracefence.core import reasons
from otel_tracefence.core.model import ToolStep, TracePlan
from otel_tracefence.planner.cross_trace import IndexedWrite, against_earlier, index_keys, keys_for, writes_of

_log = logging.getLogger(__name__)

DEFAULT_MAX_ENTRIES = 100_000
_UNCHECKED_LOG = "tracefence: the write index failed; traces are planned alone (retries across traces unchecked)"


class WriteIndex(Protocol):
    """What a door's trace buffer asks of its write index."""

    failures: int
    on_unchecked: Callable[[], None] | None

    def plan_against(self, plan: TracePlan, max_related: int = 50) -> TracePlan: ...


def unchecked(plan: TracePlan) -> TracePlan:
    """``plan`` (planned alone) with each of its writes noted :data:`~otel_tracefence.core.reasons.RETRIES_UNCHECKED`:
    the index could not say whether it repeats an earlier trace's write. The decisions stand (a note)."""
    steps = tuple(
        replace(d, reasons=(*d.reasons, reasons.RETRIES_UNCHECKED)) if index_keys(d.step) and reasons.RETRIES_UNCHECKED not in d.reasons else d
        for d in plan.steps
    )
    return replace(plan, steps=steps) if steps != plan.steps else plan


def retries_unchecked(plan: TracePlan) -> bool:
    """Whether a write of ``plan`` is noted :data:`~otel_tracefence.core.reasons.RETRIES_UNCHECKED`."""
    return any(reasons.RETRIES_UNCHECKED in d.reasons for d in plan.steps)


class _Failures:
    """Counting and logging of an index's failures: each counted, logged once per outage (the first failure
    after a success), ``on_unchecked`` told of each trace planned unchecked."""

    failures = 0
    on_unchecked: Callable[[], None] | None = None
    _failing = False

    def _unchecked(self, plan: TracePlan) -> TracePlan:
        self.failures += 1
        if not self._failing:
            self._failing = True
            # One line naming the error (a database down or locked is no bug: no traceback); the traceback at DEBUG.
            _log.error("%s: %r", _UNCHECKED_LOG, sys.exc_info()[1])
            _log.debug("the write index's failure", exc_info=True)
        notify = self.on_unchecked
        if notify is not None:
            try:
                notify()
            except Exception:  # noqa: BLE001 - a metrics callback must not cost the trace
                pass
        return unchecked(plan)

    def _checked(self) -> None:
        if self._failing:
            self._failing = False
            _log.warning("tracefence: the write index works again after %d trace(s) planned unchecked", self.failures)


class MemoryWriteIndex(_Failures):
    """Up to ``max_entries`` writes (each about 0.5 KB with its keys), found by each of
    :func:`~otel_tracefence.planner.cross_trace.index_keys`. ``max_entries`` 0 turns the index off:
    plans pass through unchanged."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, not {max_entries}")
        self.max_entries = max_entries
        self._writes: OrderedDict[tuple[str, str], IndexedWrite] = OrderedDict()  # (trace id, call id) -> write
        self._by_key: dict[tuple[str, str, str], dict[tuple[str, str], IndexedWrite]] = {}
        self._lock = threading.Lock()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._writes)

    def lookup(self, step: ToolStep) -> list[IndexedWrite]:
        """The remembered writes that share a key with ``step`` (each once)."""
        found: dict[tuple[str, str], IndexedWrite] = {}
        for key in index_keys(step):
            found.update(self._by_key.get(key, {}))
        return list(found.values())

    def record(self, plan: TracePlan) -> None:
        """Remember ``plan``'s writes (a trace planned again replaces its earlier entries)."""
        for write in writes_of(plan):
            self._add(write)
        while len(self._writes) > self.max_entries:
            _, oldest = self._writes.popitem(last=False)
            self._unlink(oldest)
            self.evicted += 1

    def resolve(self, trace_id: str) -> None:
        """Mark every write of ``trace_id`` resolved: its review item was closed, a retry of it is no
        retry of a held write any more."""
        with self._lock:
            for (tid, call_id), write in list(self._writes.items()):
                if tid == trace_id and write.held:
                    self._add(replace(write, resolved=True))

    def plan_against(self, plan: TracePlan, max_related: int = 50) -> TracePlan:
        """``plan`` after the rules across traces, its writes remembered. Never raises."""
        if self.max_entries == 0:
            return plan
        with self._lock:
            try:
                planned = against_earlier(plan, self.lookup, max_related)
                self.record(planned)
            except Exception:  # noqa: BLE001 - the index must never cost a trace its plan
                return self._unchecked(plan)
            self._checked()
            return planned

    def _add(self, write: IndexedWrite) -> None:
        ident = (write.trace_id, write.call_id)
        old = self._writes.pop(ident, None)
        if old is not None:
            self._unlink(old)
        self._writes[ident] = write
        for key in _keys_of(write):
            self._by_key.setdefault(key, {})[ident] = write

    def _unlink(self, write: IndexedWrite) -> None:
        ident = (write.trace_id, write.call_id)
        for key in _keys_of(write):
            bucket = self._by_key.get(key)
            if bucket is not None:
                bucket.pop(ident, None)
                if not bucket:
                    del self._by_key[key]


def _keys_of(write: IndexedWrite) -> tuple[tuple[str, str, str], ...]:
    return keys_for(write.tool, write.idempotency_key, write.arguments_sha256)


class IndexBackend(Protocol):
    """Where a :class:`StoreWriteIndex` keeps its writes (``review/write_index_sqlite.py``, ``write_index_postgres.py``).
    Each method raises on any failure (the database down, a row it cannot read): the index then plans alone."""

    def meet(self, keys: Sequence[tuple[str, str, str]], decide: Callable[[list[IndexedWrite]], Sequence[IndexedWrite]], now_ns: int) -> None:
        """Find the writes any of ``keys`` matches (:func:`~otel_tracefence.planner.cross_trace.keys_for`; with
        ``resolved`` read from their trace's review item), then keep what ``decide(found)`` returns (a write of a trace
        planned again replaces its row; recorded at ``now_ns``), as one transaction that
        holds every other meeting of the same keys off until it commits: two traces with one key, planned at the same
        moment by two workers or replicas, meet each other (DECISIONS 818)."""

    def prune(self, older_than_ns: int, max_rows: int) -> int:
        """Drop the rows recorded before ``older_than_ns``, then the oldest past ``max_rows``; the rows dropped."""

    def close(self) -> None: ...


class StoreWriteIndex(_Failures):
    """The write index of ``tracefence serve``, kept by ``backend`` in the review database: one lookup and one
    write per trace with writes (none for a trace without), in one transaction (:meth:`IndexBackend.meet`). Rows older than ``retention_s`` and the oldest past
    ``max_entries`` are dropped at most every ``prune_interval_s`` (so the bound may be passed for that long).
    After a failure the database is not asked again for ``retry_after_s``: those traces are planned unchecked at
    once, not each after a timeout. ``max_entries`` 0 turns the index off."""

    def __init__(
        self,
        backend: IndexBackend,
        *,
        retention_s: float,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        prune_interval_s: float = 10.0,
        retry_after_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.backend = backend
        self.retention_ns = int(retention_s * 1e9)
        self.max_entries = max_entries
        self._prune_every, self._retry_after = prune_interval_s, retry_after_s
        self._clock, self._wall_ns = clock, wall_ns
        self._next_prune = 0.0
        self._down_until = 0.0
        self.pruned = 0

    def plan_against(self, plan: TracePlan, max_related: int = 50) -> TracePlan:
        """``plan`` after the rules across traces, its writes remembered in the database. Never raises."""
        if self.max_entries == 0 or not any(index_keys(d.step) for d in plan.steps):
            return plan
        now = self._clock()
        if now < self._down_until:
            return self._unchecked(plan)
        try:
            keys = list(dict.fromkeys(k for d in plan.steps for k in index_keys(d.step)))
            by_key: dict[tuple[str, str, str], list[IndexedWrite]] = {}

            def lookup(step: ToolStep) -> list[IndexedWrite]:
                seen: dict[tuple[str, str], IndexedWrite] = {}
                for key in index_keys(step):
                    seen.update(((w.trace_id, w.call_id), w) for w in by_key.get(key, ()))
                return list(seen.values())

            wall = self._wall_ns()
            planned = plan

            def decide(found: list[IndexedWrite]) -> Sequence[IndexedWrite]:
                nonlocal planned
                by_key.clear()
                for write in found:
                    for key in _keys_of(write):
                        by_key.setdefault(key, []).append(write)
                planned = against_earlier(plan, lookup, max_related)
                return writes_of(planned)

            self.backend.meet(keys, decide, wall)
            if now >= self._next_prune:
                self._next_prune = now + self._prune_every
                self.pruned += self.backend.prune(wall - self.retention_ns, self.max_entries)
        except Exception:  # noqa: BLE001 - the index must never cost a trace its plan
            self._down_until = now + self._retry_after
            return self._unchecked(plan)
        self._checked()
        return planned

    def close(self) -> None:
        self.backend.close()
