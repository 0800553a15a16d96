"""The write index's table in the review database, shared by its SQLite and PostgreSQL keepers.

``tracefence_write_index`` holds one row per write a ``tracefence serve`` planned (``pipeline/write_index.py``,
:class:`~otel_tracefence.pipeline.write_index.StoreWriteIndex`): where it was (trace and call id, start time),
what it was (tool, idempotency key, canonical-arguments SHA-256), how its trace's plan left it (``held``,
``committed``) and when it was recorded (``recorded_ns``, for the retention). It is made by the index when
missing (``CREATE TABLE IF NOT EXISTS``), beside the review store's tables and outside their schema version:
a reader of the review queue never reads it. Whether a held write is resolved is not kept here: a lookup
reads it from its trace's review item (``review_items.state``), so a resolution by anyone who writes that
database (the CLI, the review API, another replica) reaches every index at once (docs/DECISIONS.md 721).

A lookup reads, for each of a trace's keys, the rows of the same tool and idempotency key, and for a key of
arguments only the held rows without a key of the same tool and arguments (the only ones a rule matches on
arguments alone, planner/cross_trace.py), earliest first, at most :data:`LOOKUP_LIMIT` rows.
"""

from __future__ import annotations

from typing import Sequence

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.planner.cross_trace import IndexedWrite

TABLE = "tracefence_write_index"
LOOKUP_LIMIT = 1000
"""The most rows one trace's lookup reads (earliest first)."""


def ddl(text: str, bigint: str) -> tuple[str, ...]:
    """The table and its indexes, with the database's ``text`` type (PostgreSQL: ``text COLLATE "C"``) and 64-bit integer type."""
    return (
        f"""
        CREATE TABLE IF NOT EXISTS {TABLE} (
            trace_id         {text} NOT NULL,
            call_id          {text} NOT NULL,
            tool             {text} NOT NULL,
            idempotency_key  {text},
            arguments_sha256 {text},
            start_ns         {bigint} NOT NULL,
            held             integer NOT NULL,
            committed        integer NOT NULL,
            recorded_ns      {bigint} NOT NULL,
            PRIMARY KEY (trace_id, call_id)
        )
        """,
        f"CREATE INDEX IF NOT EXISTS {TABLE}_key ON {TABLE} (tool, idempotency_key) WHERE idempotency_key IS NOT NULL",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_args ON {TABLE} (tool, arguments_sha256) WHERE idempotency_key IS NULL AND held = 1",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_recorded ON {TABLE} (recorded_ns)",
    )


def lookup_query(keys: Sequence[tuple[str, str, str]], mark: str) -> tuple[str, list[object]]:
    """The lookup's SQL and parameters for ``keys`` (``mark``: the driver's placeholder, ``?`` or ``%s``)."""
    where: list[str] = []
    params: list[object] = []
    for tool, kind, value in keys:
        if kind == "key":
            where.append(f"(w.tool = {mark} AND w.idempotency_key = {mark})")
        else:
            where.append(f"(w.tool = {mark} AND w.arguments_sha256 = {mark} AND w.idempotency_key IS NULL AND w.held = 1)")
        params.extend((tool, value))
    sql = (
        "SELECT w.trace_id, w.call_id, w.tool, w.idempotency_key, w.arguments_sha256, w.start_ns, w.held, w.committed, r.state,"
        f" CASE WHEN r.state = {pb.REVIEW_STATE_RESOLVED} THEN r.item END"
        f" FROM {TABLE} w LEFT JOIN review_items r ON r.trace_id = w.trace_id"
        f" WHERE {' OR '.join(where)} ORDER BY w.start_ns, w.trace_id, w.call_id LIMIT {LOOKUP_LIMIT}"
    )
    return sql, params


