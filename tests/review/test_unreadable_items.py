"""The second fresh-user trial of round 22 (t24), findings 8-10: a stored review item that decodes to no item of its
row, holds an enum value this version does not know, or sits under a state the queue does not know is named
unreadable and skipped (exit 2), never listed as a blank row, crashing, or hidden (DECISIONS 385)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.cli import main
from otel_tracefence.review import SQLiteReviewStore, is_postgres_url, open_review_store
from otel_tracefence.review.store import UnreadableItem
from test_cli_review import _plan as _review_plan

GOOD, BAD = "2c" * 16, "ec" * 16


def _class9() -> bytes:
    item = pb.ReviewItem(trace_id=BAD, state=pb.REVIEW_STATE_OPEN)
    item.plan.trace_id = BAD
    item.plan.replay_class = 9
    return item.SerializeToString()


def _other_plan() -> bytes:
    item = pb.ReviewItem(trace_id=BAD, state=pb.REVIEW_STATE_OPEN)
    item.plan.trace_id = GOOD
    return item.SerializeToString()


# (SQL assignment, its value, why the item is named unreadable)
CASES = [
    pytest.param("item", b"", "its item holds no trace id", id="empty-blob"),
    pytest.param("item", b"\xf8\xff\x03\x01", "its item holds no trace id", id="only-unknown-fields"),
    pytest.param("item", _class9(), "its TracePlan.replay_class holds 9, not a tracefence.v1.ReplayClass value", id="class-9"),
    pytest.param("item", _other_plan(), f"its plan is of trace '{GOOD}'", id="another-trace's-plan"),
    pytest.param("state", 99, "its state column holds 99, not a tracefence.v1.ReviewState value", id="state-99"),
]


def _set(where: str, column: str, value: object) -> None:
    if is_postgres_url(where):
        import psycopg

        with psycopg.connect(where) as conn:
            conn.execute(f"UPDATE review_items SET {column} = %s WHERE trace_id = %s", (value, BAD))
        return
    with sqlite3.connect(where) as conn:
        conn.execute(f"UPDATE review_items SET {column} = ? WHERE trace_id = ?", (value, BAD))


@pytest.mark.parametrize("column, value, why", CASES)
def test_the_cli_names_an_item_that_is_not_its_rows_and_skips_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: object, why: str) -> None:
    # t24 8-10: `review list` showed a row of `-` (empty item), crashed with ValueError (class 9), or left the item
    # out of the default (open) list with exit 0 (state 99); `show` and `tools --db` the same.
    db = tmp_path / "review.db"
    with SQLiteReviewStore(db) as store:
        store.upsert(_review_plan(GOOD))
        store.upsert(_review_plan(BAD))
    _set(str(db), column, value)
    named = f"the review item of trace {BAD} cannot be read ({why})"
    assert main(["review", "--db", str(db), "list"]) == 2
    out, err = capsys.readouterr()
    assert GOOD in out and BAD not in out and "\n-  " not in out
    assert err == f"tracefence review list: {db}: {named}: skipped\n"
    assert main(["review", "--db", str(db), "show", BAD[:4]]) == 2
    assert capsys.readouterr().err == f"tracefence review show: {db}: {named}\n"
    assert main(["tools", "--db", str(db)]) == 2
    assert capsys.readouterr().err == f"tracefence tools: {db}: {named}: skipped\n"


@pytest.mark.parametrize("column, value, why", CASES)
def test_both_stores_read_an_item_through_the_one_reader(target: str, column: str, value: object, why: str) -> None:
    with open_review_store(target) as store:
        store.upsert(_review_plan(GOOD))
        store.upsert(_review_plan(BAD))
    _set(target, column, value)
    with open_review_store(target) as store:
        for state in (None, pb.REVIEW_STATE_OPEN, pb.REVIEW_STATE_RESOLVED):  # an unknown state: under every filter
            skipped: list[UnreadableItem] = []
            items, _ = store.list(state=state, skipped=skipped)
            assert [i.trace_id for i in items] == ([] if state == pb.REVIEW_STATE_RESOLVED else [GOOD])
            listed = state != pb.REVIEW_STATE_RESOLVED or column == "state"
            assert [(e.trace_id, str(e)) for e in skipped] == [(BAD, f"the review item of trace {BAD} cannot be read ({why})")] * listed
        with pytest.raises(UnreadableItem, match=r"\(" + why.replace("(", r"\(").replace(".", r"\.") + r"\)$"):
            store.get(BAD)
