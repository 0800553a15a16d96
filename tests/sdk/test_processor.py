"""TraceFenceSpanProcessor with real parts: a real TracerProvider, real downstream processors and
exporters, a real SQLite review store, a real MeterProvider, and pydantic-ai's own spans.

Exact ``tracefence.*`` attributes on what reaches the downstream exporter (DESIGN.md,
"Annotations written on export"), exact review items in the SQLite file ("Review queue"),
one replay class per trace ("Replay class").
"""

from __future__ import annotations

import asyncio
import sqlite3
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_tracefence.core.telemetry import COMPONENT_TYPES
from otel_tracefence.pipeline import trace_buffer as buffer_module
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.pipeline.annotate import SCHEMA_VERSION
from otel_tracefence.agent.instrument import declare, tool_call
from otel_tracefence.review.store import ReviewStoreError, SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.sdk import span_fence as fence_module

SERVICE = "test-agent"
TF = "tracefence."
# The producer's own labels (inputs, written by tool_call / declare), apart from what the fence writes.
PRODUCER_LABELS = ("tracefence.effect", "tracefence.status", "tracefence.idempotency_key")


# --- helpers ---------------------------------------------------------------------------------


class Fenced:
    """A TracerProvider whose only processor is a TraceFenceSpanProcessor over ``downstream``."""

    def __init__(self, tmp_path: Path, *, downstream: tuple[SpanProcessor, ...] | None = None, store: Any = "default", meter_provider=None, **settings):
        self.exporter = InMemorySpanExporter()
        self.db = tmp_path / "review.db"
        self.store = SQLiteReviewStore(self.db) if store == "default" else store
        self.downstream = downstream if downstream is not None else (SimpleSpanProcessor(self.exporter),)
        self.processor = TraceFenceSpanProcessor(*self.downstream, review_sink=self.store, meter_provider=meter_provider, **settings)
        self.provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("tests.agent")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def by_name(self) -> dict[str, ReadableSpan]:
        spans = self.spans()
        named = {span.name: span for span in spans}
        assert len(named) == len(spans), "span names are unique in these tests"
        return named

    def tool(self, name: str, **kwargs) -> Any:
        return tool_call(name, tracer_provider=self.provider, **kwargs)

    def review_items(self) -> list[pb.ReviewItem]:
        items, token = self.store.list(page_size=1000)
        assert token == ""
        return items


def tf(span: ReadableSpan) -> dict[str, Any]:
    """The fence's own ``tracefence.*`` attributes of a span (sequences as lists)."""
    return {
        key: list(value) if isinstance(value, (list, tuple)) else value
        for key, value in (span.attributes or {}).items()
        if key.startswith(TF) and key not in PRODUCER_LABELS
    }


def hex_trace(span: ReadableSpan) -> str:
    return format(span.context.trace_id, "032x")


