"""The review queue's history (issue 12): the events each store writes, the SQLite schema 1 -> 2 migration,
the PostgreSQL schema version, concurrent resolutions and upserts (no lost update, no resolution silently
undone), and reconnecting after the PostgreSQL server restarts."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import SCHEMA_VERSION, ReviewEvent, ReviewStoreError, SQLiteReviewStore, open_review_store
from otel_tracefence.review.events import event_from_proto, event_to_proto
from otel_tracefence.review.targets import display_target
from otel_tracefence.review.transitions import apply_upsert, prepare_plan
from test_review_store import CHARGE_OK, CHARGE_TIMEOUT, EMAIL_UNKNOWN, LOOKUP, T0, Clock, _plan, _query, review_plan, static_plan

OPEN, RESOLVED = pb.REVIEW_STATE_OPEN, pb.REVIEW_STATE_RESOLVED
REVIEW, STATIC = pb.REPLAY_CLASS_REVIEW, pb.REPLAY_CLASS_STATIC


def test_each_write_appends_its_events_and_nothing_is_overwritten(target: str):
    clock = Clock()
    with open_review_store(target, clock=clock) as store:
        store.upsert(review_plan("t-1"), service_name="billing")
        clock.now = T0 + 10
        store.upsert(review_plan("t-1"), service_name="billing")  # redelivered: nothing of substance changed
        clock.now = T0 + 20
        store.resolve("t-1", resolved_by="ada", note="charge not in the ledger")
        clock.now = T0 + 30
        again = store.resolve("t-1", resolved_by="bob", note="found it after all: ch_1")
        assert (again.resolved_by, again.resolution_note, again.resolved_time.ToNanoseconds()) == ("bob", "found it after all: ch_1", T0 + 30)
        clock.now = T0 + 40
        store.upsert(review_plan("t-1"), service_name="billing-v2")  # redelivered to a resolved item: stays resolved, no event
        clock.now = T0 + 50
        reopened = store.upsert(_plan("t-1", LOOKUP, CHARGE_TIMEOUT, EMAIL_UNKNOWN), service_name="billing")  # a late span
        assert (reopened.state, reopened.resolved_by) == (OPEN, "")
        clock.now = T0 + 60
        store.upsert(_plan("t-1", LOOKUP, CHARGE_OK, EMAIL_UNKNOWN))  # open item re-decided: an update, no reopening
        history = store.history("t-1")
        assert store.history("t-unknown") == []
    assert history == [
        ReviewEvent("plan_written", T0, "billing", "", OPEN, REVIEW),
        ReviewEvent("resolved", T0 + 20, "ada", "charge not in the ledger", RESOLVED, REVIEW),
        ReviewEvent("resolved", T0 + 30, "bob", "found it after all: ch_1", RESOLVED, REVIEW),
        ReviewEvent("plan_updated", T0 + 50, "billing", "steps added: c3", OPEN, REVIEW),
        ReviewEvent("reopened", T0 + 50, "billing", "the plan changed after bob resolved it: steps added: c3", OPEN, REVIEW),
        ReviewEvent("plan_updated", T0 + 60, "", "steps changed: c2", OPEN, REVIEW),
    ]


def test_a_class_change_reopens_naming_both_classes(target: str):
    with open_review_store(target, clock=Clock()) as store:
        store.upsert(review_plan("t-1"))
        store.resolve("t-1", resolved_by="ada", note="checked")
        store.upsert(static_plan("t-1"))  # the charge turned out ok
        events = store.history("t-1")
    assert [(e.kind, e.note, e.replay_class) for e in events[-2:]] == [
        ("plan_updated", "class review -> static; steps changed: c2", STATIC),
        ("reopened", "the plan changed after ada resolved it: class review -> static; steps changed: c2", STATIC),
    ]


def test_events_travel_through_the_proto_unchanged():
    event = ReviewEvent("reopened", T0 + 7, "billing", "why", OPEN, REVIEW)
    message = event_to_proto(event)
    assert (message.kind, message.time.ToNanoseconds(), message.state) == (pb.REVIEW_EVENT_KIND_REOPENED, T0 + 7, OPEN)
    assert event_from_proto(message) == event
    with pytest.raises(ValueError, match="kind 0"):
        event_from_proto(pb.ReviewEvent())


# -- SQLite: schema 1 -> 2 ---------------------------------------------------------------------

_V1_DDL = (
    "CREATE TABLE review_items (trace_id TEXT PRIMARY KEY NOT NULL, state INTEGER NOT NULL, replay_class INTEGER NOT NULL, "
    "service_name TEXT NOT NULL, created_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL, item BLOB NOT NULL) WITHOUT ROWID",
    "CREATE INDEX review_items_updated ON review_items (updated_ns, trace_id)",
    "CREATE INDEX review_items_state ON review_items (state, updated_ns, trace_id)",
    "CREATE INDEX review_items_class ON review_items (replay_class, updated_ns, trace_id)",
    "CREATE INDEX review_items_service ON review_items (service_name, updated_ns, trace_id)",
)


def _v1_file(path: Path) -> None:
    """A review database as version 1 wrote it: two items, one open, one resolved."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    for statement in _V1_DDL:
        conn.execute(statement)
    for trace, service, created in (("t-open", "billing", T0), ("t-done", "support", T0 + 5)):
        item = apply_upsert(None, 0, prepare_plan(review_plan(trace), store_raw_values=False), service_name=service, now_ns=created).item
        if trace == "t-done":
            item.state = RESOLVED
            item.resolved_by, item.resolution_note = "ada", "sent once"
            item.resolved_time.FromNanoseconds(T0 + 9)
            item.updated_time.FromNanoseconds(T0 + 9)
        conn.execute(
            "INSERT INTO review_items VALUES (?, ?, ?, ?, ?, ?, ?)",
            (trace, item.state, REVIEW, service, created, item.updated_time.ToNanoseconds(), item.SerializeToString(deterministic=True)),
        )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


