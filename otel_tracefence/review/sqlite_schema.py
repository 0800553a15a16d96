"""The SQLite review database's schema: its tables, its version (``user_version``) and the steps that migrate an
older file forward. Split out of :mod:`otel_tracefence.review.store` (by role, unchanged)."""

from __future__ import annotations

import sqlite3
from typing import Callable, Iterable

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import transitions
from otel_tracefence.review.events import ReviewEvent

SCHEMA_VERSION = 4
"""The database schema's version, kept in SQLite's ``user_version`` pragma. 1: items only; 2: items and
their history (``review_events``); 3: events carry a verdict and its evidence; 4: what an item keeps of its
trace for the item page (``review_spans``, issue 26). An older file is migrated forward when opened."""

DDL_ITEMS = (
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

# Version 2: the append-only history. ``id`` orders an item's events (its writes are serialized).
DDL_EVENTS = (
    """
    CREATE TABLE review_events (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        trace_id     TEXT NOT NULL,
        kind         TEXT NOT NULL,
        time_ns      INTEGER NOT NULL,
        actor        TEXT NOT NULL,
        note         TEXT NOT NULL,
        state        INTEGER NOT NULL,
        replay_class INTEGER NOT NULL
    )
    """,
    "CREATE INDEX review_events_trace ON review_events (trace_id, id)",
)

# Version 3: an event's verdict and its line of evidence (issue 25; "" for none, and for every older event).
VERDICT_COLUMNS = (
    "ALTER TABLE review_events ADD COLUMN verdict TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE review_events ADD COLUMN evidence TEXT NOT NULL DEFAULT ''",
)
EVENT_COLUMNS = "kind, time_ns, actor, note, state, replay_class, verdict, evidence"


def append_events(conn: sqlite3.Connection, trace_id: str, events: Iterable[ReviewEvent]) -> None:
    conn.executemany(
        f"INSERT INTO review_events (trace_id, {EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(trace_id, e.kind, e.time_ns, e.actor, e.note, e.state, e.replay_class, e.verdict, e.evidence) for e in events],
    )


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Version 1 -> 2: the history table, with each item's history synthesized
    (:func:`otel_tracefence.review.transitions.migrated_events`), items in the order they were created."""
    for statement in DDL_EVENTS:
        conn.execute(statement)
    for (blob,) in conn.execute("SELECT item FROM review_items ORDER BY created_ns, trace_id").fetchall():
        item = pb.ReviewItem.FromString(blob)
        conn.executemany(  # version 2's columns: no verdict yet (version 3 adds them)
            "INSERT INTO review_events (trace_id, kind, time_ns, actor, note, state, replay_class) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(item.trace_id, e.kind, e.time_ns, e.actor, e.note, e.state, e.replay_class) for e in transitions.migrated_events(item)],
        )


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Version 2 -> 3: the events' verdict and evidence columns (``""`` for every event before)."""
    for statement in VERDICT_COLUMNS:
        conn.execute(statement)


# Version 4: each item's ReviewSpans (issue 26), beside the item so that a list never reads it. Older items have none.
DDL_SPANS = ("CREATE TABLE review_spans (trace_id TEXT PRIMARY KEY NOT NULL, spans BLOB NOT NULL) WITHOUT ROWID",)


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Version 3 -> 4: the spans table (empty: the items stored before keep no spans)."""
    for statement in DDL_SPANS:
        conn.execute(statement)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4}
"""Schema version N -> the step that brings a file at version N to N + 1 (inside the caller's transaction)."""