def hex_span(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x")


def common(replay_class: str, **extra) -> dict[str, Any]:
    return {"tracefence.replay.class": replay_class, "tracefence.plan.schema_version": "1", **extra}


def step(replay_class: str, decision: str, reasons: list[str], effect: str, status: str, related: list[str] | None = None, **extra) -> dict[str, Any]:
    return {
        **common(replay_class, **extra),
        "tracefence.step.decision": decision,
        "tracefence.step.reasons": reasons,
        "tracefence.step.related_call_ids": related or [],
        "tracefence.step.effect": effect,
        "tracefence.step.status": status,
    }


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.005) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Every data point by metric name: (attributes, value); ``otel.component.type`` (the door's) and
    ``otel.component.name`` (``{type}/{instance}``, counted across the test run) are checked and left out."""
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    if data is None:
        return out
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes)
                    kind, name = attributes.pop("otel.component.type"), attributes.pop("otel.component.name")
                    assert kind == COMPONENT_TYPES[attributes["tracefence.component"]] and re.fullmatch(re.escape(kind) + r"/\d+", name), (kind, name)
                    out.setdefault(metric.name, []).append((attributes, point.value))
    return out


def decisions_by_tool(item: pb.ReviewItem) -> dict[str, str]:
    return {d.step.tool: pb.Decision.Name(d.decision) for d in item.plan.steps}


def timed_out_write(fenced: Fenced, name: str, key: str, arguments: dict) -> None:
    try:
        with fenced.tool(name, effect="write", idempotency_key=key, arguments=arguments):
            raise TimeoutError(f"{name} did not answer")
    except TimeoutError:
        pass


# --- end to end: pydantic-ai's own spans -------------------------------------------------------


def test_pydantic_ai_agent_end_to_end(tmp_path):
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    fenced = Fenced(tmp_path)
    agent = Agent(TestModel(call_tools=["get_balance", "send_invoice", "charge_card"]), name="billing")
    agent.instrument = InstrumentationSettings(tracer_provider=fenced.provider, include_content=True)

    @agent.tool_plain(sequential=True)
    def get_balance(account: str) -> int:
        declare("read")
        return 100

    @agent.tool_plain(sequential=True)
    def send_invoice(customer: str, amount_cents: int) -> str:
        declare("write", idempotency_key="inv-17")
        return "sent"

    @agent.tool_plain(sequential=True)
    def charge_card(card: str, amount_cents: int) -> str:
        declare("write", idempotency_key="charge-17")
        raise TimeoutError("payment gateway did not answer")

    with pytest.raises(TimeoutError, match="payment gateway did not answer"):
        agent.run_sync("bill customer c-9")

    spans = fenced.by_name()
    assert set(spans) == {"invoke_agent billing", "chat test", "execute_tool get_balance", "execute_tool send_invoice", "execute_tool charge_card"}
    (trace_id,) = {hex_trace(s) for s in spans.values()}
    assert tf(spans["invoke_agent billing"]) == common("review")
    assert tf(spans["chat test"]) == common("review")
    assert tf(spans["execute_tool get_balance"]) == step("review", "replay", ["declared_read"], "read", "ok")
    assert tf(spans["execute_tool send_invoice"]) == step("review", "skip", ["write_committed"], "write", "ok")
    assert tf(spans["execute_tool charge_card"]) == step("review", "review", ["write_timeout"], "write", "timeout")
    # The framework's own attributes are still there, untouched.
    assert spans["execute_tool charge_card"].attributes["gen_ai.tool.call.id"] == "pyd_ai_tool_call_id__charge_card"
    assert spans["execute_tool charge_card"].attributes["tracefence.idempotency_key"] == "charge-17"
    assert spans["execute_tool charge_card"].events[0].attributes["exception.type"] == "TimeoutError"

    fenced.provider.shutdown()  # closes the store: read the file afresh
    with sqlite3.connect(fenced.db) as conn:
        assert conn.execute("SELECT trace_id, service_name FROM review_items").fetchall() == [(trace_id, SERVICE)]
    with SQLiteReviewStore(fenced.db, create=False) as store:
        item = store.get(trace_id)
    assert item is not None
    assert item.trace_id == trace_id
    assert item.state == pb.REVIEW_STATE_OPEN
    assert item.service_name == SERVICE
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    assert item.plan.schema_version == "1"
    assert item.plan.partial is False
    assert [(d.step.tool, d.step.call_id, d.step.span_id, pb.Decision.Name(d.decision), list(d.reasons)) for d in item.plan.steps] == [
        ("get_balance", "pyd_ai_tool_call_id__get_balance", hex_span(spans["execute_tool get_balance"]), "DECISION_REPLAY", ["declared_read"]),
        ("send_invoice", "pyd_ai_tool_call_id__send_invoice", hex_span(spans["execute_tool send_invoice"]), "DECISION_SKIP", ["write_committed"]),
        ("charge_card", "pyd_ai_tool_call_id__charge_card", hex_span(spans["execute_tool charge_card"]), "DECISION_REVIEW", ["write_timeout"]),
    ]
    charge = item.plan.steps[2].step
    assert (charge.effect, charge.status, charge.idempotency_key) == (pb.EFFECT_WRITE, pb.TOOL_STATUS_TIMEOUT, "charge-17")
    # Hashes only, by default: the raw arguments and results are not stored.
    assert all(not d.step.arguments_json and not d.step.result_value for d in item.plan.steps)
    assert all(len(d.step.arguments_sha256) == 64 for d in item.plan.steps)


def test_pydantic_ai_agent_without_uncertain_write_is_injected_and_not_queued(tmp_path):
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    fenced = Fenced(tmp_path)
    agent = Agent(TestModel(call_tools=["get_balance", "send_invoice"]), name="billing")
    agent.instrument = InstrumentationSettings(tracer_provider=fenced.provider, include_content=True)

    @agent.tool_plain(sequential=True)
    def get_balance(account: str) -> int:
        declare("read")
        return 100

    @agent.tool_plain(sequential=True)
    def send_invoice(customer: str, amount_cents: int) -> str:
        declare("write", idempotency_key="inv-18")
        return "sent"

    agent.run_sync("bill customer c-9")
    spans = fenced.spans()
    assert sorted(s.name for s in spans) == ["chat test", "chat test", "execute_tool get_balance", "execute_tool send_invoice", "invoke_agent billing"]
    assert {tf(s)["tracefence.replay.class"] for s in spans} == {"injected"}
    (invoice,) = [s for s in spans if s.name == "execute_tool send_invoice"]
    assert tf(invoice) == step("injected", "skip", ["write_committed"], "write", "ok")
    assert fenced.review_items() == []


# --- pass-through ------------------------------------------------------------------------------


def test_trace_without_tool_step_is_handed_on_unchanged(tmp_path):
    fenced = Fenced(tmp_path)
    reference = InMemorySpanExporter()  # the same spans, straight from the SDK
    fenced.provider.add_span_processor(SimpleSpanProcessor(reference))
    with fenced.tracer.start_as_current_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with fenced.tracer.start_as_current_span("chat gpt", attributes={"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": "[]"}) as chat:
            chat.add_event("thinking", {"n": 1})
        with fenced.tracer.start_as_current_span("HTTP GET", attributes={"http.request.method": "GET", "tags": ("a", "b")}):
            pass
    fenced.processor.force_flush()
    fenced_spans = fenced.spans()
    expected = reference.get_finished_spans()
    assert [s.name for s in fenced_spans] == [s.name for s in expected] == ["chat gpt", "HTTP GET", "invoke_agent planner"]
    for got, want in zip(fenced_spans, expected):
        assert got.context == want.context
        assert got.parent == want.parent
        assert dict(got.attributes) == dict(want.attributes)
        assert not any(key.startswith(TF) for key in got.attributes)
        assert got.events == want.events
        assert (got.status.status_code, got.start_time, got.end_time, got.resource) == (want.status.status_code, want.start_time, want.end_time, want.resource)
    assert fenced.review_items() == []


# --- bounds ------------------------------------------------------------------------------------


def test_max_traces_evicts_the_oldest_as_partial(tmp_path):
    fenced = Fenced(tmp_path, max_traces=2)
    roots = [fenced.tracer.start_span(f"root {i}") for i in range(3)]
    for i, root in enumerate(roots[:2]):
        with trace.use_span(root, end_on_exit=False):
            with fenced.tool(f"lookup_{i}", effect="read"):
                pass
    assert fenced.spans() == []  # two traces held, within the bound
    with trace.use_span(roots[2], end_on_exit=False):
        with fenced.tool("lookup_2", effect="read"):
            pass
    # The third trace pushed the oldest out: decided as it stands, flagged partial, handed on.
    (evicted,) = fenced.spans()
    assert evicted.name == "execute_tool lookup_0"
    assert tf(evicted) == step("dynamic", "replay", ["declared_read", "arguments_not_recorded"], "read", "ok", **{"tracefence.trace.partial": True})
    for root in roots:
        root.end()
    spans = fenced.by_name()
    # The evicted trace's root came after its decision: late, with the trace's class (and partial, as its plan).
    assert tf(spans["root 0"]) == common("dynamic", **{"tracefence.trace.partial": True, "tracefence.trace.late": True})
    # The others were decided whole.
    for i in (1, 2):
        assert tf(spans[f"root {i}"]) == common("dynamic")
        assert tf(spans[f"execute_tool lookup_{i}"]) == step("dynamic", "replay", ["declared_read", "arguments_not_recorded"], "read", "ok")
    assert len(fenced.spans()) == 6


def test_max_spans_per_trace_decides_the_trace_as_partial(tmp_path):
    fenced = Fenced(tmp_path, max_spans_per_trace=3)
    with fenced.tracer.start_as_current_span("root big"):
        for i in range(3):
            with fenced.tool(f"read_{i}", effect="read"):
                pass
        assert [s.name for s in fenced.spans()] == ["execute_tool read_0", "execute_tool read_1", "execute_tool read_2"]
        timed_out_write(fenced, "pay", "pay-1", {"amount": 5})
    spans = fenced.by_name()
    read = step("dynamic", "replay", ["declared_read", "arguments_not_recorded"], "read", "ok", **{"tracefence.trace.partial": True})
    for i in range(3):
        assert tf(spans[f"execute_tool read_{i}"]) == read
    # The fourth span came after the decision: a late tool step with its own decision, fenced
    # as decided before complete; the class becomes review.
    late = {"tracefence.trace.partial": True, "tracefence.trace.late": True}
    assert tf(spans["execute_tool pay"]) == step("review", "review", ["write_timeout", "decided_before_complete"], "write", "timeout", **late)
    assert tf(spans["root big"]) == common("review", **late)
    (item,) = fenced.review_items()
    assert item.plan.partial is True
    assert decisions_by_tool(item) == {"read_0": "DECISION_REPLAY", "read_1": "DECISION_REPLAY", "read_2": "DECISION_REPLAY", "pay": "DECISION_REVIEW"}


def test_trace_of_exactly_max_spans_ending_with_its_root_is_not_partial(tmp_path):
    fenced = Fenced(tmp_path, max_spans_per_trace=3)
    with fenced.tracer.start_as_current_span("root"):
        with fenced.tool("a", effect="read"):
            pass
        with fenced.tool("b", effect="read"):
            pass
    spans = fenced.by_name()
    assert tf(spans["root"]) == common("dynamic")
    assert tf(spans["execute_tool a"]) == step("dynamic", "replay", ["declared_read", "arguments_not_recorded"], "read", "ok")


# --- late spans --------------------------------------------------------------------------------


def test_child_ending_after_its_root_is_late_with_the_trace_class(tmp_path):
    fenced = Fenced(tmp_path, decision_wait_ms=0)
    root = fenced.tracer.start_span("invoke_agent a")
    with trace.use_span(root, end_on_exit=False):
        with fenced.tool("search", effect="read"):
            pass
        background = fenced.tracer.start_span("background upload")
    root.end()
    assert [s.name for s in fenced.spans()] == ["execute_tool search", "invoke_agent a"]
    assert tf(fenced.by_name()["invoke_agent a"]) == common("dynamic")
    background.set_attribute("bytes", 12)
    background.end()
    late = fenced.by_name()["background upload"]
    assert tf(late) == common("dynamic", **{"tracefence.trace.late": True})
    assert late.attributes["bytes"] == 12
    assert fenced.review_items() == []


def test_late_span_of_a_trace_without_tool_step_is_untouched(tmp_path):
    fenced = Fenced(tmp_path)
    root = fenced.tracer.start_span("GET /health")
    with trace.use_span(root, end_on_exit=False):
        child = fenced.tracer.start_span("flush metrics", attributes={"k": "v"})
    root.end()
    child.end()
    spans = fenced.by_name()
    assert dict(spans["flush metrics"].attributes) == {"k": "v"}
    assert dict(spans["GET /health"].attributes) == {}


def test_late_timed_out_write_turns_the_trace_into_review_and_updates_its_item(tmp_path):
    fenced = Fenced(tmp_path, decision_wait_ms=0)
    root = fenced.tracer.start_span("invoke_agent a")
    with trace.use_span(root, end_on_exit=False):
        with fenced.tool("search", effect="read"):
            pass
        first = fenced.tracer.start_span("execute_tool refund", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund", "gen_ai.tool.call.id": "call-refund", "tracefence.effect": "write", "tracefence.idempotency_key": "refund-1", "gen_ai.tool.call.arguments": '{"order":"o-1"}'})
        second = fenced.tracer.start_span("execute_tool notify", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "notify", "gen_ai.tool.call.id": "call-notify", "tracefence.effect": "write", "gen_ai.tool.call.arguments": '{"to":"c-9"}'})
    root.end()
    trace_id = hex_trace(root)
    assert tf(fenced.by_name()["invoke_agent a"]) == common("dynamic")
    assert fenced.review_items() == []

    first.set_attribute("tracefence.status", "timeout")
    first.end()
    late = fenced.by_name()["execute_tool refund"]
    late_attrs = {"tracefence.trace.partial": True, "tracefence.trace.late": True}
    assert tf(late) == step("review", "review", ["write_timeout", "decided_before_complete"], "write", "timeout", **late_attrs)
    (item,) = fenced.review_items()
    assert item.trace_id == trace_id
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    assert decisions_by_tool(item) == {"search": "DECISION_REPLAY", "refund": "DECISION_REVIEW"}
    created = item.created_time.ToNanoseconds()

    second.set_attribute("tracefence.status", "timeout")
    second.end()
    assert tf(fenced.by_name()["execute_tool notify"]) == step("review", "review", ["write_timeout", "decided_before_complete"], "write", "timeout", **late_attrs)
    (item,) = fenced.review_items()  # updated, not duplicated
    assert item.trace_id == trace_id
    assert decisions_by_tool(item) == {"search": "DECISION_REPLAY", "refund": "DECISION_REVIEW", "notify": "DECISION_REVIEW"}
    assert item.created_time.ToNanoseconds() == created
    assert item.updated_time.ToNanoseconds() > created
    assert item.plan.partial is True
    assert item.service_name == SERVICE


# --- decision wait -----------------------------------------------------------------------------


def test_decision_wait_keeps_a_child_that_ends_after_the_root_in_its_trace(tmp_path):
    fenced = Fenced(tmp_path)  # the default wait
    assert fenced.processor.config.decision_wait_ms == 60_000
    root = fenced.tracer.start_span("invoke_agent a")
    with trace.use_span(root, end_on_exit=False):
        write = fenced.tracer.start_span("execute_tool charge", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge", "tracefence.effect": "write", "tracefence.status": "timeout"})
    root.end()
    time.sleep(0.05)
    assert fenced.spans() == []  # held: a span started in this process is still open
    write.end()  # the last open span: complete, decided now, without waiting out the 60 s
    spans = fenced.by_name()
    assert tf(spans["invoke_agent a"]) == common("review")  # neither late nor partial
    assert tf(spans["execute_tool charge"]) == step("review", "review", ["write_timeout", "arguments_not_recorded"], "write", "timeout")
    (item,) = fenced.review_items()
    assert item.plan.partial is False
    fenced.provider.shutdown()


def test_a_trace_whose_root_ends_last_is_decided_at_once_with_the_default_wait(tmp_path):
    fenced = Fenced(tmp_path)
    with fenced.tracer.start_as_current_span("invoke_agent a"):
        with fenced.tool("search", effect="read"):
            pass
    spans = fenced.by_name()  # no span left open: nothing to wait for
    assert tf(spans["invoke_agent a"]) == common("dynamic")


def test_decision_wait_is_the_longest_wait_for_open_spans_then_they_fail_closed(tmp_path):
    fenced = Fenced(tmp_path, decision_wait_ms=150)
    root = fenced.tracer.start_span("invoke_agent a")
    with trace.use_span(root, end_on_exit=False):
        with fenced.tool("search", effect="read"):
            pass
        stuck = fenced.tracer.start_span("execute_tool stream", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "stream", "tracefence.effect": "read"})
    root.end()
    ended_root = time.monotonic()
    assert fenced.spans() == []
    wait_for(lambda: len(fenced.spans()) == 2, timeout=3)  # the wait ran out with a span still open
    assert time.monotonic() - ended_root >= 0.15
    partial = {"tracefence.trace.partial": True}
    spans = fenced.by_name()
    assert tf(spans["invoke_agent a"]) == common("dynamic", **partial)
    stuck.end()  # a read: on its own it would replay, but the trace was decided without it
    late = {"tracefence.trace.partial": True, "tracefence.trace.late": True}
    assert tf(fenced.by_name()["execute_tool stream"]) == step("review", "review", ["decided_before_complete", "arguments_not_recorded"], "read", "ok", **late)
    (item,) = fenced.review_items()
    assert decisions_by_tool(item) == {"search": "DECISION_REPLAY", "stream": "DECISION_REVIEW"}
    assert item.plan.partial is True
    fenced.provider.shutdown()


# --- flush and shutdown ------------------------------------------------------------------------


class Recording(SpanProcessor):
    """A downstream processor that records what it is asked to do."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []
        self.calls: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.calls.append("force_flush")
        return True

    def shutdown(self) -> None:
        self.calls.append("shutdown")


# The root is still open when the trace is handed on: decided partial with no root span, the write is held for that
# too (docs/DECISIONS.md 301).
ROOT_OPEN = ["trace_root_missing"]


def _open_trace_with_a_finished_write(fenced: Fenced, name: str):
    root = fenced.tracer.start_span(f"invoke_agent {name}")
    with trace.use_span(root, end_on_exit=False):
        timed_out_write(fenced, name, f"{name}-1", {"n": 1})
    return root


def test_force_flush_hands_on_held_traces_as_partial_and_flushes_downstream(tmp_path):
    exporter = InMemorySpanExporter()
    batch = BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
    recording = Recording()
    fenced = Fenced(tmp_path, downstream=(batch, recording))
    root = _open_trace_with_a_finished_write(fenced, "pay")
    assert recording.ended == [] and exporter.get_finished_spans() == ()
    assert fenced.processor.force_flush() is True
    assert recording.calls == ["force_flush"]
    (span,) = exporter.get_finished_spans()  # the batch processor was flushed
    assert tf(span) == step("review", "review", ROOT_OPEN + ["write_timeout"], "write", "timeout", **{"tracefence.trace.partial": True})
    assert [s.name for s in recording.ended] == ["execute_tool pay"]
    (item,) = fenced.review_items()
    assert item.plan.partial is True
    root.end()  # after the flush: late
    assert tf(recording.ended[-1]) == common("review", **{"tracefence.trace.partial": True, "tracefence.trace.late": True})
    fenced.provider.shutdown()


def test_shutdown_hands_on_held_traces_shuts_downstream_down_and_closes_the_store(tmp_path):
    exporter = InMemorySpanExporter()
    recording = Recording()
    fenced = Fenced(tmp_path, downstream=(BatchSpanProcessor(exporter, schedule_delay_millis=60_000), recording), decision_wait_ms=10_000)
    _open_trace_with_a_finished_write(fenced, "pay")
    # A trace whose root ended, handed in without on_start (made by another provider): nothing says
    # whether it is complete, so it waits out its decision wait.
    elsewhere = InMemorySpanExporter()
    other = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    other.add_span_processor(SimpleSpanProcessor(elsewhere))
    with other.get_tracer("t").start_as_current_span("invoke_agent done"):
        with tool_call("look", effect="read", tracer_provider=other):
            pass
    for span in elsewhere.get_finished_spans():
        fenced.processor.on_end(span)
    assert recording.ended == []
    fenced.provider.shutdown()
    assert recording.calls == ["shutdown"]
    by_name = {s.name: s for s in exporter.get_finished_spans()}  # the batch processor exported on its shutdown
    assert set(by_name) == {"execute_tool pay", "invoke_agent done", "execute_tool look"}
    assert tf(by_name["execute_tool pay"]) == step("review", "review", ROOT_OPEN + ["write_timeout"], "write", "timeout", **{"tracefence.trace.partial": True})
    assert tf(by_name["invoke_agent done"]) == common("dynamic")  # its root had ended: whole, not partial
    assert [s.name for s in recording.ended] == [s.name for s in exporter.get_finished_spans()]
    with pytest.raises(ReviewStoreError, match="closed"):
        fenced.store.get("0" * 32)
    with SQLiteReviewStore(fenced.db, create=False) as store:
        (item,) = store.list()[0]
    assert decisions_by_tool(item) == {"pay": "DECISION_REVIEW"}


# --- faults ------------------------------------------------------------------------------------


class Exploding(SpanProcessor):
    def on_start(self, span, parent_context=None) -> None:
        raise RuntimeError("downstream on_start broke")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("downstream on_end broke")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise RuntimeError("downstream force_flush broke")

    def shutdown(self) -> None:
        raise RuntimeError("downstream shutdown broke")


def test_a_fault_in_planning_hands_the_trace_on_as_review_and_a_fault_downstream_is_contained(tmp_path, monkeypatch, caplog):
    """A planner that raises never lets its trace pass unannotated, as if it held no tool call: every span is
    handed on ``review``, partial, ``tracefence.trace.reasons = ["not_planned_error"]``, with a review item
    (docs/DECISIONS.md 200). The agent's code sees no exception."""
    def broken(*args, **kwargs):
        raise RuntimeError("planner bug")

    monkeypatch.setattr(buffer_module, "plan_spans", broken)
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    fenced = Fenced(tmp_path, downstream=(Exploding(), SimpleSpanProcessor(exporter)), meter_provider=MeterProvider(metric_readers=[reader]))
    with fenced.tracer.start_as_current_span("invoke_agent a"):  # the agent's code sees no exception
        with fenced.tool("search", effect="read"):
            pass
        timed_out_write(fenced, "pay", "pay-1", {"n": 1})
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent a", "execute_tool search", "execute_tool pay"}
    for span in spans.values():
        assert tf(span) == {
            "tracefence.replay.class": "review", "tracefence.plan.schema_version": SCHEMA_VERSION,
            "tracefence.trace.partial": True, "tracefence.trace.reasons": ["not_planned_error"],
        }  # fmt: skip
    assert spans["execute_tool pay"].attributes["tracefence.status"] == "timeout"  # the producer's own labels stay
    (item,) = fenced.review_items()
    assert (item.trace_id, item.plan.steps) == (format(spans["invoke_agent a"].context.trace_id, "032x"), [])
    assert fenced.processor.force_flush() is False  # a downstream flush failed: said, not raised
    fenced.provider.shutdown()
    errors = {p[0]["error.type"]: p[1] for p in metric_points(reader)["tracefence.errors"]}
    # on_start and on_end of 3 spans each, the failed force_flush and shutdown of the exploding processor.
    assert errors == {"plan": 1, "downstream": 3 + 3 + 2}
    assert all(p[0]["tracefence.component"] == "processor" for p in metric_points(reader)["tracefence.errors"])
    assert "planner bug" in caplog.text


def test_a_fault_at_intake_hands_the_span_on_unannotated(tmp_path, monkeypatch):
    def broken(span):
        raise ValueError("cannot read span")

    monkeypatch.setattr(fence_module, "from_readable", broken)
    reader = InMemoryMetricReader()
    fenced = Fenced(tmp_path, meter_provider=MeterProvider(metric_readers=[reader]))
    with fenced.tracer.start_as_current_span("invoke_agent a"):
        timed_out_write(fenced, "pay", "pay-1", {"n": 1})
    assert sorted(s.name for s in fenced.spans()) == ["execute_tool pay", "invoke_agent a"]
    assert all(tf(s) == {} for s in fenced.spans())
    assert metric_points(reader)["tracefence.errors"] == [({"tracefence.component": "processor", "error.type": "intake"}, 2)]


# --- concurrency -------------------------------------------------------------------------------


def _agent_run(fenced: Fenced, n: int) -> None:
    with fenced.tracer.start_as_current_span(f"invoke_agent run-{n}"):
        with fenced.tool("search", effect="read", arguments={"q": n}):
            pass
        if n % 3 == 0:
            timed_out_write(fenced, "pay", f"pay-{n}", {"n": n})
        elif n % 3 == 1:
            with fenced.tool("save", effect="write", idempotency_key=f"save-{n}", arguments={"n": n}):
                pass


def _check_every_span_once_and_one_class_per_trace(fenced: Fenced, runs: int) -> None:
    spans = fenced.spans()
    expected = sum(3 if n % 3 in (0, 1) else 2 for n in range(runs))
    ids = [(s.context.trace_id, s.context.span_id) for s in spans]
    assert len(ids) == expected and len(set(ids)) == expected  # every span exactly once
    classes: dict[int, set[str]] = {}
    roots: dict[int, str] = {}
    for span in spans:
        classes.setdefault(span.context.trace_id, set()).add(span.attributes["tracefence.replay.class"])
        assert "tracefence.trace.late" not in span.attributes and "tracefence.trace.partial" not in span.attributes
        if span.parent is None:
            roots[span.context.trace_id] = span.name
    assert len(classes) == runs
    want = {0: "review", 1: "static", 2: "dynamic"}
    for trace_id, found in classes.items():
        n = int(roots[trace_id].rsplit("-", 1)[1])
        assert found == {want[n % 3]}
    review_traces = {format(t, "032x") for t, found in classes.items() if found == {"review"}}
    items = fenced.review_items()
    assert len(items) == len(review_traces) == len(range(0, runs, 3))
    assert {item.trace_id for item in items} == review_traces


@pytest.mark.parametrize("decision_wait_ms", [0, 20])
def test_concurrent_traces_from_16_threads(tmp_path, decision_wait_ms):
    fenced = Fenced(tmp_path, decision_wait_ms=decision_wait_ms)
    runs = 16 * 12
    barrier = threading.Barrier(16)

    def worker(w: int) -> None:
        barrier.wait()
        for n in range(w, runs, 16):
            _agent_run(fenced, n)

    with ThreadPoolExecutor(max_workers=16) as pool:
        for future in [pool.submit(worker, w) for w in range(16)]:
            future.result()
    expected = sum(3 if n % 3 in (0, 1) else 2 for n in range(runs))
    wait_for(lambda: len(fenced.spans()) >= expected, timeout=5)  # the decision wait's timer hands the last ones on
    _check_every_span_once_and_one_class_per_trace(fenced, runs)
    fenced.provider.shutdown()


def test_concurrent_traces_from_asyncio_tasks(tmp_path):
    fenced = Fenced(tmp_path)
    runs = 120

    async def run(n: int) -> None:
        with fenced.tracer.start_as_current_span(f"invoke_agent run-{n}"):
            await asyncio.sleep(0)
            async with fenced.tool("search", effect="read", arguments={"q": n}):
                await asyncio.sleep(0)
            if n % 3 == 0:
                try:
                    async with fenced.tool("pay", effect="write", idempotency_key=f"pay-{n}", arguments={"n": n}):
                        await asyncio.sleep(0)
                        raise TimeoutError("slow")
                except TimeoutError:
                    pass
            elif n % 3 == 1:
                async with fenced.tool("save", effect="write", idempotency_key=f"save-{n}", arguments={"n": n}):
                    await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(run(n) for n in range(runs)))

    asyncio.run(main())
    _check_every_span_once_and_one_class_per_trace(fenced, runs)


