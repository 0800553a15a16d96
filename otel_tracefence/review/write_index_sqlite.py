"""The write index of ``tracefence serve`` in its SQLite review database (the same file, its own connection).

The table and its queries: :mod:`otel_tracefence.review.write_index_rows`. The connection is the index's own
(``synchronous=NORMAL``: a row is in the WAL before the trace is handed on, so a killed process loses none; an
OS crash may lose the last ones, which the review items, ``FULL``, do not), shared by the threads that plan
under a lock. The index is asked on the planning path, so it waits for another writer of the file at most
``busy_timeout_s`` (default :data:`BUSY_TIMEOUT_S`, 0.5 s, a tenth of the review store's): a lock held longer (the
review CLI in a long transaction, a backup) plans the trace alone, flagged ``retries_unchecked``, rather than holding
every trace's spans behind it (DECISIONS 726). Every failure raises: the index then plans the trace alone
(:class:`~otel_tracefence.pipeline.write_index.StoreWriteIndex`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Callable, Sequence

from otel_tracefence.planner.cross_trace import IndexedWrite
from otel_tracefence.review import write_index_rows as rows


#: Seconds the index waits for another writer of the file (SQLite's busy timeout) before it answers "unavailable".
BUSY_TIMEOUT_S = 0.5

class SQLiteWriteIndex:
    """The writes kept in the SQLite file at ``path`` (a review database: its ``review_items`` is read for resolutions)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        uri = self.path.resolve().as_uri() + "?mode=rw"
        self._conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA synchronous=NORMAL")
        with self._lock, self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            for statement in rows.ddl("TEXT", "INTEGER"):
                self._conn.execute(statement)
        self._upsert = rows.upsert_sql("?")
        self._prune = rows.prune_sql("?")

    def meet(self, keys: Sequence[tuple[str, str, str]], decide: Callable[[list[IndexedWrite]], Sequence[IndexedWrite]], now_ns: int) -> None:
        """The lookup and the write under one ``BEGIN IMMEDIATE``: SQLite's write lock keeps every other writer of
        the file (another worker's meeting) waiting, at most its busy timeout, until this one commits."""
        sql, params = rows.lookup_query(keys, "?")
        with self._lock, self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            writes = decide([rows.from_row(row) for row in self._conn.execute(sql, params).fetchall()])
            self._conn.executemany(self._upsert, [rows.to_row(w, now_ns) for w in writes])

    def prune(self, older_than_ns: int, max_rows: int) -> int:
        expired, cutoff, over = self._prune
        with self._lock, self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            dropped = self._conn.execute(expired, (older_than_ns,)).rowcount
            row = self._conn.execute(cutoff, (max_rows,)).fetchone()
            if row is not None:
                dropped += self._conn.execute(over, (row[0],)).rowcount
        return dropped

    def close(self) -> None:
        with self._lock:
            self._conn.close()
