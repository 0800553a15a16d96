"""The opt-in persistent queue (``service.persistent_queue_dir``): acknowledged spans on disk until forwarded.

Like the Collector's persistent queue (``file_storage``), but covering the whole
path, from the acknowledgement to the upstream: every request the intake
accepts is written (as an OTLP ``ExportTraceServiceRequest``) to a SQLite
database in the folder before the Export call is acknowledged, and its row is
deleted once every one of its spans has been settled by every forward queue:
sent, or dropped for good (a permanent upstream error, a span too large for the
upstream, past the forward queue's bound), each of those counted as before.

What is neither is still in the file when the process ends, by SIGKILL or by a
SIGTERM whose drain ran out of time, and :meth:`PersistentQueue.replay` hands it
to the intake at the next start. A span forwarded just before a crash whose
row was not deleted yet is sent again: delivery is at least once, as OTLP's is
(the copies are identical, span id for span id).

SQLite from the standard library, in WAL mode with ``synchronous=NORMAL``: a
committed request survives the process being killed (it is in the WAL file);
a power cut may lose the last transactions (``synchronous=FULL`` would fsync
each one, at a cost measured in bench/persistent_queue.py). Rows are deleted in
batches by a background thread.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

from otel_tracefence.service.otlp_bytes import LazyRequest, lazy_spans, span_key

_log = logging.getLogger("otel_tracefence.service")
FILE_NAME = "tracefence-queue.db"
DELETE_EVERY_S = 0.2  # settled rows are deleted in one transaction this often


def _key(span: Any) -> bytes:
    """``trace_id + span_id`` of an encoded span (or of a ``Span`` message)."""
    if isinstance(span, bytes):
        return span_key(span)
    return span.trace_id + span.span_id


class PersistentQueue:
    """Acknowledged requests in ``directory``/``tracefence-queue.db`` (mode 0600; the folder is created 0700) until
    ``targets`` forward queues settled them.

    Raises ``OSError`` or ``sqlite3.Error`` when the folder or the file cannot be opened for writing.
    Thread-safe."""

    def __init__(self, directory: str | Path, targets: int) -> None:
        folder = Path(directory)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = folder / FILE_NAME
        # The spans as received, values and all: readable by this user only (SQLite gives -wal and -shm the same mode).
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        self._targets = targets
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=5.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, spans INTEGER NOT NULL, body BLOB NOT NULL)")
        self._lock = threading.Lock()  # the connection, and the bookkeeping below
        # Per forward queue: span (trace id + span id) -> the row it is in, or the rows, oldest first, when it came
        # more than once (a client's retry). An int, not a list, in the usual case: this is per span in flight.
        self._rows_of: list[dict[bytes, int | list[int]]] = [{} for _ in range(targets)]
        self._remaining: dict[int, int] = {}  # row -> spans x targets not settled yet
        self._settled: list[int] = []  # rows to delete
        self._stop = threading.Event()
        self._deleter = threading.Thread(target=self._run_deleter, name="tracefence-persistent-queue", daemon=True)
        self._deleter.start()

    # -- writing ---------------------------------------------------------------------------
    def append(self, request: Any, spans: Iterable[Any]) -> int:
        """Write ``request`` (an encoded ``ExportTraceServiceRequest``, or a message, full or lazy) whose spans
        are ``spans`` (encoded, or ``Span`` messages) and commit it; returns its row id. Raises ``sqlite3.Error``."""
        body = request if isinstance(request, bytes) else request.SerializeToString()
        spans = list(spans)
        with self._lock:
            row = self._conn.execute("INSERT INTO requests (spans, body) VALUES (?, ?)", (len(spans), body)).lastrowid
            self._track(row, spans)
        return row

    def _track(self, row: int, spans: list[Any]) -> None:
        # Caller holds the lock.
        if not spans:
            self._settled.append(row)
            return
        self._remaining[row] = len(spans) * self._targets
        keys = [_key(span) for span in spans]
        for rows_of in self._rows_of:
            for key in keys:
                known = rows_of.get(key)
                if known is None:
                    rows_of[key] = row
                elif isinstance(known, list):
                    known.append(row)
                else:
                    rows_of[key] = [known, row]

    def settle(self, target: int, spans: Iterable[Any]) -> None:
        """Forward queue ``target`` is done with ``spans`` (sent, or dropped for good)."""
        with self._lock:
            rows_of = self._rows_of[target]
            for span in spans:
                key = _key(span)
                rows = rows_of.get(key)
                if rows is None:
                    continue  # not from the queue (a stand-in), or settled already
                if isinstance(rows, list):
                    row = rows.pop(0)
                    if len(rows) == 1:
                        rows_of[key] = rows[0]
                else:
                    row = rows
                    del rows_of[key]
                left = self._remaining.get(row, 0) - 1
                if left <= 0:
                    self._remaining.pop(row, None)
                    self._settled.append(row)
                else:
                    self._remaining[row] = left

    def _run_deleter(self) -> None:
        while not self._stop.wait(DELETE_EVERY_S):
            self._delete_settled()

    def _delete_settled(self) -> None:
        with self._lock:
            rows, self._settled = self._settled, []
            if not rows:
                return
            try:
                self._conn.execute("BEGIN")
                self._conn.executemany("DELETE FROM requests WHERE id = ?", ((r,) for r in rows))
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                self._settled.extend(rows)  # tried again next time; at worst sent again after a restart
                _log.error("persistent queue: could not delete %d forwarded request(s): %s", len(rows), exc)

    # -- reading back ----------------------------------------------------------------------------
    def replay(self) -> Iterator[tuple[Any, int]]:
        """The requests left by an earlier run, oldest first, each tracked again as not settled: (request, spans),
        the request a :data:`~otel_tracefence.service.otlp_bytes.LazyRequest`."""
        with self._lock:
            rows = self._conn.execute("SELECT id FROM requests ORDER BY id").fetchall()
        for (row,) in rows:
            with self._lock:
                found = self._conn.execute("SELECT body FROM requests WHERE id = ?", (row,)).fetchone()
            if found is None:
                continue
            request = LazyRequest.FromString(found[0])
            spans = lazy_spans(request)
            with self._lock:
                self._track(row, spans)
            yield request, len(spans)

    def pending(self) -> tuple[int, int]:
        """Requests and spans on disk and not settled (after the settled ones are deleted)."""
        self._delete_settled()
        with self._lock:
            requests, spans = self._conn.execute("SELECT count(*), coalesce(sum(spans), 0) FROM requests").fetchone()
        return int(requests), int(spans)

    @staticmethod
    def count(path: str | Path) -> tuple[int, int]:
        """Requests and spans in the queue file at ``path`` (read-only)."""
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            requests, spans = conn.execute("SELECT count(*), coalesce(sum(spans), 0) FROM requests").fetchone()
        finally:
            conn.close()
        return int(requests), int(spans)

    def close(self) -> None:
        """Delete what was settled and close the file (what is left is replayed at the next start)."""
        self._stop.set()
        self._deleter.join(timeout=2)
        self._delete_settled()
        with self._lock:
            self._conn.close()