# --- the same trace re-planned -----------------------------------------------------------------


def _remote_parent(trace_id: int) -> Any:
    context = SpanContext(trace_id=trace_id, span_id=0x00F067AA0BA902B7, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(context))


def _request(fenced: Fenced, trace_id: int, name: str, key: str) -> None:
    with fenced.tracer.start_as_current_span(f"POST /{name}", context=_remote_parent(trace_id)):
        timed_out_write(fenced, name, key, {"name": name})


def test_review_item_updated_not_duplicated_when_the_same_trace_is_planned_again(tmp_path):
    trace_id = 0x4BF92F3577B34DA6A3CE929D0E0E4736
    hex_id = format(trace_id, "032x")
    fenced = Fenced(tmp_path)
    _request(fenced, trace_id, "charge", "charge-1")  # a local root with a remote parent: decided at its end
    (item,) = fenced.review_items()
    assert (item.trace_id, decisions_by_tool(item), item.plan.partial) == (hex_id, {"charge": "DECISION_REVIEW"}, False)
    created = item.created_time.ToNanoseconds()

    _request(fenced, trace_id, "refund", "refund-1")  # a second request of the same trace, in this process: late
    (item,) = fenced.review_items()
    assert decisions_by_tool(item) == {"charge": "DECISION_REVIEW", "refund": "DECISION_REVIEW"}
    assert item.created_time.ToNanoseconds() == created
    fenced.provider.shutdown()

    # Another process (a restart, a redelivery) planning the same trace id updates the same row.
    again = Fenced(tmp_path)
    _request(again, trace_id, "charge", "charge-1")
    (item,) = again.review_items()
    assert item.trace_id == hex_id
    assert item.created_time.ToNanoseconds() == created
    assert item.updated_time.ToNanoseconds() > created
    # It does not know of the refund, but the stored item keeps it: an update never drops a step.
    assert decisions_by_tool(item) == {"charge": "DECISION_REVIEW", "refund": "DECISION_REVIEW"}
    assert item.plan.partial is True
    again.provider.shutdown()
    with sqlite3.connect(tmp_path / "review.db") as conn:
        assert conn.execute("SELECT count(*) FROM review_items").fetchone() == (1,)


