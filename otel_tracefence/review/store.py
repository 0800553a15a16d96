"""The embedded review queue: one SQLite file in WAL mode, one row per trace.

Each row holds a ``tracefence.v1.ReviewItem`` (deterministically serialized
protobuf bytes) and the columns lists filter and sort on: ``trace_id`` (primary
key), ``state``, ``replay_class``, ``service_name``, ``updated_ns``.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``. With WAL, a commit
has been written to the ``-wal`` file before :meth:`SQLiteReviewStore.upsert` or
:meth:`SQLiteReviewStore.resolve` returns, so a killed process loses nothing it
was told was stored (``synchronous=NORMAL`` already gives that). ``FULL``
also fsyncs the WAL on every commit, so an acknowledged item survives an OS
crash or power loss too (a node failure, in a cluster). The item is the record
that someone must reconcile a write before anyone retries it, so losing the last
ones silently is the failure worth paying for: the cost is one fsync per stored
or resolved trace (only traces in the review classes, never per span).

WAL needs shared memory between the processes using the file: keep the file on
a local disk (not NFS/SMB). Several processes on one machine (``tracefence
serve`` and the ``tracefence review`` CLI) may share it; writers wait up to
``busy_timeout_s`` for each other.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.model import ReplayClass, TracePlan
from otel_tracefence.schema import REPLAY_CLASS, plan_to_proto

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""The database schema's version, kept in SQLite's ``user_version`` pragma."""
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
"""Largest page :meth:`SQLiteReviewStore.list` returns; larger requests are reduced to it."""

_TOKEN_VERSION = 1

_DDL = (
    """
    CREATE TABLE review_items (
        trace_id     TEXT PRIMARY KEY NOT NULL,
        state        INTEGER NOT NULL,
        replay_class INTEGER NOT NULL,
        service_name TEXT NOT NULL,
        created_ns   INTEGER NOT NULL,
        updated_ns   INTEGER NOT NULL,
        item         BLOB NOT NULL
    ) WITHOUT ROWID
    """,
    "CREATE INDEX review_items_updated ON review_items (updated_ns, trace_id)",
    "CREATE INDEX review_items_state ON review_items (state, updated_ns, trace_id)",
    "CREATE INDEX review_items_class ON review_items (replay_class, updated_ns, trace_id)",
    "CREATE INDEX review_items_service ON review_items (service_name, updated_ns, trace_id)",
)


class ReviewStoreError(Exception):
    """The file cannot be used as a review database (not SQLite, another schema, a newer
    schema version, WAL unavailable), or the store is closed. The message names the file."""


def _strip_raw_values(plan: pb.TracePlan) -> None:
    for decision in plan.steps:
        decision.step.ClearField("arguments_json")
        decision.step.ClearField("result_value")


def _substance(plan: pb.TracePlan) -> tuple[int, builtins.list[pb.StepDecision]]:
    """What a resolution was based on: the class and the steps, raw values aside."""
    copy = pb.TracePlan()
    copy.CopyFrom(plan)
    _strip_raw_values(copy)
    return copy.replay_class, builtins.list(copy.steps)


