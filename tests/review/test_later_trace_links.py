"""An earlier trace's review item links the later traces whose decisions name its calls (issue 25: "both review
items link each other"), written in the transaction that stores the later one, on a SQLite file and on the real
PostgreSQL server the suite starts."""

from __future__ import annotations

import sqlite3


from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import RelatedTrace, StepDecision, TracePlan
from otel_tracefence.review import open_review_store
from otel_tracefence.review.transitions import MAX_LATER_TRACES

from reconcile.test_runner import held

FIRST, RETRY, REUSED, GONE = "1" * 32, "2" * 32, "3" * 32, "4" * 32




def naming(trace_id: str, call_id: str, reason: str, *earlier: str) -> TracePlan:
    """A held plan of ``trace_id`` whose one write (``call_id``) names call ``call_1`` of each ``earlier`` trace."""
    plan = held(trace_id, (call_id, "invoice.create", "inv-9"))
    read, write = plan.steps
    linked = StepDecision(write.step, write.decision, (reason,), related_traces=tuple(RelatedTrace(t, "call_1", reason) for t in earlier))
    return TracePlan(trace_id, plan.replay_class, (read, linked))


def links(item: pb.ReviewItem) -> list[tuple[str, str, str]]:
    return [(r.trace_id, r.call_id, r.reason) for r in item.later_traces]


def test_the_earlier_item_gains_a_link_per_later_trace_once_its_state_and_history_untouched(target):
    with open_review_store(target) as store:
        first = store.upsert(held(FIRST))
        store.upsert(naming(RETRY, "call_r", "retry_of_held_write", FIRST))
        store.upsert(naming(RETRY, "call_r", "retry_of_held_write", FIRST))  # a redelivery adds nothing
        store.upsert(naming(REUSED, "call_x", "idempotency_key_reused_across_traces", FIRST, RETRY))
        linked = store.get(FIRST)
        both = [(RETRY, "call_r", "retry_of_held_write"), (REUSED, "call_x", "idempotency_key_reused_across_traces")]
        assert links(linked) == both
        assert links(store.get(RETRY)) == [(REUSED, "call_x", "idempotency_key_reused_across_traces")]
        assert (linked.state, linked.updated_time, [e.kind for e in store.history(FIRST)]) == (first.state, first.updated_time, ["plan_written"])
        assert links(store.upsert(held(FIRST))) == both  # the earlier trace redelivered keeps its links


def test_links_in_one_batch_and_an_earlier_trace_without_an_item(target):
    with open_review_store(target) as store:
        first, retry = store.upsert_many([(held(FIRST), "billing"), (naming(RETRY, "call_r", "retry_of_held_write", FIRST, GONE), "billing")])
        assert links(store.get(FIRST)) == [(RETRY, "call_r", "retry_of_held_write")]
        assert store.get(GONE) is None  # a committed write's trace has no item, and none is made for it
        assert store.get(RETRY) == retry


def test_an_earlier_item_that_cannot_be_read_does_not_cost_the_later_trace_its_item(tmp_path):
    db = tmp_path / "review.db"
    with open_review_store(db) as store:
        store.upsert(held(FIRST))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE review_items SET item = ? WHERE trace_id = ?", (b"\xff\xff not protobuf", FIRST))
    with open_review_store(db) as store:
        stored = store.upsert(naming(RETRY, "call_r", "retry_of_held_write", FIRST))
        assert store.get(RETRY) == stored


def test_an_item_keeps_at_most_fifty_later_traces(tmp_path):
    with open_review_store(tmp_path / "review.db") as store:
        store.upsert(held(FIRST))
        for n in range(MAX_LATER_TRACES + 5):
            store.upsert(naming(f"{n + 1:032x}", "call_r", "retry_of_held_write", FIRST))
        kept = links(store.get(FIRST))
    assert (len(kept), kept[0][0], kept[-1][0]) == (50, f"{1:032x}", f"{50:032x}")


def test_review_show_lists_the_later_traces(tmp_path):
    from otel_tracefence.cli.review_tables import render_item

    with open_review_store(tmp_path / "review.db") as store:
        store.upsert(held(FIRST))
        store.upsert(naming(RETRY, "call_r", "retry_of_held_write", FIRST))
        text = render_item(store.get(FIRST))
    assert f"later trace  {RETRY} call_r (retry_of_held_write)\n" in text