# --- settings ----------------------------------------------------------------------------------


def test_review_db_setting_and_review_classes(tmp_path):
    db = tmp_path / "queue.db"
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter := InMemorySpanExporter()), review_db=str(db), review_classes=["review", "static"])
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("invoke_agent a"):
        with tool_call("save", effect="write", idempotency_key="s-1", tracer_provider=provider):
            pass  # committed, result not recorded: static
    with provider.get_tracer("t").start_as_current_span("invoke_agent b"):
        with tool_call("look", effect="read", tracer_provider=provider):
            pass  # dynamic: not queued
    provider.shutdown()
    classes = {s.name: s.attributes["tracefence.replay.class"] for s in exporter.get_finished_spans()}
    assert classes == {"execute_tool save": "static", "invoke_agent a": "static", "execute_tool look": "dynamic", "invoke_agent b": "dynamic"}
    with SQLiteReviewStore(db, create=False) as store:
        (item,) = store.list()[0]
    assert item.plan.replay_class == pb.REPLAY_CLASS_STATIC
    assert decisions_by_tool(item) == {"save": "DECISION_SKIP"}


def test_no_review_sink(tmp_path):
    fenced = Fenced(tmp_path, store=None)
    with fenced.tracer.start_as_current_span("invoke_agent a"):
        timed_out_write(fenced, "pay", "pay-1", {"n": 1})
    assert {s.attributes["tracefence.replay.class"] for s in fenced.spans()} == {"review"}
    fenced.provider.shutdown()
    assert not (tmp_path / "review.db").exists()


