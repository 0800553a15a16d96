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

A review item is part of the acknowledgement (issue 30, DECISIONS 510): while a
trace's review item is not durable in the review store (its write failed, it is
held in memory), the trace is *pinned* (:meth:`PersistentQueue.pin`): its spans
settled by the forward queues are not settled here, so the rows holding them stay
on disk; :meth:`PersistentQueue.release`, once the item is written, settles them.
A crash meanwhile replays the trace at the next start, which plans it again and
writes its item then.

A full volume never wedges the queue on its own log (DECISIONS 513): the WAL is
kept small (``wal_autocheckpoint`` of ``AUTOCHECKPOINT_PAGES``, ``journal_size_limit``
of ``JOURNAL_LIMIT_BYTES``), forwarded rows are deleted ``DELETE_BATCH_ROWS`` at a
time without rewriting their bodies (``secure_delete=FAST``), and ``RESERVE_BYTES`` are kept in a reserve file beside the database
(``tracefence-queue.db.reserve``, :class:`~otel_tracefence.review.sqlite_room.SpaceReserve`): when a
deletion fails for want of space, the reserve is given back to the file system,
the deletion and a truncating checkpoint run, and the reserve is made again once
there is room. While the volume has less than ``TIGHT_BYTES`` free (looked at
every ``DELETE_EVERY_S`` and every ``CHECK_ROOM_EVERY_BYTES`` appended), the WAL is
checkpointed and truncated after every append and every round of deletions, and
an append waits (refused, as a full volume refuses it) until a checkpoint that
failed for want of room succeeds: the rows live in the file, where deleted ones
leave pages the next appends reuse, and a checkpoint on a full volume needs no
more room than one request (under the reserve for requests under its size).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

from otel_tracefence.review.sqlite_room import SpaceReserve, free_bytes
from otel_tracefence.service.otlp_bytes import LazyRequest, lazy_spans, span_key

