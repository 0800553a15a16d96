"""Review writes batched: the traces a fence hands on together have their review items written in one transaction
(docs/DECISIONS.md, 221), before any of their spans is handed on; a failed write holds each item."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.fence import HAND_ON_TRACES, Fence
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


def traces(count: int) -> list[tuple[Any, Any, bool]]:
    """``count`` traces (a tool span, then its root) as the service's fence takes them: ``(view, item, local root)``."""
    spans = []
    for t in range(count):
        trace_id, root = bytes([1, t + 1]) + bytes(14), bytes([2, t + 1]) + bytes(6)
        spans += [raw_tool_span(trace_id, bytes([3, t + 1]) + bytes(6), "payments.charge", "write", parent=root), raw_span(trace_id, root, "invoke_agent")]
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


def trace_ids(count: int) -> list[str]:
    return [(bytes([1, t + 1]) + bytes(14)).hex() for t in range(count)]


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
    made._retry_stop.set()  # no retry while the test ends


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