# --- self-telemetry ----------------------------------------------------------------------------


def test_self_telemetry(tmp_path):
    reader = InMemoryMetricReader()
    fenced = Fenced(tmp_path, meter_provider=MeterProvider(metric_readers=[reader]), decision_wait_ms=0)
    component = {"tracefence.component": "processor"}

    with fenced.tracer.start_as_current_span("invoke_agent review"):  # 2 spans, review
        timed_out_write(fenced, "pay", "pay-1", {"n": 1})
    with fenced.tracer.start_as_current_span("invoke_agent dynamic"):  # 2 spans, dynamic
        with fenced.tool("look", effect="read"):
            pass
    with fenced.tracer.start_as_current_span("GET /health"):  # 1 span, no tool step: not decided by class
        pass
    root = fenced.tracer.start_span("invoke_agent late")  # 2 spans, dynamic, then 1 late span
    with trace.use_span(root, end_on_exit=False):
        with fenced.tool("look2", effect="read"):
            pass
        straggler = fenced.tracer.start_span("straggler")
    root.end()
    straggler.end()
    held_root = fenced.tracer.start_span("invoke_agent held")  # 1 span held: its root is open
    with trace.use_span(held_root, end_on_exit=False):
        with fenced.tool("look3", effect="read"):
            pass

    points = metric_points(reader)
    decided = sorted((p[0]["tracefence.replay.class"], p[0]["tracefence.trace.partial"], p[1]) for p in points["tracefence.traces.decided"])
    assert decided == [("dynamic", False, 2), ("review", False, 1)]
    assert all(p[0]["tracefence.component"] == "processor" for p in points["tracefence.traces.decided"])
    assert points["tracefence.spans.received"] == [(component, 2 + 2 + 1 + 2 + 1)]
    assert points["tracefence.spans.late"] == [(component, 1)]
    assert points["tracefence.traces.held"] == [(component, 1)]
    assert points["tracefence.review.writes"] == [({**component, "outcome": "ok"}, 1)]
    assert "tracefence.errors" not in points

    fenced.processor.force_flush()
    points = metric_points(reader)
    assert points["tracefence.traces.held"] == [(component, 0)]
    decided = sorted((p[0]["tracefence.replay.class"], p[0]["tracefence.trace.partial"], p[1]) for p in points["tracefence.traces.decided"])
    assert decided == [("dynamic", False, 2), ("dynamic", True, 1), ("review", False, 1)]
    assert points["tracefence.spans.received"] == [(component, 9)]
    held_root.end()
    fenced.provider.shutdown()


