"""The review store's contract against both stores (a real SQLite file and a real PostgreSQL server), and the
SQLite file's own properties (WAL, mode, dying processes)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.planner import plan_trace
from otel_tracefence.readers.rows import read_rows
from otel_tracefence.review import SCHEMA_VERSION, ReviewStore, ReviewStoreError, SQLiteReviewStore, is_postgres_url, open_review_store
from otel_tracefence.core.schema import plan_to_proto

T0 = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z
SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
# Redaction off: these tests check the store's own stripping of raw values (redaction: tests/core/test_security.py).
RAW = TraceFenceConfig(store_raw_values=True, redaction={"keys": [], "card_numbers": False, "bearer_tokens": False})


def _plan(trace_id: str, *rows: dict) -> TracePlan:
    """Rows (the seed's form) through the real reader and planner, raw values kept in the plan."""
    text = "\n".join(json.dumps({"trace_id": trace_id, **row}) for row in rows)
    read = read_rows(text, "ndjson", RAW)
    assert not read.errors
    return plan_trace(trace_id, read.steps[trace_id])


LOOKUP = {"call_id": "c1", "tool": "customer.lookup", "effect": "read", "status": "ok", "arguments": {"customer": "c-17"}, "result": {"name": "Ada"}}
CHARGE_TIMEOUT = {
    "call_id": "c2",
    "tool": "payments.charge",
    "effect": "write",
    "status": "timeout",
    "idempotency_key": "order-17",
    "arguments": {"amount_cents": 1250, "api_key": SECRET},
    "start_time": 2,
}
CHARGE_OK = {**CHARGE_TIMEOUT, "status": "ok", "result": {"charge": "ch_1", "echo": SECRET}}
EMAIL_UNKNOWN = {"call_id": "c3", "tool": "email.send", "status": "ok", "arguments": {"to": "ops@example.invalid"}, "start_time": 3}


def review_plan(trace_id: str = "4bf92f3577b34da6a3ce929d0e0e4736") -> TracePlan:
    return _plan(trace_id, LOOKUP, CHARGE_TIMEOUT)


def static_plan(trace_id: str) -> TracePlan:
    plan = _plan(trace_id, LOOKUP, {**CHARGE_TIMEOUT, "status": "ok"})
    assert plan.replay_class is ReplayClass.STATIC
    return plan


class Clock:
    """A settable clock in nanoseconds."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _query(target: str, sql: str) -> list[tuple]:
    """Rows of ``sql`` read straight from the database behind ``target`` (a SQLite file or a PostgreSQL URL)."""
    if is_postgres_url(target):
        import psycopg

        with psycopg.connect(target) as conn:
            return [tuple(row) for row in conn.execute(sql).fetchall()]
    with sqlite3.connect(target) as conn:
        return conn.execute(sql).fetchall()


def _rows(target: str) -> list[tuple]:
    return _query(target, "SELECT trace_id, state, replay_class, service_name FROM review_items ORDER BY trace_id")


def _stored_bytes(target: str) -> bytes:
    """Everything the store wrote: the SQLite file with its WAL, or every item and event row in PostgreSQL."""
    if is_postgres_url(target):
        rows = _query(target, "SELECT item FROM review_items") + _query(target, "SELECT trace_id, kind, actor, note FROM review_events")
        return b"".join(bytes(v) if isinstance(v, (bytes, memoryview)) else str(v).encode() for row in rows for v in row)
    db = Path(target)
    return b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "review.db"




def test_upsert_then_get_returns_exact_fields(target: str):
    plan = review_plan()
    with open_review_store(target, clock=Clock()) as store:
        stored = store.upsert(plan, service_name="billing-agent")
        got = store.get(plan.trace_id)
    assert got == stored
    assert got.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert got.state == pb.REVIEW_STATE_OPEN
    assert got.service_name == "billing-agent"
    assert got.created_time.ToNanoseconds() == T0
    assert got.updated_time.ToNanoseconds() == T0
    assert got.created_time.ToJsonString() == "2023-11-14T22:13:20.123456789Z"
    assert not got.HasField("resolved_time") and got.resolved_by == "" and got.resolution_note == ""
    assert got.plan.trace_id == got.trace_id and got.plan.schema_version == "1"
    assert got.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    assert [(d.step.call_id, d.step.tool, d.decision, list(d.reasons)) for d in got.plan.steps] == [
        ("c1", "customer.lookup", pb.DECISION_REPLAY, ["declared_read"]),
        ("c2", "payments.charge", pb.DECISION_REVIEW, ["write_timeout"]),
    ]
    charge = got.plan.steps[1].step
    assert charge.effect == pb.EFFECT_WRITE and charge.status == pb.TOOL_STATUS_TIMEOUT
    assert charge.idempotency_key == "order-17"
    assert charge.arguments_sha256 == plan.steps[1].step.arguments_sha256 and len(charge.arguments_sha256) == 64
    # The whole plan, as the planner made it, minus the raw values only.
    expected = plan_to_proto(plan)
    for d in expected.steps:
        d.step.ClearField("arguments_json")
        d.step.ClearField("result_value")
    assert got.plan == expected
    # The indexed columns agree with the item.
    assert _rows(target) == [("4bf92f3577b34da6a3ce929d0e0e4736", pb.REVIEW_STATE_OPEN, pb.REPLAY_CLASS_REVIEW, "billing-agent")]


def test_get_unknown_trace_is_none(target: str):
    with open_review_store(target) as store:
        assert store.get("0" * 32) is None


def test_reupsert_updates_the_item_never_duplicates_it(target: str):
    clock = Clock()
    with open_review_store(target, clock=clock) as store:
        first = store.upsert(review_plan("t-1"), service_name="billing")
        clock.now = T0 + 5_000
        again = store.upsert(review_plan("t-1"))  # redelivered: same plan, no service name
        clock.now = T0 + 9_000
        late = store.upsert(_plan("t-1", LOOKUP, CHARGE_TIMEOUT, EMAIL_UNKNOWN), service_name="billing-v2")  # late span
        assert store.get("t-1") == late
    assert len(_rows(target)) == 1
    assert first.created_time.ToNanoseconds() == again.created_time.ToNanoseconds() == late.created_time.ToNanoseconds() == T0
    assert (first.updated_time.ToNanoseconds(), again.updated_time.ToNanoseconds(), late.updated_time.ToNanoseconds()) == (T0, T0 + 5_000, T0 + 9_000)
    assert again.service_name == "billing"  # an empty service name keeps the stored one
    assert late.service_name == "billing-v2"
    assert [d.step.call_id for d in late.plan.steps] == ["c1", "c2", "c3"]
    assert late.state == pb.REVIEW_STATE_OPEN


def test_updated_time_moves_even_when_the_clock_does_not(target: str):
    with open_review_store(target, clock=Clock()) as store:
        times = [store.upsert(review_plan("t-1")).updated_time.ToNanoseconds() for _ in range(3)]
        resolved = store.resolve("t-1", resolved_by="ada", note="ok")
    assert times == [T0, T0 + 1, T0 + 2]
    assert resolved.updated_time.ToNanoseconds() == resolved.resolved_time.ToNanoseconds() == T0 + 3


def test_resolve_sets_state_who_note_and_time(target: str):
    clock = Clock()
    with open_review_store(target, clock=clock) as store:
        store.upsert(review_plan("t-1"), service_name="billing")
        clock.now = T0 + 60_000_000_000
        resolved = store.resolve("t-1", resolved_by="ada@example.invalid", note="charge ch_1 found once in the ledger")
    with open_review_store(target) as reopened:
        got = reopened.get("t-1")
    assert got == resolved
    assert got.state == pb.REVIEW_STATE_RESOLVED
    assert got.resolved_by == "ada@example.invalid"
    assert got.resolution_note == "charge ch_1 found once in the ledger"
    assert got.resolved_time.ToNanoseconds() == T0 + 60_000_000_000
    assert got.updated_time.ToNanoseconds() == T0 + 60_000_000_000
    assert got.created_time.ToNanoseconds() == T0
    assert _rows(target) == [("t-1", pb.REVIEW_STATE_RESOLVED, pb.REPLAY_CLASS_REVIEW, "billing")]


def test_resolve_errors(target: str):
    with open_review_store(target, clock=Clock()) as store:
        store.upsert(review_plan("t-1"))
        with pytest.raises(KeyError):
            store.resolve("t-unknown", resolved_by="ada", note="")
        for who in ("", "   "):
            with pytest.raises(ValueError, match="resolved_by"):
                store.resolve("t-1", resolved_by=who, note="x")
        assert store.get("t-1").state == pb.REVIEW_STATE_OPEN
        assert store.get("t-unknown") is None


def test_resolved_item_stays_resolved_for_the_same_plan_and_reopens_for_a_changed_one(target: str):
    with open_review_store(target, clock=Clock(), store_raw_values=True) as raw_store:
        raw_store.upsert(review_plan("t-1"))
        raw_store.resolve("t-1", resolved_by="ada", note="checked the ledger")
    with open_review_store(target, clock=Clock(T0 + 10)) as store:
        # Redelivered (raw values now stripped: not a change of substance).
        same = store.upsert(review_plan("t-1"))
        assert (same.state, same.resolved_by, same.resolution_note) == (pb.REVIEW_STATE_RESOLVED, "ada", "checked the ledger")
        # A late span adds a step of review: same class, other steps.
        changed = store.upsert(_plan("t-1", LOOKUP, CHARGE_TIMEOUT, EMAIL_UNKNOWN))
        assert changed.state == pb.REVIEW_STATE_OPEN
        assert changed.resolved_by == "" and changed.resolution_note == "" and not changed.HasField("resolved_time")
        store.resolve("t-1", resolved_by="bob", note="both checked")
        # The class changes (the charge turned out ok): reopens too.
        reclassed = store.upsert(_plan("t-1", LOOKUP, CHARGE_OK, EMAIL_UNKNOWN))
        assert reclassed.state == pb.REVIEW_STATE_OPEN
        assert store.get("t-1") == reclassed
    assert len(_rows(target)) == 1


def test_list_filters_by_state_class_and_service(target: str):
    clock = Clock()
    with open_review_store(target, clock=clock) as store:
        for i, (trace, plan_of, service) in enumerate(
            [("t-a", review_plan, "billing"), ("t-b", static_plan, "billing"), ("t-c", review_plan, "support"), ("t-d", static_plan, "support")]
        ):
            clock.now = T0 + i
            store.upsert(plan_of(trace), service_name=service)
        clock.now = T0 + 10
        store.resolve("t-c", resolved_by="ada", note="")

        def ids(**filters) -> list[str]:
            items, token = store.list(**filters)
            assert token == ""
            return [i.trace_id for i in items]

        assert ids() == ["t-c", "t-d", "t-b", "t-a"]  # newest updated first
        assert ids(state=pb.REVIEW_STATE_UNSPECIFIED) == ["t-c", "t-d", "t-b", "t-a"]
        assert ids(state=pb.REVIEW_STATE_OPEN) == ["t-d", "t-b", "t-a"]
        assert ids(state=pb.REVIEW_STATE_RESOLVED) == ["t-c"]
        assert ids(replay_classes=[ReplayClass.STATIC]) == ["t-d", "t-b"]
        assert ids(replay_classes=[pb.REPLAY_CLASS_REVIEW]) == ["t-c", "t-a"]
        assert ids(replay_classes=[ReplayClass.REVIEW, ReplayClass.STATIC]) == ["t-c", "t-d", "t-b", "t-a"]
        assert ids(replay_classes=[ReplayClass.DYNAMIC]) == []
        assert ids(service_name="support") == ["t-c", "t-d"]
        assert ids(service_name="") == ["t-c", "t-d", "t-b", "t-a"]
        assert ids(service_name="support", state=pb.REVIEW_STATE_OPEN, replay_classes=[ReplayClass.STATIC]) == ["t-d"]
        assert ids(service_name="nobody") == []
        with pytest.raises(ValueError):
            store.list(state=7)
        with pytest.raises(ValueError):
            store.list(replay_classes=["review"])
        with pytest.raises(ValueError):
            store.list(page_size=0)


def _all_pages(store: ReviewStore, **filters) -> list[list[str]]:
    pages, token = [], ""
    while True:
        items, token = store.list(page_token=token, **filters)
        pages.append([i.trace_id for i in items])
        if not token:
            return pages


def test_list_paginates_newest_first_with_stable_tokens(target: str):
    clock = Clock()
    with open_review_store(target, clock=clock) as store:
        for i in range(7):
            clock.now = T0 + i * 1000
            store.upsert(review_plan(f"t-{i}"))
        assert _all_pages(store, page_size=3) == [["t-6", "t-5", "t-4"], ["t-3", "t-2", "t-1"], ["t-0"]]
        assert _all_pages(store, page_size=7) == [["t-6", "t-5", "t-4", "t-3", "t-2", "t-1", "t-0"]]
        assert _all_pages(store, page_size=2, state=pb.REVIEW_STATE_OPEN) == [["t-6", "t-5"], ["t-4", "t-3"], ["t-2", "t-1"], ["t-0"]]
        # An item updated during a pass moves to the front; the pass neither repeats nor fails.
        first, token = store.list(page_size=3)
        clock.now = T0 + 50_000
        store.upsert(_plan("t-1", LOOKUP, CHARGE_TIMEOUT, EMAIL_UNKNOWN))
        second, token = store.list(page_size=3, page_token=token)
        assert [i.trace_id for i in first] + [i.trace_id for i in second] == ["t-6", "t-5", "t-4", "t-3", "t-2", "t-0"]
        assert token == ""
        assert _all_pages(store, page_size=3)[0] == ["t-1", "t-6", "t-5"]


def test_pagination_with_equal_update_times_orders_by_trace_id(target: str):
    with open_review_store(target, clock=Clock()) as store:
        for trace in ("t-b", "t-e", "t-a", "t-d", "t-c"):
            store.upsert(review_plan(trace))
        assert _all_pages(store, page_size=2) == [["t-e", "t-d"], ["t-c", "t-b"], ["t-a"]]


def test_page_token_is_checked(target: str):
    with open_review_store(target, clock=Clock()) as store:
        for trace in ("t-1", "t-2", "t-3"):
            store.upsert(review_plan(trace))
        _, token = store.list(page_size=1, state=pb.REVIEW_STATE_OPEN)
        assert token
        with pytest.raises(ValueError, match="other filters"):
            store.list(page_size=1, page_token=token)
        for bad in ("not-a-token", "eyJ4Ijox", token[:-3]):
            with pytest.raises(ValueError):
                store.list(page_size=1, state=pb.REVIEW_STATE_OPEN, page_token=bad)
        items, _ = store.list(page_size=10_000)
        assert len(items) == 3


def test_raw_values_are_stripped_by_default(target: str):
    plan = _plan("t-1", LOOKUP, CHARGE_OK)
    assert plan.steps[1].step.arguments_json and SECRET in plan.steps[1].step.arguments_json  # the plan holds them
    with open_review_store(target) as store:
        stored = store.upsert(plan)
        got = store.get("t-1")
        assert stored == got
        for d in got.plan.steps:
            assert d.step.arguments_json == "" and d.step.result_value == ""
            assert len(d.step.arguments_sha256) == 64
        assert got.plan.steps[1].step.result_recorded and len(got.plan.steps[1].step.result_sha256) == 64
        assert SECRET.encode() not in _stored_bytes(target)  # not in the database, nor its WAL
    assert SECRET.encode() not in _stored_bytes(target)


def test_raw_values_are_kept_when_opted_in(target: str):
    plan = _plan("t-1", LOOKUP, CHARGE_OK)
    with open_review_store(target, store_raw_values=True) as store:
        store.upsert(plan)
    with open_review_store(target) as store:
        got = store.get("t-1")
    charge = got.plan.steps[1].step
    assert charge.arguments_json == json.dumps({"amount_cents": 1250, "api_key": SECRET}, separators=(",", ":"), sort_keys=True)
    assert charge.result_value == json.dumps({"charge": "ch_1", "echo": SECRET}, separators=(",", ":"), sort_keys=True)
    assert got.plan.steps[0].step.arguments_json == '{"customer":"c-17"}'


_WRITER = """
import os, sys
sys.path.insert(0, {tests!r})
from test_review_store import review_plan, static_plan
from otel_tracefence.review import SQLiteReviewStore
store = SQLiteReviewStore({db!r})
for i in range(20):
    store.upsert((review_plan if i % 2 else static_plan)(f"t-{{i:02d}}"), service_name="killed")
store.resolve("t-03", resolved_by="ada", note="before the kill")
print("acknowledged", flush=True)
if {mode!r} == "os_exit":
    os._exit(0)  # no close, no atexit, no finalizers
import time
time.sleep(120)  # killed while the store is open
"""


@pytest.mark.parametrize("mode", ["os_exit", "kill"])
def test_acknowledged_items_survive_the_process_dying_without_close(db: Path, mode: str):
    script = _WRITER.format(tests=str(Path(__file__).parent), db=str(db), mode=mode)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "acknowledged\n", proc.stderr.read()
        if mode == "kill":
            proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wal = db.with_name(db.name + "-wal")
    assert wal.stat().st_size > 0  # never checkpointed: the items are read back from the WAL
    with SQLiteReviewStore(db) as store:
        items, token = store.list(page_size=100)
        assert token == ""
        assert sorted(i.trace_id for i in items) == [f"t-{i:02d}" for i in range(20)]
        assert all(i.service_name == "killed" for i in items)
        resolved = store.get("t-03")
        assert (resolved.state, resolved.resolved_by, resolved.resolution_note) == (pb.REVIEW_STATE_RESOLVED, "ada", "before the kill")
        assert store.get("t-02").plan.replay_class == pb.REPLAY_CLASS_STATIC


def test_concurrent_upserts_from_eight_threads(target: str):
    stores = [open_review_store(target), open_review_store(target)]  # two connections: the file lock is exercised too
    plans = {f"t-shared-{k}": review_plan(f"t-shared-{k}") for k in range(5)}
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(n: int) -> None:
        store = stores[n % 2]
        try:
            barrier.wait()
            for i in range(25):
                store.upsert(review_plan(f"t-{n}-{i}"), service_name=f"svc-{n}")
                shared = f"t-shared-{i % 5}"
                store.upsert(plans[shared], service_name=f"svc-{n}")
                assert store.get(shared) is not None
                if i % 10 == 0:
                    store.list(page_size=5)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for store in stores:
        store.close()
    assert not errors, errors
    assert len(_rows(target)) == 8 * 25 + 5
    with open_review_store(target) as store:
        assert len(_all_pages(store, page_size=1000)[0]) == 205
        shared = store.get("t-shared-0")
        assert shared.created_time.ToNanoseconds() < shared.updated_time.ToNanoseconds()


def test_database_file_schema_and_mode(db: Path):
    SQLiteReviewStore(db).close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    if os.name == "posix":
        assert db.stat().st_mode & 0o777 == 0o600


def test_files_that_are_not_review_databases_are_refused(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        SQLiteReviewStore(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    junk = tmp_path / "junk.db"
    junk.write_text("not a database at all, just text that is long enough to have a header" * 3)
    with pytest.raises(ReviewStoreError, match="not a SQLite database"):
        SQLiteReviewStore(junk)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
    with pytest.raises(ReviewStoreError, match="not a tracefence review database"):
        SQLiteReviewStore(other)
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(ReviewStoreError, match="not a tracefence review database"):
        SQLiteReviewStore(empty, create=False)
    assert empty.stat().st_size == 0 and not (tmp_path / "empty.db-wal").exists()  # a reader leaves it as it was
    newer = tmp_path / "newer.db"
    SQLiteReviewStore(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(ReviewStoreError, match="schema version 99"):
        SQLiteReviewStore(newer)


def test_bad_plans_and_closed_store(target: str):
    store = open_review_store(target)
    with pytest.raises(ValueError, match="no tool step"):
        store.upsert(TracePlan(trace_id="t-empty", replay_class=None))
    with pytest.raises(ValueError, match="no trace id"):
        store.upsert(review_plan(""))
    with pytest.raises(TypeError):
        store.upsert({"trace_id": "t-1"})  # type: ignore[arg-type]
    as_proto = plan_to_proto(review_plan("t-proto"))
    assert store.upsert(as_proto).plan.steps[1].step.arguments_json == ""
    assert as_proto.steps[1].step.arguments_json  # the caller's message is not modified
    store.close()
    store.close()
    with pytest.raises(ReviewStoreError, match="closed"):
        store.get("t-proto")


def test_upsert_many_writes_every_item_at_once_keeping_each_ones_steps(target: str):
    """Trial defect 9: a stop writes the review items of thousands of traces it could not plan (their ids only),
    in one transaction per batch; an item that exists keeps its steps. A bad plan stores none of the batch."""
    with open_review_store(target, clock=Clock()) as store:
        store.upsert(review_plan("t-1"), service_name="billing")
        not_planned = [(TracePlan(trace_id=t, replay_class=ReplayClass.REVIEW, steps=(), partial=True), "agent") for t in ("t-1", "t-2")]
        items = store.upsert_many(not_planned)
        assert [(i.trace_id, i.plan.replay_class, i.plan.partial, len(i.plan.steps), i.service_name) for i in items] == [
            ("t-1", pb.REPLAY_CLASS_REVIEW, True, 2, "agent"),
            ("t-2", pb.REPLAY_CLASS_REVIEW, True, 0, "agent"),
        ]
        with pytest.raises(ValueError, match="the plan has no trace id"):
            store.upsert_many([(TracePlan(trace_id="t-3", replay_class=ReplayClass.REVIEW), ""), (TracePlan(trace_id="", replay_class=ReplayClass.REVIEW), "")])
        assert store.get("t-3") is None
    assert [row[0] for row in _rows(target)] == ["t-1", "t-2"]
