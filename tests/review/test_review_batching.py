"""Review writes batched: the traces a fence hands on together have their review items written in one transaction
(docs/DECISIONS.md, 221), before any of their spans is handed on; a failed write holds each item."""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.fence import HAND_ON_TRACES, Fence
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.service import otlp_spans
from tests.service_helpers import raw_request, raw_span, raw_tool_span

ALL_CLASSES = ["review", "static", "injected", "dynamic"]


class RecordingSink:
    """A review sink recording each call (``("upsert_many", [trace ids])`` or ``("upsert", trace id)``) in ``log``,
    which the fence's ``emit`` shares; ``failing``: every write raises."""

    def __init__(self, log: list, failing: bool = False) -> None:
        self.log, self.failing = log, failing

    def upsert(self, plan: Any, *, service_name: str = "") -> None:
        self.log.append(("upsert", plan.trace_id, service_name))
        if self.failing:
            raise OSError("disk full")

    def upsert_many(self, plans: list) -> None:
        self.log.append(("upsert_many", [plan.trace_id for plan, _ in plans], sorted({name for _, name in plans})))
        if self.failing:
            raise OSError("disk full")

    def close(self) -> None:
        pass


def traces(count: int, first: int = 0, late: bool = False) -> list[tuple[Any, Any, bool]]:
    """``count`` traces (a tool span, then its root), from the ``first``-th, as the service's fence takes them:
    ``(view, item, local root)``; ``late``: one more tool span of each instead (a late step of a decided trace)."""
    spans = []
    for t in range(first, first + count):
        trace_id, root = bytes([1, t + 1]) + bytes(14), bytes([2, t + 1]) + bytes(6)
        tool = raw_tool_span(trace_id, bytes([4 if late else 3, t + 1]) + bytes(6), "payments.charge", "write", parent=root)
        spans += [tool] if late else [tool, raw_span(trace_id, root, "invoke_agent")]
    items, refused = otlp_spans.read_request(otlp_spans.lazy_request(raw_request(*spans, service_name="billing-agent")))
    assert not refused
    views = [otlp_spans.held_view(item, n) for n, item in enumerate(items)]
    return [(view, item, view.parent_span_id is None) for view, item in zip(views, items)]


