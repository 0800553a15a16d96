"""The write index of ``tracefence serve``: kept in its review database whenever it has one (docs/DECISIONS.md 720).

Every worker of ``serve --workers N`` and every replica sharing one PostgreSQL database opens its own
connection to the same table, so each meets the writes any of them planned. The keeper is opened on first use
and again after a failure to open (a database down at the start): until then the traces are planned alone,
noted ``retries_unchecked`` and counted, as for any failure of the index.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.telemetry import Telemetry
from otel_tracefence.pipeline.write_index import StoreWriteIndex
from otel_tracefence.planner.cross_trace import IndexedWrite
from otel_tracefence.review.open import open_write_index_backend


class _Opened:
    """The database's keeper, opened when first needed (and again after an open failed)."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._backend: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._backend is None:
                self._backend = open_write_index_backend(self._target)
            return self._backend

    def meet(self, keys: Sequence[tuple[str, str, str]], decide: Callable[[list[IndexedWrite]], Sequence[IndexedWrite]], now_ns: int) -> None:
        self._get().meet(keys, decide, now_ns)

    def prune(self, older_than_ns: int, max_rows: int) -> int:
        return self._get().prune(older_than_ns, max_rows)

    def close(self) -> None:
        with self._lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None


def store_write_index(config: TraceFenceConfig, telemetry: Telemetry) -> StoreWriteIndex:
    """The index in ``config.review_db``, bounded by ``write_index_max_entries`` rows and ``write_index_retention``,
    its unchecked traces counted by ``telemetry``."""
    index = StoreWriteIndex(
        _Opened(config.review_db), retention_s=config.write_index_retention.total_seconds(), max_entries=config.write_index_max_entries
    )
    index.on_unchecked = telemetry.count_unchecked
    return index