def test_concurrent_late_tool_spans_of_one_trace_all_reach_its_plan(tmp_path):
    fenced = Fenced(tmp_path, decision_wait_ms=0)
    root = fenced.tracer.start_span("invoke_agent fan-out")
    with trace.use_span(root, end_on_exit=False):
        with fenced.tool("search", effect="read"):
            pass
        writes = [
            fenced.tracer.start_span(
                f"execute_tool write_{i}",
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"write_{i}", "tracefence.effect": "write", "tracefence.status": "timeout", "gen_ai.tool.call.arguments": f'{{"i":{i}}}'},
            )
            for i in range(16)
        ]
    root.end()  # decided now, with one step: every write ends late, from its own thread
    barrier = threading.Barrier(16)

    def end(span) -> None:
        barrier.wait()
        span.end()

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(end, writes))
    late = [s for s in fenced.spans() if s.name.startswith("execute_tool write_")]
    assert len(late) == 16
    late_attrs = {"tracefence.trace.partial": True, "tracefence.trace.late": True}
    assert all(tf(s) == step("review", "review", ["write_timeout", "decided_before_complete"], "write", "timeout", **late_attrs) for s in late)
    (item,) = fenced.review_items()  # every late step reached the plan, and the last write was the latest plan
    assert sorted(decisions_by_tool(item)) == sorted(["search"] + [f"write_{i}" for i in range(16)])