def upsert_sql(mark: str) -> str:
    """One write's row: a write of a trace planned again replaces its row."""
    marks = ", ".join([mark] * 9)
    return (
        f"INSERT INTO {TABLE} (trace_id, call_id, tool, idempotency_key, arguments_sha256, start_ns, held, committed, recorded_ns)"
        f" VALUES ({marks}) ON CONFLICT (trace_id, call_id) DO UPDATE SET tool = excluded.tool, idempotency_key = excluded.idempotency_key,"
        " arguments_sha256 = excluded.arguments_sha256, start_ns = excluded.start_ns, held = excluded.held,"
        " committed = excluded.committed, recorded_ns = excluded.recorded_ns"
    )


def prune_sql(mark: str) -> tuple[str, str, str]:
    """The retention's delete, the bound's cut-off (the ``recorded_ns`` of the newest row past it) and its delete."""
    return (
        f"DELETE FROM {TABLE} WHERE recorded_ns < {mark}",
        f"SELECT recorded_ns FROM {TABLE} ORDER BY recorded_ns DESC LIMIT 1 OFFSET {mark}",
        f"DELETE FROM {TABLE} WHERE recorded_ns <= {mark}",
    )


def to_row(write: IndexedWrite, now_ns: int) -> tuple[object, ...]:
    return (
        write.trace_id, write.call_id, write.tool, write.idempotency_key, write.arguments_sha256,
        write.start_time_unix_nano, int(write.held), int(write.committed), now_ns,
    )  # fmt: skip


class UnreadableWriteRow(ValueError):
    """A row of the write index this version cannot read (a column of another type or value)."""


def from_row(row: Sequence[object]) -> IndexedWrite:
    """The write a lookup row holds (its last columns: its trace's review item state, ``None`` without one, and the
    item when it is resolved). A held write counts as resolved only when the item's verdict says the effect is known:
    none given, ``found_once`` or ``absent``; after ``undetermined`` or ``found_twice`` its retries stay held (fail
    closed, DECISIONS 727). Raises :class:`UnreadableWriteRow` naming the row and the column at fault."""
    trace_id, call_id, tool, key, sha, start_ns, held, committed, state, item = row
    for name, value, optional in (("trace_id", trace_id, False), ("call_id", call_id, False), ("tool", tool, False),
                                  ("idempotency_key", key, True), ("arguments_sha256", sha, True)):  # fmt: skip
        if not (isinstance(value, str) or (optional and value is None)):
            raise UnreadableWriteRow(f"write index row {trace_id!r}/{call_id!r}: {name} is {type(value).__name__}, not text")
    for name, value in (("start_ns", start_ns), ("held", held), ("committed", committed)):
        if not isinstance(value, int) or isinstance(value, bool) or (name != "start_ns" and value not in (0, 1)):
            raise UnreadableWriteRow(f"write index row {trace_id}/{call_id}: {name} is {value!r}, not {'an integer' if name == 'start_ns' else '0 or 1'}")
    if state is not None and state not in (pb.REVIEW_STATE_OPEN, pb.REVIEW_STATE_RESOLVED):
        raise UnreadableWriteRow(f"write index row {trace_id}/{call_id}: its review item's state {state!r} is not known")
    resolved = state == pb.REVIEW_STATE_RESOLVED
    if resolved:
        try:
            verdict = pb.ReviewItem.FromString(bytes(item)).verdict  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a DecodeError or no bytes at all: the row is unreadable
            raise UnreadableWriteRow(f"write index row {trace_id}/{call_id}: its review item does not decode") from None
        resolved = verdict in _EFFECT_KNOWN
    return IndexedWrite(
        trace_id=trace_id, call_id=call_id, tool=tool, idempotency_key=key, arguments_sha256=sha,  # type: ignore[arg-type]
        start_time_unix_nano=start_ns, held=bool(held), committed=bool(committed),  # type: ignore[arg-type]
        resolved=resolved,
    )


#: The verdicts of a resolved item that release its write's retries: the effect is known (or no verdict was given).
_EFFECT_KNOWN = frozenset({pb.VERDICT_UNSPECIFIED, pb.VERDICT_FOUND_ONCE, pb.VERDICT_ABSENT})
