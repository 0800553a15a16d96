"""The shared review queue: one PostgreSQL database that every replica of ``tracefence serve``, every
processor, the CLI and the review API read and write (psycopg 3, the ``postgres`` extra).

The tables mirror the SQLite store's schema version 2: ``review_items`` (one row per trace: the
``tracefence.v1.ReviewItem`` as deterministic protobuf bytes, and the columns lists filter and sort
on) and the append-only ``review_events`` (an item's history), plus ``review_schema`` (one row: the
schema version). Trace ids and service names compare bytewise (``COLLATE "C"``), as in SQLite, so
both stores order and page alike.

Concurrency: every upsert and resolution is one transaction that takes the item's row lock
(``SELECT ... FOR UPDATE``; a new item is inserted with ``ON CONFLICT DO NOTHING`` and, when another
writer inserted it first, read again under the lock), applies the shared rules
(:mod:`otel_tracefence.review.transitions`) to what it read and writes the item and its events before it
commits. Two writers of one trace are serialized: no update is lost, and an upsert that races a
resolution either comes first (the resolution is then of the new plan) or sees the resolution and,
for an unchanged plan, keeps it.

Connections: a pool (``psycopg_pool.ConnectionPool``, ``pool_size`` connections at most) that checks a
connection before lending it, so after the server restarts (or a connection is cut) the next call
gets a fresh one. A call that fails on a broken connection raises
:class:`~otel_tracefence.review.store.ReviewStoreError` (the service holds the item and writes it
again later); it is not retried here, since a write whose commit was cut may have been made.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.review import transitions
from otel_tracefence.review.resolving import Resolutions
from otel_tracefence.review.events import ReviewEvent
from otel_tracefence.review.targets import INSTALL_HINT, display_target
from otel_tracefence.review.paging import DEFAULT_PAGE_SIZE, list_query, like_prefix
from otel_tracefence.review.item_reading import ReviewStoreError, UnreadableItem, decode_spans, read_item, read_page
from otel_tracefence.review.sqlite_schema import EVENT_COLUMNS, VERDICT_COLUMNS

try:
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # the postgres extra is not installed
    psycopg = None  # type: ignore[assignment]
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 4
"""The schema's version, in ``review_schema``. It started at 2, the SQLite store's version with the same
tables (items and their history): there never was a PostgreSQL version 1. 3: events carry a verdict and its
evidence (the SQLite store's 3 too); 4: ``review_spans``, what an item keeps of its trace for the item page (the
SQLite store's 4 too)."""
_SCHEMA_LOCK = 0x7472616365666E63  # pg_advisory_xact_lock key: one process makes or migrates the schema at a time

_DDL = (
    "CREATE TABLE review_schema (version integer NOT NULL)",
    """
    CREATE TABLE review_items (
        trace_id     text COLLATE "C" PRIMARY KEY,
        state        integer NOT NULL,
        replay_class integer NOT NULL,
        service_name text COLLATE "C" NOT NULL,
        created_ns   bigint NOT NULL,
        updated_ns   bigint NOT NULL,
        item         bytea NOT NULL
    )
    """,
    "CREATE INDEX review_items_updated ON review_items (updated_ns, trace_id)",
    "CREATE INDEX review_items_state ON review_items (state, updated_ns, trace_id)",
    "CREATE INDEX review_items_class ON review_items (replay_class, updated_ns, trace_id)",
    "CREATE INDEX review_items_service ON review_items (service_name, updated_ns, trace_id)",
    """
    CREATE TABLE review_events (
        id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        trace_id     text COLLATE "C" NOT NULL,
        kind         text NOT NULL,
        time_ns      bigint NOT NULL,
        actor        text NOT NULL,
        note         text NOT NULL,
        state        integer NOT NULL,
        replay_class integer NOT NULL
    )
    """,
    "CREATE INDEX review_events_trace ON review_events (trace_id, id)",
)
_DDL_SPANS = ('CREATE TABLE review_spans (trace_id text COLLATE "C" PRIMARY KEY, spans bytea NOT NULL)',)
_TABLES = ("review_schema", "review_items", "review_events", "review_spans")


def _migrate_2_to_3(conn: Any) -> None:
    for statement in VERDICT_COLUMNS:
        conn.execute(statement)


def _migrate_3_to_4(conn: Any) -> None:
    for statement in _DDL_SPANS:
        conn.execute(statement)


_MIGRATIONS: dict[int, Callable[[Any], None]] = {2: _migrate_2_to_3, 3: _migrate_3_to_4}
"""Schema version N -> the step that brings it to N + 1 (the first version is 2)."""


class PostgresReviewStore(Resolutions):
    """The review queue in a PostgreSQL database, keyed by trace id; the contract of
    :class:`~otel_tracefence.review.store.SQLiteReviewStore`, shared by many processes.

    ``url``: a libpq URL (``postgresql://user:password@host:5432/dbname?sslmode=require``; the other
    libpq parameters and ``PG*`` environment variables apply). ``create``: make the schema when the
    database has none (else :class:`ReviewStoreError`). An older schema version is migrated forward;
    a newer one is refused. ``store_raw_values``, ``clock``: as for the SQLite store.
    ``on_error(kind)``: called with ``review_db_unavailable`` when a call fails because the server
    cannot be reached (the service counts it in ``tracefence.errors``). ``pool_size``: most
    connections held at once. ``connect_timeout_s``: seconds to connect, and to wait for a pooled
    connection.

    Raises :class:`ReviewStoreError` when psycopg is not installed (naming the install command), the
    server cannot be reached or refuses, or the database holds the tables of another schema or a newer
    version. Every later failure of the database is a :class:`ReviewStoreError` too, naming the URL
    (its password masked). Thread-safe. Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        url: str,
        *,
        store_raw_values: bool = False,
        create: bool = True,
        clock: Callable[[], int] | None = None,
        on_error: Callable[[str], None] | None = None,
        pool_size: int = 4,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.target = display_target(url)
        if _IMPORT_ERROR is not None:
            raise ReviewStoreError(f"{self.target}: a PostgreSQL review database needs psycopg 3 ({_IMPORT_ERROR}): {INSTALL_HINT}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        self.store_raw_values = store_raw_values
        self.on_error: Callable[[str], None] | None = on_error
        self._clock = clock or time.time_ns
        self._timeout = connect_timeout_s
        self._closed = False
        self._close_lock = threading.Lock()
        try:
            with psycopg.connect(url, connect_timeout=max(1, round(connect_timeout_s))) as conn:
                self._init_schema(conn, create)
        except psycopg.Error as exc:
            raise ReviewStoreError(f"{self.target}: cannot use the PostgreSQL review database: {_message(exc)}") from None
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            # Autocommit: a read is one statement, no BEGIN/COMMIT round trips; writes open a transaction.
            kwargs={"connect_timeout": max(1, round(connect_timeout_s)), "autocommit": True},
            check=ConnectionPool.check_connection,
            timeout=connect_timeout_s,
            name="tracefence-review",
            open=False,
        )
        self._pool.open(wait=False)

    # -- setup -------------------------------------------------------------

    def _init_schema(self, conn: Any, create: bool) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            present = [t for t in _TABLES if conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0] is not None]
            if "review_schema" in present:
                row = conn.execute("SELECT version FROM review_schema").fetchone()
                version = row[0] if row else 0
                if version == SCHEMA_VERSION:
                    return
                if version not in _MIGRATIONS:
                    raise ReviewStoreError(f"{self.target}: review database schema version {version}; this otel-tracefence reads version {SCHEMA_VERSION}")
                while version != SCHEMA_VERSION:
                    _MIGRATIONS[version](conn)
                    logger.warning("review database %s migrated from schema version %d to %d", self.target, version, version + 1)
                    version += 1
                conn.execute("UPDATE review_schema SET version = %s", (SCHEMA_VERSION,))
                return
            if present:
                raise ReviewStoreError(f"{self.target}: not a tracefence review database (it holds {', '.join(present)} but no review_schema)")
            if not create:
                raise ReviewStoreError(f"{self.target}: not a tracefence review database (no review schema)")
            for statement in _DDL + VERDICT_COLUMNS + _DDL_SPANS:
                conn.execute(statement)
            conn.execute("INSERT INTO review_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
            logger.info("review database %s: schema version %d created", self.target, SCHEMA_VERSION)

    def _connection(self) -> Any:
        if self._closed:
            raise ReviewStoreError(f"{self.target}: the review store is closed")
        return self._pool.connection(timeout=self._timeout)

    def _run(self, work: Callable[[Any], Any], *, write: bool = False) -> Any:
        """``work(conn)``; with ``write``, in one transaction (committed on return, rolled back on an
        exception). A database failure becomes a :class:`ReviewStoreError` naming the URL."""
        try:
            with self._connection() as conn:
                if not write:
                    return work(conn)  # one statement, autocommit
                with conn.transaction():
                    return work(conn)
        except psycopg.OperationalError as exc:  # cannot connect, connection cut, pool timeout
            self._count("review_db_unavailable")
            raise ReviewStoreError(f"{self.target}: the PostgreSQL review database is unavailable: {_message(exc)}") from exc
        except psycopg.Error as exc:
            raise ReviewStoreError(f"{self.target}: {_message(exc)}") from exc

    def _count(self, kind: str) -> None:
        if self.on_error is not None:
            try:
                self.on_error(kind)
            except Exception:  # noqa: BLE001 - counting must not change the outcome
                pass

    # -- API ---------------------------------------------------------------

    def upsert(self, plan: TracePlan | pb.TracePlan, *, service_name: str = "") -> pb.ReviewItem:
        """As :meth:`SQLiteReviewStore.upsert <otel_tracefence.review.store.SQLiteReviewStore.upsert>`,
        under the item's row lock (see the module). Raises :class:`ReviewStoreError` when the database fails."""
        return self.upsert_many([(plan, service_name)])[0]

    keeps_spans = True  # upsert_many takes each item's ReviewSpans (issue 26)

    def upsert_many(
        self, plans: Sequence[tuple[TracePlan | pb.TracePlan, str]], *, spans: Mapping[str, pb.ReviewSpans] | None = None
    ) -> builtins.list[pb.ReviewItem]:
        """:meth:`upsert` each ``(plan, service_name)`` in one transaction (one commit for all of them), with
        each item's ``spans``, as :meth:`SQLiteReviewStore.upsert_many <otel_tracefence.review.store.SQLiteReviewStore.upsert_many>`."""
        messages = [(transitions.prepare_plan(plan, store_raw_values=self.store_raw_values), service_name) for plan, service_name in plans]

        def one(conn: Any, message: pb.TracePlan, service_name: str) -> transitions.Change:
            for _ in range(2):  # the second pass: another writer inserted the item first
                row = conn.execute("SELECT updated_ns, item FROM review_items WHERE trace_id = %s FOR UPDATE", (message.trace_id,)).fetchone()
                if row is not None:
                    change = transitions.apply_upsert(pb.ReviewItem.FromString(row[1]), row[0], message, service_name=service_name, now_ns=self._clock())
                    self._update(conn, change)
                    return change
                change = transitions.apply_upsert(None, 0, message, service_name=service_name, now_ns=self._clock())
                inserted = conn.execute(
                    "INSERT INTO review_items (trace_id, state, replay_class, service_name, created_ns, updated_ns, item) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (trace_id) DO NOTHING",
                    _columns(change),
                ).rowcount
                if inserted == 1:
                    _append_events(conn, change)
                    return change
            raise ReviewStoreError(f"{self.target}: review item {message.trace_id} neither inserted nor found")

        by_trace = {message.trace_id for message, _ in messages}

        def work(conn: Any) -> builtins.list[transitions.Change]:
            # Rows locked in trace id order, so two replicas writing overlapping batches never deadlock.
            by_index = {i: one(conn, *messages[i]) for i in sorted(range(len(messages)), key=lambda i: messages[i][0].trace_id)}
            changes = [by_index[i] for i in range(len(messages))]
            for trace_id, message in sorted((spans or {}).items()):
                if trace_id in by_trace:
                    conn.execute(
                        "INSERT INTO review_spans (trace_id, spans) VALUES (%s, %s) ON CONFLICT (trace_id) DO UPDATE SET spans = excluded.spans",
                        (trace_id, message.SerializeToString(deterministic=True)),
                    )
            transitions.link_earlier(  # then the earlier items, also in trace id order
                changes, lambda trace_id: conn.execute("SELECT updated_ns, item FROM review_items WHERE trace_id = %s FOR UPDATE", (trace_id,)).fetchone(),
                lambda change: self._update(conn, change),
            )  # fmt: skip
            return changes

        changes = self._run(work, write=True)
        for change in changes:
            if any(e.kind == transitions.REOPENED for e in change.events):
                logger.info("review item %s reopened: %s", change.item.trace_id, change.events[-1].note)
        return [change.item for change in changes]

    def get(self, trace_id: str) -> pb.ReviewItem | None:
        """The item for ``trace_id``, or ``None`` when the queue has none."""
        row = self._run(lambda conn: conn.execute("SELECT item, state FROM review_items WHERE trace_id = %s", (trace_id,)).fetchone())
        return None if row is None else read_item(row[0], trace_id, row[1])

    def spans(self, trace_id: str) -> pb.ReviewSpans | None:
        """As :meth:`SQLiteReviewStore.spans <otel_tracefence.review.store.SQLiteReviewStore.spans>`."""
        row = self._run(lambda conn: conn.execute("SELECT spans FROM review_spans WHERE trace_id = %s", (trace_id,)).fetchone())
        return None if row is None else decode_spans(row[0], trace_id)

    def history(self, trace_id: str) -> builtins.list[ReviewEvent]:
        """The item's history, oldest first; ``[]`` when the queue has no item for ``trace_id``."""
        rows = self._run(
            lambda conn: conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM review_events WHERE trace_id = %s ORDER BY id", (trace_id,)
            ).fetchall()
        )
        return [ReviewEvent(*row) for row in rows]

    def trace_ids_starting(self, prefix: str, *, limit: int = 10) -> builtins.list[str]:
        """Up to ``limit`` trace ids that start with ``prefix``, compared ignoring ASCII letter case, sorted."""
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT trace_id FROM review_items WHERE lower(trace_id) LIKE %s ESCAPE '\\' ORDER BY trace_id LIMIT %s", (like_prefix(prefix), limit)
            ).fetchall()
        )
        return [row[0] for row in rows]

    def _change(self, trace_id: str, make: Callable[[pb.ReviewItem, int], transitions.Change]) -> pb.ReviewItem:
        def work(conn: Any) -> transitions.Change:
            row = conn.execute("SELECT updated_ns, item FROM review_items WHERE trace_id = %s FOR UPDATE", (trace_id,)).fetchone()
            if row is None:
                raise KeyError(trace_id)
            change = make(pb.ReviewItem.FromString(row[1]), row[0])
            self._update(conn, change)
            return change

        return self._run(work, write=True).item

    def list(
        self,
        *,
        state: int | None = None,
        replay_classes: Iterable[ReplayClass | int] = (),
        service_name: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str = "",
        skipped: builtins.list[UnreadableItem] | None = None,
        oldest_first: bool = False,
    ) -> tuple[builtins.list[pb.ReviewItem], str]:
        """As :meth:`SQLiteReviewStore.list <otel_tracefence.review.store.SQLiteReviewStore.list>`; the
        page tokens are the same."""
        query = list_query(
            state=state, replay_classes=replay_classes, service_name=service_name, page_size=page_size, page_token=page_token, oldest_first=oldest_first
        )  # fmt: skip
        sql, params = query.statement("%s")
        rows = self._run(lambda conn: conn.execute(sql, params).fetchall())
        return read_page(rows, query.page_size, skipped), query.next_token([(row[0], row[1]) for row in rows])

    def close(self) -> None:
        """Close the pool (idempotent). Later calls raise :class:`ReviewStoreError`."""
        with self._close_lock:
            if not self._closed:
                self._closed = True
                self._pool.close()

    def __enter__(self) -> PostgresReviewStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------

    @staticmethod
    def _update(conn: Any, change: transitions.Change) -> None:
        item = change.item
        conn.execute(
            "UPDATE review_items SET state = %s, replay_class = %s, service_name = %s, updated_ns = %s, item = %s WHERE trace_id = %s",
            (item.state, item.plan.replay_class, item.service_name, change.updated_ns, item.SerializeToString(deterministic=True), item.trace_id),
        )
        _append_events(conn, change)


def _columns(change: transitions.Change) -> tuple[object, ...]:
    item = change.item
    return (item.trace_id, item.state, item.plan.replay_class, item.service_name, change.created_ns, change.updated_ns, item.SerializeToString(deterministic=True))


def _append_events(conn: Any, change: transitions.Change) -> None:
    if change.events:
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO review_events (trace_id, {EVENT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(change.item.trace_id, e.kind, e.time_ns, e.actor, e.note, e.state, e.replay_class, e.verdict, e.evidence) for e in change.events],
            )


def _message(exc: BaseException) -> str:
    """The first line of a psycopg error (libpq's messages run on with hints and context)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
