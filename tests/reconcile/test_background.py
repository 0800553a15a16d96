"""``tracefence serve``'s background reconciling (``service.reconcile_interval_s``), pass by pass on a set clock:
which open items are due, the backoff of an undetermined answer, and a store that stops answering."""

from __future__ import annotations

import logging

from otel_tracefence.reconcile import ReconcileResult, Verdict
from otel_tracefence.reconcile.background import ReconcileLoop
from otel_tracefence.review import open_review_store

from test_runner import OTHER, TRACE, held, runner


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_undetermined_item_is_asked_again_after_a_doubling_wait_a_settled_one_never(tmp_path):
    answers = {TRACE: Verdict.UNDETERMINED, OTHER: Verdict.FOUND_TWICE}
    asked: list[str] = []

    def check(request):
        asked.append(request.trace_id)
        return ReconcileResult(answers[request.trace_id], "pending")

    db = str(tmp_path / "review.db")
    with open_review_store(db) as store:
        store.upsert(held(TRACE))
        store.upsert(held(OTHER))
    clock = Clock()
    loop = ReconcileLoop(lambda: open_review_store(db), runner({"invoice.create": check})[0], 10.0, backoff_max_s=40.0, clock=clock)
    passes = []
    for at in (0, 5, 10, 25, 30, 69, 70, 109, 110):
        clock.now = 1000.0 + at
        asked.clear()
        loop.run_once()
        passes.append((at, sorted(asked)))
    assert passes == [
        (0, sorted([TRACE, OTHER])),  # both new; OTHER found twice: waits for a person
        (5, []), (10, [TRACE]),  # undetermined: asked after 10 s, then 20, 40, 40 (the most)
        (25, []), (30, [TRACE]), (69, []), (70, [TRACE]), (109, []), (110, [TRACE]),
    ]  # fmt: skip
    with open_review_store(db) as store:
        assert [e.kind for e in store.history(TRACE)] == ["plan_written", "verdict"]  # the same answer is written once
        store.upsert(held(TRACE, ("call_1", "invoice.create", "inv-9"), ("call_2", "invoice.create", "inv-10")))  # a late span: new plan
    clock.now += 1
    asked.clear()
    loop.run_once()
    assert asked == [TRACE, TRACE]  # a changed plan is due at once
    loop.stop()


def test_a_store_that_stops_answering_is_logged_once_and_asked_again_next_pass(tmp_path, caplog):
    db = tmp_path / "review.db"
    with open_review_store(db) as store:
        store.upsert(held(TRACE))
    opened: list[int] = []

    def open_store():
        opened.append(1)
        if len(opened) in (2, 3):
            raise OSError("disk I/O error")
        return open_review_store(db)

    loop = ReconcileLoop(open_store, runner({"invoice.create": lambda r: ReconcileResult(Verdict.UNDETERMINED, "x")})[0], 1.0, clock=Clock())
    loop._store = None
    with caplog.at_level(logging.INFO, logger="otel_tracefence.reconcile.background"):
        assert [o.action for o in loop.run_once()] == ["kept_open"]
        loop._close()  # the connection dropped: the next passes open it anew, and fail twice
        assert loop.run_once() == [] and loop.run_once() == []
        loop.run_once()
    assert [r.getMessage() for r in caplog.records] == [
        "reconcile loop: the review store cannot be read (OSError: disk I/O error); trying again every 1 s",
        "reconcile loop: the review store answers again",
    ]
    loop.stop()
