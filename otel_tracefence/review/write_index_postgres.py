"""The write index of ``tracefence serve`` in its PostgreSQL review database (the same URL), shared by every
worker and every replica that uses that database.

The table and its queries: :mod:`otel_tracefence.review.write_index_rows`. One connection of its own
(autocommit; ``synchronous_commit=off``: a server crash may lose the last rows, not a process's kill; each
statement bounded by ``statement_timeout_s`` on the server, connecting by ``connect_timeout_s``), shared by the threads that plan under a lock; a connection that failed is dropped and
the next call connects again. Every failure raises: the index then plans the trace alone
(:class:`~otel_tracefence.pipeline.write_index.StoreWriteIndex`, which waits a few seconds before asking again).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Callable, Sequence

from otel_tracefence.planner.cross_trace import IndexedWrite
from otel_tracefence.review import write_index_rows as rows

_DDL_LOCK = 0x7472616365666E64  # pg_advisory_xact_lock key: one process makes the table at a time


def _key_lock(key: tuple[str, str, str]) -> int:
    """The advisory lock of one index key: a signed 64-bit integer from its SHA-256 (a collision only serializes
    two unrelated meetings)."""
    digest = hashlib.sha256("\x1f".join(key).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresWriteIndex:
    """The writes kept in the PostgreSQL database at ``url`` (a review database: its ``review_items`` is read for resolutions)."""

    def __init__(self, url: str, *, connect_timeout_s: float = 2.0, statement_timeout_s: float = 2.0) -> None:
        import psycopg  # the postgres extra: the review store at this URL was opened already

        self._psycopg = psycopg
        self._url = url
        self._options = {"connect_timeout": max(1, round(connect_timeout_s)), "options": f"-c statement_timeout={int(statement_timeout_s * 1000)} -c synchronous_commit=off"}
        self._lock = threading.Lock()
        self._conn: Any = None
        self._upsert = rows.upsert_sql("%s")
        self._prune = rows.prune_sql("%s")
        with self._lock:
            conn = self._connection()
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
                for statement in rows.ddl('text COLLATE "C"', "bigint"):
                    conn.execute(statement)

    def _connection(self) -> Any:
        # Caller holds the lock.
        if self._conn is None or self._conn.closed:
            self._conn = self._psycopg.connect(self._url, autocommit=True, **self._options)
        return self._conn

    def _run(self, work: Any) -> Any:
        with self._lock:
            try:
                return work(self._connection())
            except self._psycopg.Error:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                raise

    def meet(self, keys: Sequence[tuple[str, str, str]], decide: Callable[[list[IndexedWrite]], Sequence[IndexedWrite]], now_ns: int) -> None:
        """The lookup and the write in one transaction, holding a transaction-level advisory lock per key (taken in
        order, so two meetings never deadlock): another replica's meeting of any of the same keys waits until this one
        commits, and then sees its rows."""
        sql, params = rows.lookup_query(keys, "%s")

        def work(conn: Any) -> None:
            with conn.transaction(), conn.cursor() as cursor:
                with conn.pipeline():  # the locks and the lookup in one round trip; the lookup's snapshot follows the locks
                    for lock in sorted({_key_lock(key) for key in keys}):
                        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
                    found = cursor.execute(sql, params)
                writes = decide([rows.from_row(row) for row in found.fetchall()])
                cursor.executemany(self._upsert, [rows.to_row(w, now_ns) for w in writes])

        self._run(work)

    def prune(self, older_than_ns: int, max_rows: int) -> int:
        expired, cutoff, over = self._prune

        def work(conn: Any) -> int:
            with conn.transaction():
                dropped = conn.execute(expired, (older_than_ns,)).rowcount
                row = conn.execute(cutoff, (max_rows,)).fetchone()
                if row is not None:
                    dropped += conn.execute(over, (row[0],)).rowcount
                return dropped

        return self._run(work)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