MIGRATED = "synthesized when the review database was migrated from schema version 1: earlier plan updates are not known"


def test_a_version_1_file_is_migrated_forward_on_open_with_a_synthesized_history(tmp_path: Path):
    db = tmp_path / "v1.db"
    _v1_file(db)
    with SQLiteReviewStore(db, create=False, clock=Clock(T0 + 100)) as store:  # even a reader migrates it
        assert store.history("t-open") == [ReviewEvent("plan_written", T0, "billing", MIGRATED, OPEN, REVIEW)]
        assert store.history("t-done") == [
            ReviewEvent("plan_written", T0 + 5, "support", MIGRATED, OPEN, REVIEW),
            ReviewEvent("resolved", T0 + 9, "ada", "sent once", RESOLVED, REVIEW),
        ]
        assert store.get("t-done").resolution_note == "sent once"  # the items themselves are untouched
        store.resolve("t-open", resolved_by="bob", note="ok")
        assert [e.kind for e in store.history("t-open")] == ["plan_written", "resolved"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    with SQLiteReviewStore(db) as store:  # opened again: not migrated twice
        assert len(store.history("t-done")) == 2


# -- PostgreSQL: the schema version -------------------------------------------------------------


def test_postgres_schema_version_is_created_and_checked(pg_url: str):
    with pytest.raises(ReviewStoreError, match="no review schema"):
        open_review_store(pg_url, create=False)
    open_review_store(pg_url).close()
    assert _query(pg_url, "SELECT version FROM review_schema") == [(4,)]
    open_review_store(pg_url, create=False).close()  # made: a reader opens it
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE review_schema SET version = 99")
    with pytest.raises(ReviewStoreError, match="schema version 99; this otel-tracefence reads version 4"):
        open_review_store(pg_url)


def test_postgres_database_holding_other_tables_of_those_names_is_refused(postgres_server):
    import psycopg

    url = postgres_server.new_database()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE review_items (id integer)")
        with pytest.raises(ReviewStoreError, match="not a tracefence review database"):
            open_review_store(url)
        assert _query(url, "SELECT to_regclass('review_events')") == [(None,)]
    finally:
        postgres_server.drop_database(url)


def test_postgres_store_reconnects_after_the_server_restarts(postgres_server, pg_url: str):
    from otel_tracefence.review.postgres import PostgresReviewStore

    errors: list[str] = []
    with PostgresReviewStore(pg_url, on_error=errors.append, connect_timeout_s=3) as store:  # 3 s: the stopped server's wait
        store.upsert(review_plan("t-1"))
        postgres_server.restart()  # every connection the pool holds is cut
        assert store.get("t-1").state == OPEN  # the pool checks a connection before lending it
        assert store.resolve("t-1", resolved_by="ada", note="after the restart").state == RESOLVED
        postgres_server.stop()
        try:
            with pytest.raises(ReviewStoreError, match="unavailable"):
                store.upsert(review_plan("t-2"))
            assert errors == ["review_db_unavailable"]
        finally:
            postgres_server.start()
        store.upsert(review_plan("t-2"))
        assert [i.trace_id for i in store.list()[0]] == ["t-2", "t-1"]


def test_a_postgres_url_without_psycopg_names_the_install_command():
    script = (
        "import sys; sys.modules['psycopg'] = None\n"  # as if the postgres extra were not installed
        "from otel_tracefence.review import open_review_store, ReviewStoreError\n"
        "try:\n    open_review_store('postgresql://tf:s3cret@db.invalid/queue')\n"
        "except ReviewStoreError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("postgresql://tf:***@db.invalid/queue: a PostgreSQL review database needs psycopg 3 (")
    assert out.stdout.rstrip().endswith("): pip install 'otel-tracefence[postgres]'")
    assert "s3cret" not in out.stdout + out.stderr


def test_display_target_masks_passwords():
    assert display_target("postgresql://tf:s3cret@db:5432/queue?sslmode=require") == "postgresql://tf:***@db:5432/queue?sslmode=require"
    assert display_target("postgres://db/queue?user=tf&password=s3cret") == "postgres://db/queue?user=tf&password=***"
    assert display_target("POSTGRESQL://tf@db/queue") == "postgresql://tf@db/queue"
    assert display_target("reviews/postgresql.db") == "reviews/postgresql.db"


# -- races ----------------------------------------------------------------------------------


def _run_threads(work, count: int) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(n: int) -> None:
        try:
            barrier.wait()
            work(n)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors


def test_concurrent_late_steps_are_all_kept_no_update_is_lost(target: str):
    """Four writers add 10 late steps each to one trace while two reviewers resolve it 10 times each, all at once,
    each with a store of its own (its own connections). Every write reads the item, applies the rules and writes
    it back: an update lost to a race would drop a step (a resolution written from a stale read puts the old plan
    back), or a resolution."""
    stores = [open_review_store(target) for _ in range(6)]
    try:
        stores[0].upsert(_plan("t-race", LOOKUP))

        def work(n: int) -> None:
            for i in range(10):
                if n < 4:
                    step = {**EMAIL_UNKNOWN, "call_id": f"c-{n}-{i}", "start_time": 10 + i}
                    stores[n].upsert(_plan("t-race", LOOKUP, step), service_name=f"replica-{n}")
                else:
                    stores[n].resolve("t-race", resolved_by=f"reviewer-{n}", note=f"check {i}")

        _run_threads(work, 6)
        item = stores[0].get("t-race")
        history = stores[0].history("t-race")
    finally:
        for s in stores:
            s.close()
    assert sorted(d.step.call_id for d in item.plan.steps) == sorted(["c1"] + [f"c-{n}-{i}" for n in range(4) for i in range(10)])
    kinds = [e.kind for e in history]
    assert (kinds[0], kinds.count("plan_updated"), kinds.count("resolved")) == ("plan_written", 40, 20)
    assert kinds.count("reopened") == sum(1 for a, b in zip(kinds, kinds[1:]) if a == "resolved" and b == "plan_updated")
    assert item.state == (RESOLVED if kinds[-1] == "resolved" else OPEN)
    times = [e.time_ns for e in history]
    assert times == sorted(times)  # one writer at a time: each event at or after the one before


def test_concurrent_resolutions_and_redeliveries_never_undo_a_resolution(target: str):
    """Two threads resolve (10 times each) while two others redeliver the unchanged plan (20 times each): every
    resolution is in the history, none is undone, and the item shows the last one."""
    stores = [open_review_store(target) for _ in range(4)]
    try:
        stores[0].upsert(review_plan("t-race"), service_name="billing")

        def work(n: int) -> None:
            for i in range(20 if n >= 2 else 10):
                if n < 2:
                    stores[n].resolve("t-race", resolved_by=f"reviewer-{n}", note=f"check {i}")
                else:
                    stores[n].upsert(review_plan("t-race"), service_name=f"replica-{n}")

        _run_threads(work, 4)
        item = stores[0].get("t-race")
        history = stores[0].history("t-race")
    finally:
        for s in stores:
            s.close()
    resolutions = [e for e in history if e.kind == "resolved"]
    assert [e.kind for e in history] == ["plan_written"] + ["resolved"] * 20
    assert sorted((e.actor, e.note) for e in resolutions) == sorted((f"reviewer-{n}", f"check {i}") for n in range(2) for i in range(10))
    assert item.state == RESOLVED
    assert (item.resolved_by, item.resolution_note, item.resolved_time.ToNanoseconds()) == (resolutions[-1].actor, resolutions[-1].note, resolutions[-1].time_ns)
    assert item.updated_time.ToNanoseconds() >= resolutions[-1].time_ns  # redeliveries after the last resolution (if any) kept it resolved


_PROCESS_WRITER = """
import sys
sys.path.insert(0, {tests!r})
from test_review_store import LOOKUP, EMAIL_UNKNOWN, _plan, review_plan
from otel_tracefence.review import open_review_store
n = int(sys.argv[1])
with open_review_store({url!r}) as store:
    for i in range(15):
        store.upsert(_plan("t-procs", LOOKUP, {{**EMAIL_UNKNOWN, "call_id": f"p-{{n}}-{{i}}", "start_time": 10 + i}}), service_name=f"proc-{{n}}")
        store.resolve("t-procs", resolved_by=f"proc-{{n}}", note=f"{{i}}")
print("done", flush=True)
"""


def test_processes_upserting_and_resolving_one_postgres_item_lose_nothing(pg_url: str):
    with open_review_store(pg_url) as store:
        store.upsert(_plan("t-procs", LOOKUP))
    script = _PROCESS_WRITER.format(tests=str(Path(__file__).parent), url=pg_url)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert (proc.returncode, out) == (0, "done\n"), err
    with open_review_store(pg_url) as store:
        item = store.get("t-procs")
        history = store.history("t-procs")
    assert sorted(d.step.call_id for d in item.plan.steps) == sorted(["c1"] + [f"p-{n}-{i}" for n in range(3) for i in range(15)])
    assert sum(e.kind == "resolved" for e in history) == 45
    assert sum(e.kind == "plan_updated" for e in history) == 45  # each new step is a change of substance
    # Every upsert that added a step to a resolved item reopened it; the last event decides the state.
    assert item.state == (RESOLVED if history[-1].kind == "resolved" else OPEN)
    assert sum(e.kind == "reopened" for e in history) == sum(1 for a, b in zip(history, history[1:]) if a.kind == "resolved" and b.kind == "plan_updated")
