"""The write index kept in the review database (review/write_index_sqlite.py, write_index_postgres.py, driven by
pipeline/write_index.py's StoreWriteIndex): resolutions read from the review items, the retention and the row
bound, and an index that is down or holds a row it cannot read (docs/DECISIONS.md 720-729)."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import OK, TIMEOUT, WRITE, ToolStep
from otel_tracefence.pipeline import annotate
from otel_tracefence.pipeline import write_index as write_index_module
from otel_tracefence.pipeline.write_index import StoreWriteIndex
from otel_tracefence.planner import plan_trace
from otel_tracefence.review import open_review_store
from otel_tracefence.review.write_index_sqlite import SQLiteWriteIndex
from otel_tracefence.service.write_index_setup import _Opened
from service_helpers import free_port

SHA_A, SHA_B = "a" * 64, "b" * 64
DAY_NS = 86_400 * 10**9


def _plan(trace: str, *, status=OK, sha: str = SHA_A, at: int = 0):
    step = ToolStep(
        trace_id=trace, call_id="c1", tool="invoice.create", effect=WRITE, status=status, idempotency_key="inv-9",
        arguments_sha256=sha, arguments_json="{}", arguments_unavailable=None, result_recorded=status is OK, start_time_unix_nano=at,
    )  # fmt: skip
    return plan_trace(trace, (step,))


def _decided(plan) -> tuple:
    (d,) = plan.steps
    return d.decision.value, d.reasons, [(r.trace_id, r.reason) for r in d.related_traces]


class Clock:
    def __init__(self) -> None:
        self.now, self.wall = 0.0, 1_000 * DAY_NS

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "review.db"
    with open_review_store(path) as store:
        yield path, store


def _index(path, clock: Clock, **kw) -> StoreWriteIndex:
    return StoreWriteIndex(SQLiteWriteIndex(path), retention_s=7 * 86_400, clock=clock, wall_ns=lambda: clock.wall, **kw)


def test_a_retry_of_a_held_write_is_found_until_its_review_item_is_resolved(db):
    path, store = db
    index = _index(path, Clock())
    t1 = index.plan_against(_plan("t1", status=TIMEOUT))
    store.upsert(t1)
    assert _decided(index.plan_against(_plan("t2", at=10))) == ("review", ("retry_of_held_write",), [("t1", "retry_of_held_write")])
    store.resolve("t1", resolved_by="ada", note="never made")
    # Another process's index on the same file sees the resolution: a later retry names t2 (held, open) only.
    other = _index(path, Clock())
    assert _decided(other.plan_against(_plan("t3", at=20))) == ("review", ("retry_of_held_write",), [("t2", "retry_of_held_write")])
    assert _decided(other.plan_against(_plan("t4", sha=SHA_B, at=30)))[0] == "conflict"


@pytest.mark.parametrize("verdict, released", [("found_once", True), ("absent", True), ("undetermined", False), ("found_twice", False)])
def test_a_resolution_releases_retries_only_when_its_verdict_knows_the_effect(db, verdict, released):
    path, store = db
    index = _index(path, Clock())
    store.upsert(index.plan_against(_plan("t1", status=TIMEOUT)))
    store.resolve("t1", resolved_by="ada", note="asked billing", verdict=verdict)
    # undetermined / found twice: nobody knows the first write took effect once, so its retry stays held (DECISIONS 727).
    retry = _decided(index.plan_against(_plan("t2", at=10)))
    assert retry == (("skip", ("write_committed",), []) if released else ("review", ("retry_of_held_write",), [("t1", "retry_of_held_write")]))


def test_rows_past_the_retention_and_past_the_bound_are_dropped(db):
    path, _ = db
    clock = Clock()
    index = _index(path, clock, max_entries=2, prune_interval_s=0)
    index.plan_against(_plan("t1", status=TIMEOUT))
    clock.wall += 8 * DAY_NS  # t1's row is past the 7 days
    assert _decided(index.plan_against(_plan("t2")))[0] == "review"  # met t1 before the prune
    assert index.pruned == 1
    clock.wall += 1
    index.plan_against(_plan("t3", at=1))
    clock.wall += 1
    index.plan_against(_plan("t4", at=2))
    rows = sqlite3.connect(path).execute("SELECT trace_id FROM tracefence_write_index ORDER BY recorded_ns").fetchall()
    assert rows == [("t3",), ("t4",)] and index.pruned == 2


def test_a_row_it_cannot_read_plans_the_trace_alone_flagged_counted_and_logged_once(db, caplog):
    path, _ = db
    clock = Clock()
    index = _index(path, clock)
    counted: list[int] = []
    index.on_unchecked = lambda: counted.append(1)
    index.plan_against(_plan("t1", status=TIMEOUT))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE tracefence_write_index SET held = 7")
    with caplog.at_level(logging.ERROR, logger=write_index_module.__name__):
        plan = index.plan_against(_plan("t2"))
        again = index.plan_against(_plan("t3"))  # within the retry wait: not asked, unchecked at once
    assert _decided(plan) == _decided(again) == ("skip", ("write_committed", "retries_unchecked"), [])
    assert annotate.trace_attributes(plan)[annotate.TRACE_RETRIES_UNCHECKED] is True
    assert index.failures == 2 and counted == [1, 1]
    assert len(caplog.records) == 1 and "held is 7, not 0 or 1" in caplog.records[0].getMessage()  # one line, no traceback
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE tracefence_write_index SET held = 1")
    clock.now += 10  # past the retry wait: asked again, and it works again
    assert _decided(index.plan_against(_plan("t4")))[1] == ("retry_of_held_write",)
    assert annotate.TRACE_RETRIES_UNCHECKED not in annotate.trace_attributes(index.plan_against(_plan("t5", status=TIMEOUT)))


def test_a_database_that_is_down_plans_every_trace_alone_flagged():
    index = StoreWriteIndex(_Opened(f"postgresql://tracefence@127.0.0.1:{free_port()}/none"), retention_s=60, retry_after_s=0)
    for trace in ("t1", "t2"):
        assert _decided(index.plan_against(_plan(trace, status=TIMEOUT))) == ("review", ("write_timeout", "retries_unchecked"), [])
    assert index.failures == 2


@pytest.mark.parametrize(("value", "seconds"), [("604800", 604_800), ("3600.5", 3600.5), ("7d", 604_800), ("PT12H", 43_200), ("12:00:00", 43_200), ("P7D", 604_800), ("1 day, 12:00:00", 129_600)])
def test_the_retention_is_seconds_or_a_duration_in_the_environment(monkeypatch, value, seconds):
    monkeypatch.setenv("OTEL_TRACEFENCE_WRITE_INDEX_RETENTION", value)
    assert TraceFenceConfig().write_index_retention.total_seconds() == seconds


def test_the_retention_defaults_to_seven_days_and_is_refused_at_zero():
    assert TraceFenceConfig().write_index_retention.total_seconds() == 7 * 86_400
    with pytest.raises(ValueError, match="write_index_retention"):
        TraceFenceConfig(write_index_retention=0)