def test_a_span_ending_while_its_trace_is_being_planned_is_late_against_that_plan(tmp_path, monkeypatch):
    planning = threading.Event()
    real = buffer_module.plan_spans

    def slow_plan(*args, **kwargs):
        planning.set()
        time.sleep(0.1)  # the straggler ends meanwhile, from another thread
        return real(*args, **kwargs)

    monkeypatch.setattr(buffer_module, "plan_spans", slow_plan)
    fenced = Fenced(tmp_path, decision_wait_ms=0)
    root = fenced.tracer.start_span("invoke_agent a")
    with trace.use_span(root, end_on_exit=False):
        timed_out_write(fenced, "charge", "charge-1", {"n": 1})
        straggler = fenced.tracer.start_span("execute_tool refund", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund", "tracefence.effect": "write", "tracefence.status": "timeout", "gen_ai.tool.call.arguments": "{}"})
    ender = threading.Thread(target=lambda: (planning.wait(5), straggler.end()))
    ender.start()
    root.end()
    ender.join(5)
    spans = fenced.by_name()
    assert set(spans) == {"invoke_agent a", "execute_tool charge", "execute_tool refund"}  # none left held
    late_attrs = {"tracefence.trace.partial": True, "tracefence.trace.late": True}
    assert tf(spans["execute_tool refund"]) == step("review", "review", ["write_timeout", "decided_before_complete"], "write", "timeout", **late_attrs)
    (item,) = fenced.review_items()
    assert decisions_by_tool(item) == {"charge": "DECISION_REVIEW", "refund": "DECISION_REVIEW"}


def test_a_review_db_deleted_under_the_processor_is_counted_and_later_items_land_in_a_new_file(tmp_path):
    reader = InMemoryMetricReader()
    fenced = Fenced(tmp_path, meter_provider=MeterProvider(metric_readers=[reader]))
    with fenced.tracer.start_as_current_span("invoke_agent a"):
        timed_out_write(fenced, "pay", "pay-1", {"n": 1})
    assert len(fenced.review_items()) == 1
    for path in tmp_path.glob("review.db*"):
        path.unlink()
    with fenced.tracer.start_as_current_span("invoke_agent b"):
        timed_out_write(fenced, "pay", "pay-2", {"n": 2})
    assert fenced.processor.force_flush()
    assert fenced.db.exists()
    assert [decisions_by_tool(item) for item in fenced.review_items()] == [{"pay": "DECISION_REVIEW"}]
    errors = {p[0]["error.type"]: p[1] for p in metric_points(reader)["tracefence.errors"]}
    assert errors == {"review_db_deleted": 1}
    fenced.provider.shutdown()