_log = logging.getLogger("otel_tracefence.service")
FILE_NAME = "tracefence-queue.db"
DELETE_EVERY_S = 0.2  # settled rows are deleted this often...
DELETE_BATCH_ROWS = 64  # ...at most this many per transaction: a deletion's WAL frames stay few
AUTOCHECKPOINT_PAGES = 64  # the WAL is checkpointed into the file past this many pages (SQLite default: 1000): under RESERVE_BYTES
JOURNAL_LIMIT_BYTES = 1024 * 1024  # and truncated to this after a checkpoint (SQLite's default: never)
RESERVE_BYTES = 320 * 1024  # given back to the file system when a deletion cannot get space
TIGHT_BYTES = 8 * 1024 * 1024  # below this free on the volume, the WAL is checkpointed and truncated every DELETE_EVERY_S...
TIGHT_AUTOCHECKPOINT_PAGES = 16  # ...and past this many pages (well under RESERVE_BYTES)
CHECK_ROOM_EVERY_BYTES = 256 * 1024  # the room is looked at after this many bytes appended (and every DELETE_EVERY_S)


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
        self._conn.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
        self._conn.execute(f"PRAGMA journal_size_limit={JOURNAL_LIMIT_BYTES}")
        # Freed pages not zeroed through the WAL (this build's default is ON): deleting a row then writes a few
        # b-tree pages, not its whole body again, so the reserve is enough to delete on a full volume.
        self._conn.execute("PRAGMA secure_delete=FAST")
        self._conn.execute("CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, spans INTEGER NOT NULL, body BLOB NOT NULL)")
        self._lock = threading.Lock()  # the connection, and the bookkeeping below
        # Per forward queue: span (trace id + span id) -> the row it is in, or the rows, oldest first, when it came
        # more than once (a client's retry). An int, not a list, in the usual case: this is per span in flight.
        self._rows_of: list[dict[bytes, int | list[int]]] = [{} for _ in range(targets)]
        self._remaining: dict[int, int] = {}  # row -> spans x targets not settled yet
        self._settled: list[int] = []  # rows to delete
        # Traces (16-byte trace id) whose review item is not durable yet -> the (target, span key) settled meanwhile.
        self._pinned: dict[bytes, list[tuple[int, bytes]]] = {}
        self._reserve = SpaceReserve(self.path, RESERVE_BYTES)
        self._reserve.make()
        self._autocheckpoint = AUTOCHECKPOINT_PAGES
        self._tight_now = False
        self._wal_stuck = False  # the last checkpoint failed for want of room: appends wait for one that works
        self._watch_room()
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
            if self._wal_stuck and not self._trim():
                # The last checkpoint found no room: more in the WAL would need more room to move into the file.
                raise sqlite3.OperationalError("database or disk is full (the queue's write-ahead log cannot be checkpointed)")
            try:
                row = self._conn.execute("INSERT INTO requests (spans, body) VALUES (?, ?)", (len(spans), body)).lastrowid
            except sqlite3.Error as exc:
                if _is_full(exc):  # refused now (the intake says UNAVAILABLE); the WAL's space back for the next one
                    self._wal_stuck = not self._trim()
                raise
            self._track(row, spans)
            if self._tight_now:  # into the file at once: the WAL never holds more than one request
                self._wal_stuck = not self._trim()
            self._appended_since_check += len(body)
            if self._appended_since_check >= CHECK_ROOM_EVERY_BYTES:
                self._watch_room()
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

    def pin(self, trace_ids: Iterable[str]) -> None:
        """Keep the spans of ``trace_ids`` (hex) on disk, settled or not, until :meth:`release`: their review item
        is not durable yet. Pinning a pinned trace does nothing. Ids that are not 32 hex digits are ignored."""
        with self._lock:
            for trace_id in trace_ids:
                key = _trace_key(trace_id)
                if key is not None:
                    self._pinned.setdefault(key, [])

    def release(self, trace_ids: Iterable[str]) -> None:
        """The review items of ``trace_ids`` (hex) are durable: their spans settled while pinned are settled now."""
        with self._lock:
            for trace_id in trace_ids:
                key = _trace_key(trace_id)
                waiting = self._pinned.pop(key, None) if key is not None else None
                for target, span_key_ in waiting or ():
                    self._settle_key(target, span_key_)

    def pinned(self) -> int:
        """Traces pinned now (their review item not durable)."""
        with self._lock:
            return len(self._pinned)

    def settle(self, target: int, spans: Iterable[Any]) -> None:
        """Forward queue ``target`` is done with ``spans`` (sent, or dropped for good). The spans of a pinned trace
        are settled only once it is released."""
        with self._lock:
            for span in spans:
                key = _key(span)
                waiting = self._pinned.get(key[:16]) if self._pinned else None
                if waiting is not None:
                    waiting.append((target, key))
                    continue
                self._settle_key(target, key)

    def _settle_key(self, target: int, key: bytes) -> None:
        # Caller holds the lock.
        rows_of = self._rows_of[target]
        rows = rows_of.get(key)
        if rows is None:
            return  # not from the queue (a stand-in), or settled already
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
            with self._lock:
                self._watch_room()

    def _delete_settled(self) -> None:
        with self._lock:
            rows, self._settled = self._settled, []
            if not rows:
                return
            given_back = False  # the reserve, for this round: each batch after it is followed by a checkpoint
            for at in range(0, len(rows), DELETE_BATCH_ROWS):
                batch = rows[at : at + DELETE_BATCH_ROWS]
                try:
                    self._delete(batch)
                except sqlite3.Error as exc:
                    if not _is_full(exc) or given_back or not self._reserve.give_back():
                        self._settled.extend(rows[at:])  # tried again next time; at worst sent again after a restart
                        _log.error("persistent queue: could not delete %d forwarded request(s): %s", len(rows) - at, exc)
                        break
                    given_back = True
                    self._wal_stuck = not self._trim()  # with the reserve's room: the WAL into the file, its space back
                    try:  # then the deletion has room
                        self._delete(batch)
                    except sqlite3.Error as again:
                        self._settled.extend(rows[at:])
                        _log.error("persistent queue: could not delete %d forwarded request(s), even with its reserve freed: %s", len(rows) - at, again)
                        break
                if given_back:  # the WAL's space back before the next batch (never after a failed deletion: ids are reused)
                    self._wal_stuck = not self._trim()
            if given_back:
                _log.warning("persistent queue: the volume is full: used its %d-byte reserve to delete forwarded requests", RESERVE_BYTES)
            self._reserve.make()
            if self._tight():
                self._wal_stuck = not self._trim()

    def _watch_room(self) -> None:
        """Keep the WAL small while the volume is tight (caller holds the lock): checkpointed past
        ``TIGHT_AUTOCHECKPOINT_PAGES`` then, so a checkpoint on a full volume needs no more than the reserve."""
        self._appended_since_check = 0
        self._tight_now = self._tight()
        pages = TIGHT_AUTOCHECKPOINT_PAGES if self._tight_now else AUTOCHECKPOINT_PAGES
        if pages != self._autocheckpoint:
            self._conn.execute(f"PRAGMA wal_autocheckpoint={pages}")
            self._autocheckpoint = pages

    def _tight(self) -> bool:
        try:
            return free_bytes(self.path) < TIGHT_BYTES
        except OSError:
            return False

    def _trim(self) -> bool:
        """Checkpoint the WAL into the file and truncate it (caller holds the lock); whether it did (False, quietly,
        when it could not: no room for the file to grow, another connection reading)."""
        try:
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            return False
        return busy == 0

    def _delete(self, rows: list[int]) -> None:
        # Caller holds the lock. One small transaction; rolled back when it fails.
        try:
            self._conn.execute("BEGIN")
            self._conn.executemany("DELETE FROM requests WHERE id = ?", ((r,) for r in rows))
            self._conn.execute("COMMIT")
        except sqlite3.Error:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

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
            with contextlib.suppress(sqlite3.Error):  # leave no large WAL behind
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.close()


def _trace_key(trace_id: str) -> bytes | None:
    """A hex trace id as the 16 bytes span keys start with; None when it is not one."""
    try:
        key = bytes.fromhex(trace_id)
    except ValueError:
        return None
    return key if len(key) == 16 else None


def _is_full(exc: sqlite3.Error) -> bool:
    """Whether SQLite failed for want of space (``SQLITE_FULL``)."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "full" in str(exc).lower()