def fence(sink: RecordingSink, log: list, wait_ms: float = 0.0) -> tuple[Fence, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    made = Fence(
        TraceFenceConfig(review_classes=ALL_CLASSES), emit=lambda items: log.append(("emit", len(items))), annotate_span=otlp_spans.annotate_item,
        service_name=lambda item: item.origin.service_name, component="service", review_sink=sink, meter_provider=MeterProvider(metric_readers=[reader]),
        decision_wait_ms=wait_ms, read_view=otlp_spans.planning_view,
    )  # fmt: skip
    return made, reader


def review_writes(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    counts: dict[str, int] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for point in m.data.data_points if m.name == "tracefence.review.writes" else ():
                    counts[point.attributes["outcome"]] = counts.get(point.attributes["outcome"], 0) + point.value
    return counts


def trace_ids(count: int, first: int = 0) -> list[str]:
    return [(bytes([1, t + 1]) + bytes(14)).hex() for t in range(first, first + count)]


def test_traces_decided_by_one_batch_have_their_review_items_written_in_one_transaction_before_their_spans():
    log: list = []
    made, reader = fence(RecordingSink(log), log)
    made.add_batch(traces(5))
    assert log == [("upsert_many", trace_ids(5), ["billing-agent"])] + [("emit", 2)] * 5
    assert review_writes(reader) == {"ok": 5}


def test_a_failed_batch_write_holds_every_item_and_still_hands_the_spans_on():
    log: list = []
    made, reader = fence(RecordingSink(log, failing=True), log)
    made.add_batch(traces(3))
    assert log == [("upsert_many", trace_ids(3), ["billing-agent"])] + [("emit", 2)] * 3
    assert review_writes(reader) == {"failed": 3}
    assert made.pending_reviews() == 3
    made.reviews.stop_retries()  # no retry while the test ends


@pytest.mark.parametrize("count", [3, HAND_ON_TRACES + 2])
def test_traces_the_timer_or_a_flush_decides_are_written_together_by_up_to_hand_on_traces(count):
    log: list = []
    made, reader = fence(RecordingSink(log), log, wait_ms=60_000)
    made.add_batch(traces(count))
    assert log == []  # waiting for their decision wait
    made.flush()
    first, rest = trace_ids(count)[:HAND_ON_TRACES], trace_ids(count)[HAND_ON_TRACES:]
    expected = [("upsert_many", first, ["billing-agent"])] + [("emit", 2)] * len(first)
    if rest:
        expected += [("upsert_many", rest, ["billing-agent"])] + [("emit", 2)] * len(rest)
    assert log == expected
    assert review_writes(reader) == {"ok": count}
    made.shutdown()


def poisoned_store(path: Any, trace_id: str) -> SQLiteReviewStore:
    """A real SQLite review store whose database refuses the review item of ``trace_id`` alone (a trigger)."""
    store = SQLiteReviewStore(str(path))
    with sqlite3.connect(str(path)) as conn:
        conn.execute(f"CREATE TRIGGER poison BEFORE INSERT ON review_items WHEN NEW.trace_id = '{trace_id}' BEGIN SELECT RAISE(ABORT, 'poison'); END")
    return store


def stored(path: Any) -> set[str]:
    with sqlite3.connect(str(path)) as conn:
        return {row[0] for row in conn.execute("SELECT trace_id FROM review_items")}


def errors(reader: InMemoryMetricReader, kind: str) -> int:
    data = reader.get_metrics_data()
    return sum(
        point.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "tracefence.errors"
        for point in m.data.data_points
        if point.attributes["error.type"] == kind
    )


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refuses" in r.getMessage()]


def test_an_item_the_database_refuses_alone_is_set_aside_and_the_items_behind_it_are_written(tmp_path, caplog):
    """DECISIONS 290: a trigger refuses one trace's item; its batch fails, the retry writes the others item by item,
    sets the refused one aside (logged once with its trace id and the error), and later items are written at once."""
    caplog.set_level(logging.WARNING, logger="otel_tracefence")
    ids = trace_ids(5)
    poison = ids[2]
    log: list = []
    made, reader = fence(poisoned_store(tmp_path / "review.db", poison), log)  # type: ignore[arg-type]
    made.reviews.stop_retries()  # no retry thread: the flushes below are the retries
    made.add_batch(traces(5))
    assert stored(tmp_path / "review.db") == set()  # the one transaction failed whole
    assert review_writes(reader) == {"failed": 5}
    made.flush()  # one retry pass, one write per item
    assert stored(tmp_path / "review.db") == set(ids) - {poison}
    assert made.pending_reviews() == 1
    assert refusals(caplog) == [
        (
            f"tracefence service: the review queue refuses 1 item(s) while it takes others: trace {poison}: IntegrityError('poison'); "
            "kept held and tried again on every retry (at most 5 s apart), lost at stop if still refused"
        )
    ]
    assert errors(reader, "review_refused") == 1
    log.clear()
    made.add_batch(traces(1, first=2, late=True) + traces(5, first=5))  # a late step of the refused trace, and new traces
    # The new items are not queued behind the refused one, nor written in a transaction with it: written at once.
    assert log == [("emit", 2)] * 5 + [("emit", 1)] and stored(tmp_path / "review.db") == set(trace_ids(10)) - {poison}
    made.flush()  # refused again: still held, not logged again
    assert len(refusals(caplog)) == 1 and errors(reader, "review_refused") == 1
    assert review_writes(reader) == {"failed": 5, "ok": 9}
    made.shutdown()
    assert [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()] == [
        f"tracefence service: shutdown: 1 review item(s) could not be written and are lost: traces {poison}"
    ]
    assert review_writes(reader) == {"failed": 5, "ok": 9, "dropped": 1}


def test_the_retry_thread_writes_the_items_behind_a_refused_one(tmp_path):
    """The same through the fence's own retry thread (its first pause 0.5 s), not a flush."""
    ids = trace_ids(5)
    made, _ = fence(poisoned_store(tmp_path / "review.db", ids[0]), [])  # type: ignore[arg-type]
    made.add_batch(traces(5))
    deadline = time.monotonic() + 10
    while stored(tmp_path / "review.db") != set(ids[1:]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stored(tmp_path / "review.db") == set(ids[1:])
    assert made.pending_reviews() == 1
    made.reviews.stop_retries()
    made.shutdown()


def test_a_retry_pass_against_a_failing_sink_ends_at_its_second_failure(caplog):
    """A sink refusing every write (down, not one item): a pass costs two attempts, whatever is held, and sets
    nothing aside."""
    log: list = []
    made, reader = fence(RecordingSink(log, failing=True), log)
    made.reviews.stop_retries()
    made.add_batch(traces(4))
    log.clear()
    made.flush()
    assert log == [("upsert", trace_ids(4)[0], "billing-agent"), ("upsert", trace_ids(4)[1], "billing-agent")]
    assert made.pending_reviews() == 4 and errors(reader, "review_refused") == 0 and refusals(caplog) == []
    log.clear()
    made.flush()  # the next pass starts with the items not tried yet
    assert log == [("upsert", trace_ids(4)[2], "billing-agent"), ("upsert", trace_ids(4)[3], "billing-agent")]


def test_traces_handed_on_unplanned_at_a_stop_lose_only_the_item_the_database_refuses(tmp_path, caplog):
    """DECISIONS 290, at a stop's deadline (the fail-closed hand-on of 195): the failed transaction is written again
    one item at a time, so only the refused item is lost, logged by trace id."""
    caplog.set_level(logging.WARNING, logger="otel_tracefence")
    ids = trace_ids(5)
    made, reader = fence(poisoned_store(tmp_path / "review.db", ids[1]), [])  # type: ignore[arg-type]
    unplanned: dict[str, list] = {}
    for view, item, _ in traces(5):
        unplanned.setdefault(view.trace_id, []).append((view, item))
    made.hand_on_unplanned(unplanned, reasons.NOT_PLANNED_AT_SHUTDOWN, until=time.monotonic() + 30)
    assert stored(tmp_path / "review.db") == set(ids) - {ids[1]}
    assert review_writes(reader) == {"ok": 4, "dropped": 1}
    assert [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()] == [
        (
            "tracefence service: 1 review item(s) of traces handed on without a plan (not_planned_at_shutdown) were not written "
            f"(in time, or refused) and are lost; their spans went on as review: traces {ids[1]}"
        )
    ]
    made.shutdown()
