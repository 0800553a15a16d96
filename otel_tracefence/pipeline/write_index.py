"""The write index: the writes a door has planned, so a trace's writes meet those of earlier traces.

Every door keeps one (``tracefence plan`` for the traces of one run, the span processor and each
``tracefence serve`` process for their lifetime), bounded by ``write_index_max_entries`` writes, oldest out
first (counted in :attr:`MemoryWriteIndex.evicted`). :meth:`MemoryWriteIndex.plan_against` applies the
rules across traces (``otel_tracefence/planner/cross_trace.py``) to a trace planned alone and then
remembers its writes. Thread-safe: the processor plans on the SDK's threads.

An index that fails (a bug; later a store that is down) never costs the trace: it is planned as alone and
its plan is returned as it was, the failure counted in :attr:`MemoryWriteIndex.failures` and logged once.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import replace

from otel_tracefence.core.model import ToolStep, TracePlan
from otel_tracefence.planner.cross_trace import IndexedWrite, against_earlier, index_keys, keys_for, writes_of

_log = logging.getLogger(__name__)

DEFAULT_MAX_ENTRIES = 100_000


class MemoryWriteIndex:
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
        self.failures = 0

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
                return planned
            except Exception:  # noqa: BLE001 - the index must never cost a trace its plan
                self.failures += 1
                if self.failures == 1:
                    _log.exception("tracefence: the write index failed; traces are planned alone (retries across traces unchecked)")
                return plan

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