def _class_value(value: ReplayClass | int) -> int:
    if isinstance(value, ReplayClass):
        return REPLAY_CLASS[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in pb.ReplayClass.values():
        return value
    raise ValueError(f"replay class {value!r} is neither a ReplayClass nor a tracefence.v1.ReplayClass value")


def _step_identity(decision: pb.StepDecision) -> tuple[str, str]:
    return (decision.step.span_id, decision.step.call_id)


def _keep_missing_steps(stored: pb.TracePlan, new: pb.TracePlan) -> None:
    """Carry into ``new`` every step of ``stored`` it lacks, so an update never drops an uncertain write.

    Replay classes are ordered from safest to most restrictive in the schema
    (dynamic=1 ... review=4), so the more restrictive is the larger value.
    """
    present = {_step_identity(d) for d in new.steps}
    missing = [d for d in stored.steps if _step_identity(d) not in present]
    if not missing:
        return
    new.steps.extend(missing)
    new.partial = True
    new.replay_class = max(new.replay_class, stored.replay_class)


class SQLiteReviewStore:
    """The review queue in one SQLite file, keyed by trace id.

    ``path``: the database file; created (with mode 0600: items may hold
    secrets) with its schema when missing, unless ``create`` is false, in which
    case a missing file raises :class:`FileNotFoundError`. A missing parent
    directory raises :class:`FileNotFoundError` too.

    ``store_raw_values``: keep each step's ``arguments_json`` and
    ``result_value``. False (the default) strips them before anything is
    written, whatever the plan holds: hashes only.

    ``busy_timeout_s``: seconds a write waits for another connection's write
    (another process) before :class:`sqlite3.OperationalError` ("database is
    locked").

    ``clock``: current time in nanoseconds since the Unix epoch (default
    :func:`time.time_ns`); for tests.

    ``on_error(kind)``: called when the file was deleted (``review_db_deleted``)
    or replaced by another file (``review_db_replaced``) while open; the service
    counts it in ``tracefence.errors``. Before every read and write the store
    compares the path's ``st_dev``/``st_ino`` with those of the file it opened;
    on a mismatch it logs an error, calls ``on_error``, and reopens the path
    (recreating the file and its schema when it is gone), so later items are
    never written into a file that is no longer there.

    Raises :class:`ReviewStoreError` when the file is not a SQLite database, is
    another application's database, or has a schema version this code does not
    read. Thread-safe: one connection, used under a lock. Use as a context
    manager, or call :meth:`close`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        store_raw_values: bool = False,
        busy_timeout_s: float = 5.0,
        create: bool = True,
        clock: Callable[[], int] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        if busy_timeout_s < 0:
            raise ValueError(f"busy_timeout_s must be >= 0, not {busy_timeout_s!r}")
        self.path = Path(os.fspath(path))
        self.store_raw_values = store_raw_values
        self.on_error: Callable[[str], None] | None = on_error
        self._busy_timeout_s = busy_timeout_s
        self._create = create
        self._clock = clock or time.time_ns
        self._lock = threading.Lock()
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file the connection has open
        if not create and not self.path.exists():
            raise FileNotFoundError(2, "no review database", str(self.path))
        self._open()

    def _open(self) -> None:
        """Open the file at ``self.path`` (creating it, mode 0600, when ``create``) and check or make its schema."""
        if self._create:
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                pass
        uri = self.path.resolve().as_uri() + ("?mode=rwc" if self._create else "?mode=rw")
        self._conn = sqlite3.connect(uri, uri=True, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False)
        try:
            self._init_schema(self._create)
            self._identity = self._file_identity()
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def _check_file(self) -> None:
        """Before using the connection (caller holds the lock): if the file at ``self.path`` is no longer the one
        the connection has open (deleted, or replaced by another file), log it as an error, count it
        (``on_error("review_db_deleted" | "review_db_replaced")``), and open the file now at the path, creating
        it when it is gone, so that no later item goes into a file nobody can see. Raises when that fails (the
        caller's write fails, and the service holds the item and tries again)."""
        if self._conn is not None:
            now = self._file_identity()
            if now is not None and now == self._identity:
                return
            kind = "review_db_deleted" if now is None else "review_db_replaced"
            if now is None:
                logger.error("review database %s was deleted while in use: the items it held are gone with it; recreating it for later items", self.path)
            else:
                logger.error(
                    "review database %s was replaced by another file while in use: the items stored before stay in the old file; "
                    "opening the file now at the path for later items", self.path,
                )
            if self.on_error is not None:
                try:
                    self.on_error(kind)
                except Exception:  # noqa: BLE001 - counting must not stop the write
                    pass
            old, self._conn = self._conn, None
            try:
                # Empty the old file's WAL into it: SQLite does not, on close, for a file that was moved or
                # deleted, and a WAL left at the path would be read as the new file's.
                old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            old.close()
            if now is None:
                for suffix in ("-wal", "-shm"):  # the deleted file's: no database of their own at this path
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{suffix}")
        if self._conn is None:  # reopened here, or after an earlier attempt failed
            self._open()
            logger.error("review database %s reopened; later items are written there", self.path)

    # -- setup -------------------------------------------------------------

    def _init_schema(self, create: bool) -> None:
        conn = self._conn
        assert conn is not None
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise ReviewStoreError(f"{self.path}: SQLite cannot use WAL mode here (journal_mode is {mode})")
            conn.execute("PRAGMA synchronous=FULL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                return
            if version != 0:
                raise ReviewStoreError(f"{self.path}: review database schema version {version}; this otel-tracefence reads version {SCHEMA_VERSION}")
            if not create:
                raise ReviewStoreError(f"{self.path}: not a tracefence review database (no review schema)")
            with conn:  # a write transaction of its own: the caller may hold the lock (a reopen)
                conn.execute("BEGIN IMMEDIATE")
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == SCHEMA_VERSION:
                    return  # another process made it meanwhile
                tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                if version != 0 or tables:
                    raise ReviewStoreError(f"{self.path}: not a tracefence review database (it holds tables {', '.join(sorted(tables))})")
                for statement in _DDL:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.OperationalError:
            raise  # locked, unable to open, ...: the message says which
        except sqlite3.DatabaseError as exc:
            raise ReviewStoreError(f"{self.path}: not a SQLite database ({exc})") from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``: takes the write lock first, so a
        read-modify-write never loses another process's update); commits on exit,
        rolls back on an exception. The caller holds no lock; this takes it."""
        with self._lock:
            conn = self._connection()
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                yield conn

    def _connection(self) -> sqlite3.Connection:
        """The open connection, to the file now at ``self.path`` (caller holds the lock)."""
        if self._closed:
            raise ReviewStoreError(f"{self.path}: the review store is closed")
        self._check_file()
        assert self._conn is not None
        return self._conn

    # -- API ---------------------------------------------------------------

    def upsert(self, plan: TracePlan | pb.TracePlan, *, service_name: str = "") -> pb.ReviewItem:
        """Store the item for ``plan.trace_id``: insert it (state ``OPEN``), or update it.

        ``plan``: a :class:`~otel_tracefence.model.TracePlan` or a
        ``tracefence.v1.TracePlan``. The store does not choose which classes are
        queued; the caller does. Raw values are stripped unless
        ``store_raw_values``.

        An update (a redelivered, late or re-decided trace) replaces the plan,
        but never loses a step: a step of the stored plan that the new plan
        lacks (a late span planned after its trace was forgotten) is kept, the
        plan is flagged partial and its class is the more restrictive of the
        two. It keeps ``created_time`` and sets ``updated_time`` (strictly later than the
        previous one, even on a coarse clock). ``service_name`` replaces the
        stored one only when non-empty. A resolved item stays resolved unless the
        plan's replay class or steps changed (raw values aside): then the
        resolution was made on other evidence, so the item reopens (state
        ``OPEN``; ``resolved_by``, ``resolution_note`` and ``resolved_time``
        cleared, and the reopening logged with who had resolved it).

        Returns the stored item. Raises :class:`ValueError` for a plan with no
        trace id or no tool step (class unspecified), :class:`TypeError` for
        another type, :class:`sqlite3.OperationalError` when the database stays
        locked past ``busy_timeout_s``.
        """
        if isinstance(plan, TracePlan):
            message = plan_to_proto(plan)
        elif isinstance(plan, pb.TracePlan):
            message = pb.TracePlan()
            message.CopyFrom(plan)
        else:
            raise TypeError(f"plan must be a TracePlan, not {type(plan).__name__}")
        if not message.trace_id:
            raise ValueError("the plan has no trace id")
        if message.replay_class == pb.REPLAY_CLASS_UNSPECIFIED:
            raise ValueError(f"trace {message.trace_id}: a plan with no tool step has nothing to review")
        if not self.store_raw_values:
            _strip_raw_values(message)
        with self._transaction() as conn:
            row = conn.execute("SELECT updated_ns, item FROM review_items WHERE trace_id = ?", (message.trace_id,)).fetchone()
            now = self._clock()
            if row is None:
                item = pb.ReviewItem(trace_id=message.trace_id, plan=message, state=pb.REVIEW_STATE_OPEN, service_name=service_name)
                item.created_time.FromNanoseconds(now)
                item.updated_time.FromNanoseconds(now)
                created_ns = updated_ns = now
            else:
                item = pb.ReviewItem.FromString(row[1])
                created_ns = item.created_time.ToNanoseconds()
                updated_ns = max(now, row[0] + 1)
                _keep_missing_steps(item.plan, message)
                changed = _substance(item.plan) != _substance(message)
                item.plan.CopyFrom(message)
                if service_name:
                    item.service_name = service_name
                if item.state == pb.REVIEW_STATE_RESOLVED and changed:
                    logger.info("review item %s reopened: its plan changed after %s resolved it", item.trace_id, item.resolved_by)
                    item.state = pb.REVIEW_STATE_OPEN
                    item.ClearField("resolved_by")
                    item.ClearField("resolution_note")
                    item.ClearField("resolved_time")
                item.updated_time.FromNanoseconds(updated_ns)
            self._write_item(conn, item, created_ns, updated_ns)
        return item

    def get(self, trace_id: str) -> pb.ReviewItem | None:
        """The item for ``trace_id``, or ``None`` when the queue has none."""
        with self._lock:
            row = self._connection().execute("SELECT item FROM review_items WHERE trace_id = ?", (trace_id,)).fetchone()
        return None if row is None else pb.ReviewItem.FromString(row[0])

    def trace_ids_starting(self, prefix: str, *, limit: int = 10) -> builtins.list[str]:
        """Up to ``limit`` trace ids that start with ``prefix``, compared ignoring ASCII letter case, sorted."""
        pattern = prefix.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._lock:
            rows = self._connection().execute(
                "SELECT trace_id FROM review_items WHERE lower(trace_id) LIKE ? ESCAPE '\\' ORDER BY trace_id LIMIT ?", (pattern, limit)
            ).fetchall()
        return [row[0] for row in rows]

    def resolve(self, trace_id: str, *, resolved_by: str, note: str) -> pb.ReviewItem:
        """Mark the item resolved by ``resolved_by`` (a person or system) with ``note``.

        Sets state ``RESOLVED``, ``resolved_by``, ``resolution_note`` and
        ``resolved_time`` (= the new ``updated_time``). Resolving a resolved item
        again replaces those. Returns the stored item. Raises :class:`KeyError`
        for an unknown trace id, :class:`ValueError` when ``resolved_by`` is empty
        or blank.
        """
        if not isinstance(resolved_by, str) or not resolved_by.strip():
            raise ValueError("resolved_by must name who resolved the item")
        if not isinstance(note, str):
            raise TypeError(f"note must be a str, not {type(note).__name__}")
        with self._transaction() as conn:
            row = conn.execute("SELECT updated_ns, item, created_ns FROM review_items WHERE trace_id = ?", (trace_id,)).fetchone()
            if row is None:
                raise KeyError(trace_id)
            item = pb.ReviewItem.FromString(row[1])
            updated_ns = max(self._clock(), row[0] + 1)
            item.state = pb.REVIEW_STATE_RESOLVED
            item.resolved_by = resolved_by
            item.resolution_note = note
            item.resolved_time.FromNanoseconds(updated_ns)
            item.updated_time.FromNanoseconds(updated_ns)
            self._write_item(conn, item, row[2], updated_ns)
        return item

    def list(
        self,
        *,
        state: int | None = None,
        replay_classes: Iterable[ReplayClass | int] = (),
        service_name: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str = "",
    ) -> tuple[builtins.list[pb.ReviewItem], str]:
        """One page of items, most recently updated first (ties: trace id, descending).

        ``state``: a ``tracefence.v1.ReviewState`` value; ``None`` or
        ``REVIEW_STATE_UNSPECIFIED`` for every state. ``replay_classes``:
        :class:`~otel_tracefence.model.ReplayClass` or ``tracefence.v1.ReplayClass``
        values; empty for every class. ``service_name``: ``None`` or ``""`` for
        every service. ``page_size``: at least 1; more than ``MAX_PAGE_SIZE`` is
        reduced to it.

        Returns ``(items, next_page_token)``; the token is ``""`` after the last
        page, and is only valid with the same filters. Pages are keyed on the last
        item's (updated time, trace id), so a pass never repeats an item; an item
        updated during the pass moves to the front and shows in the next pass.

        Raises :class:`ValueError` for an unknown state or class, a page size
        below 1, or a token this store did not issue for these filters.
        """
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, not {page_size}")
        page_size = min(page_size, MAX_PAGE_SIZE)
        where: builtins.list[str] = []
        params: builtins.list[object] = []
        if state not in (None, pb.REVIEW_STATE_UNSPECIFIED):
            if state not in (pb.REVIEW_STATE_OPEN, pb.REVIEW_STATE_RESOLVED):
                raise ValueError(f"state {state!r} is not a tracefence.v1.ReviewState value")
            where.append("state = ?")
            params.append(state)
        else:
            state = None
        classes = sorted({_class_value(c) for c in replay_classes})
        if classes:
            where.append(f"replay_class IN ({', '.join('?' * len(classes))})")
            params.extend(classes)
        service_name = service_name or None
        if service_name is not None:
            where.append("service_name = ?")
            params.append(service_name)
        query_id = hashlib.sha256(json.dumps([state, classes, service_name]).encode()).hexdigest()[:16]
        if page_token:
            after_ns, after_trace = self._decode_token(page_token, query_id)
            where.append("(updated_ns, trace_id) < (?, ?)")
            params.extend((after_ns, after_trace))
        sql = "SELECT updated_ns, trace_id, item FROM review_items"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_ns DESC, trace_id DESC LIMIT ?"
        params.append(page_size + 1)
        with self._lock:
            rows = self._connection().execute(sql, params).fetchall()
        items = [pb.ReviewItem.FromString(row[2]) for row in rows[:page_size]]
        next_token = ""
        if len(rows) > page_size:
            last = rows[page_size - 1]
            next_token = self._encode_token(last[0], last[1], query_id)
        return items, next_token

    def close(self) -> None:
        """Close the connection (idempotent). Later calls raise :class:`ReviewStoreError`."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteReviewStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------

    @staticmethod
    def _write_item(conn: sqlite3.Connection, item: pb.ReviewItem, created_ns: int, updated_ns: int) -> None:
        conn.execute(
            "INSERT INTO review_items (trace_id, state, replay_class, service_name, created_ns, updated_ns, item) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (trace_id) DO UPDATE SET state = excluded.state, replay_class = excluded.replay_class, "
            "service_name = excluded.service_name, updated_ns = excluded.updated_ns, item = excluded.item",
            (item.trace_id, item.state, item.plan.replay_class, item.service_name, created_ns, updated_ns, item.SerializeToString(deterministic=True)),
        )

    @staticmethod
    def _encode_token(updated_ns: int, trace_id: str, query_id: str) -> str:
        raw = json.dumps([_TOKEN_VERSION, updated_ns, trace_id, query_id], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _decode_token(token: str, query_id: str) -> tuple[int, str]:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            version, updated_ns, trace_id, token_query = json.loads(raw)
        except (ValueError, TypeError):
            raise ValueError("page_token is not one this review store issued") from None
        if version != _TOKEN_VERSION or not isinstance(updated_ns, int) or not isinstance(trace_id, str):
            raise ValueError("page_token is not one this review store issued")
        if token_query != query_id:
            raise ValueError("page_token was issued for other filters")
        return updated_ns, trace_id
