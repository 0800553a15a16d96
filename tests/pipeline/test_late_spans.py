"""Traces whose tool spans outlive their root (issue 14): the processor waits for them, and a tool span
that still comes after its trace was decided fails closed, in every door.

Real parts: the shared case ``tool_spans_outlive_root.otlp.json`` rebuilt as SDK spans and fed in
the SDK's order, a real TracerProvider running an asyncio agent, a real ``tracefence serve`` with
the SDK's OTLP/gRPC exporter as client and a recording upstream, real SQLite review queues.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from case_spans import end_time_order, feed, readable_spans
from service_helpers import service_config
from conftest import SHARED_CASES
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.agent.instrument import tool_call
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.service.server import TraceFenceService

CASE = SHARED_CASES / "tool_spans_outlive_root.otlp.json"
TRACE_ID = "7c3e2a4d9f1b6e5c0a8d3f2e1b4c5d6e"
CLASS = "tracefence.replay.class"
DECISION = "tracefence.step.decision"
REASONS = "tracefence.step.reasons"
PARTIAL = "tracefence.trace.partial"
LATE = "tracefence.trace.late"
TOOLS = {"execute_tool get_order": "replay", "execute_tool get_customer": "replay", "execute_tool close_order": "skip"}

needs_case = pytest.mark.skipif(not CASE.is_file(), reason=f"{CASE} is not beside the checkout")


def _attrs(span: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()}


def _by_name(spans: list[ReadableSpan]) -> dict[str, dict[str, Any]]:
    named = {s.name: _attrs(s) for s in spans}
    assert len(named) == len(spans)
    return named


def _processor(tmp_path: Path | None = None, **settings: Any) -> tuple[TraceFenceSpanProcessor, InMemorySpanExporter, SQLiteReviewStore | None]:
    exporter = InMemorySpanExporter()
    store = SQLiteReviewStore(tmp_path / "review.db") if tmp_path is not None else None
    return TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=store, **settings), exporter, store


# -- the processor -------------------------------------------------------------------------------


@needs_case
def test_case_through_the_processor_with_defaults_every_span_carries_injected():
    """As the SDK delivers them: starts at start time, ends at end time. The root ends first; the
    trace is decided when its last open span ends, without waiting out the 60 s and without a flush."""
    processor, exporter, _ = _processor()
    assert processor.config.decision_wait_ms == 60_000
    spans = readable_spans(CASE)
    assert [s.name for s in end_time_order(spans)][0] == "invoke_agent streaming"  # the root ends first
    feed(processor, spans)
    got = _by_name(list(exporter.get_finished_spans()))
    assert set(got) == {"invoke_agent streaming", *TOOLS}
    for name, attributes in got.items():
        assert attributes[CLASS] == "injected", name
        assert PARTIAL not in attributes and LATE not in attributes
    for name, decision in TOOLS.items():
        assert got[name][DECISION] == decision
    processor.shutdown()


@needs_case
def test_case_ends_only_in_end_time_order_are_held_for_the_wait_and_carry_injected():
    """Only ``on_end`` calls, in end-time order (spans from elsewhere): nothing says the trace is complete,
    so it is held for the decision wait; flushed, every span carries the CLI's class."""
    processor, exporter, _ = _processor()
    for span in end_time_order(readable_spans(CASE)):
        processor.on_end(span)
    assert exporter.get_finished_spans() == ()  # held: tool spans may still come within the wait
    processor.force_flush()
    got = _by_name(list(exporter.get_finished_spans()))
    assert {name: a[CLASS] for name, a in got.items()} == dict.fromkeys(["invoke_agent streaming", *TOOLS], "injected")
    processor.shutdown()


@needs_case
@pytest.mark.parametrize("starts", [True, False], ids=["with-starts", "ends-only"])
def test_case_without_a_wait_late_tool_spans_fail_closed(tmp_path, starts):
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=0)
    feed(processor, readable_spans(CASE), starts=starts)
    got = _by_name(list(exporter.get_finished_spans()))
    # Decided at the root's end with no tool step: the root, an agent run that recorded no output with no model span in
    # the trace, is held for what it asked for (DECISIONS 1010); the tool spans below it are calls of their own.
    root = got["invoke_agent streaming"]
    assert (root[CLASS], root[DECISION], root[REASONS]) == ("review", "review", ["requested_call_unread", "effect_unknown", "arguments_not_recorded"])
    for name in TOOLS:  # every tool span came after the decision
        attributes = got[name]
        assert attributes[CLASS] == "review", name
        assert attributes[DECISION] == "review"
        assert attributes[REASONS] == ["decided_before_complete"]
        assert attributes[PARTIAL] is True and attributes[LATE] is True
    assert not any(a.get(CLASS) == "dynamic" for a in got.values())
    (item,) = store.list()[0]
    assert item.trace_id == TRACE_ID
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW and item.plan.partial is True
    assert {s.step.call_id: (s.decision, list(s.reasons)) for s in item.plan.steps} == {
        **{call: (pb.DECISION_REVIEW, ["decided_before_complete"]) for call in ("call_s1", "call_s2", "call_s3")},
        "aaaaaaaaaaaaaaa1": (pb.DECISION_REVIEW, ["requested_call_unread", "effect_unknown", "arguments_not_recorded"]),
    }
    processor.shutdown()


@needs_case
def test_a_late_span_never_carries_a_class_below_one_already_handed_on(tmp_path):
    """Decided with the write (review: its status was not recorded ok), then a late read: it is fenced
    too, and the class stays review; a late non-tool span carries the trace's class."""
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=0)
    spans = {s.name: s for s in readable_spans(CASE)}
    processor.on_end(spans["execute_tool close_order"])
    processor.on_end(spans["invoke_agent streaming"])  # decided: injected
    first = _by_name(list(exporter.get_finished_spans()))
    assert {a[CLASS] for a in first.values()} == {"injected"}
    processor.on_end(spans["execute_tool get_order"])  # a read that, on time, would have kept the trace injected
    late = _attrs(exporter.get_finished_spans()[-1])
    assert (late[CLASS], late[DECISION], late[REASONS]) == ("review", "review", ["decided_before_complete"])
    processor.on_end(spans["execute_tool get_customer"])
    assert _attrs(exporter.get_finished_spans()[-1])[CLASS] == "review"
    (item,) = store.list()[0]
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    # The write left with skip; the stored plan keeps it, and fences only the late steps.
    assert {s.step.call_id: s.decision for s in item.plan.steps} == {"call_s1": pb.DECISION_REVIEW, "call_s2": pb.DECISION_REVIEW, "call_s3": pb.DECISION_SKIP}
    processor.shutdown()


# -- a real agent whose root ends before its background tool --------------------------------------


async def _streaming_agent(provider: TracerProvider, background_started: asyncio.Event) -> asyncio.Task:
    """An agent turn that streams its answer: it reads an order, starts closing it in a background
    task, and ends its run span while the close is still running. Returns the background task."""
    tracer = provider.get_tracer("agent.loop")

    async def close_order() -> None:
        async with tool_call("close_order", effect="write", idempotency_key="close-o-5", arguments={"order": "o-5"}, record_result=True, call_id="call_close", tracer_provider=provider) as call:
            background_started.set()
            await asyncio.sleep(0.1)  # the destination answers after the run span has ended
            call.set_result({"closed": True})

    with tracer.start_as_current_span("invoke_agent streaming", attributes={"gen_ai.operation.name": "invoke_agent"}):
        async with tool_call("get_order", effect="read", arguments={"order": "o-5"}, record_result=True, call_id="call_get", tracer_provider=provider) as call:
            await asyncio.sleep(0)
            call.set_result({"state": "open"})
        task = asyncio.create_task(close_order())  # in the run's context: a child of the run span
        await background_started.wait()
    return task  # the run span has ended; the close is still running


def _run_agent(processor: TraceFenceSpanProcessor) -> tuple[TracerProvider, list[str]]:
    provider = TracerProvider(resource=Resource.create({"service.name": "streaming-agent"}))
    provider.add_span_processor(processor)
    order: list[str] = []

    async def main() -> None:
        task = await _streaming_agent(provider, asyncio.Event())
        order.append("root ended")
        await task
        order.append("background ended")

    asyncio.run(main())
    return provider, order


def test_real_agent_background_tool_outliving_the_root_defaults(tmp_path):
    processor, exporter, store = _processor(tmp_path)
    provider, order = _run_agent(processor)
    assert order == ["root ended", "background ended"]
    got = _by_name(list(exporter.get_finished_spans()))
    assert set(got) == {"invoke_agent streaming", "execute_tool get_order", "execute_tool close_order"}
    ends = {s.name: s.end_time for s in exporter.get_finished_spans()}
    assert ends["invoke_agent streaming"] < ends["execute_tool close_order"]  # the root really ended first
    assert {name: a[CLASS] for name, a in got.items()} == dict.fromkeys(got, "injected")
    assert (got["execute_tool get_order"][DECISION], got["execute_tool close_order"][DECISION]) == ("replay", "skip")
    assert not any(PARTIAL in a or LATE in a for a in got.values())
    assert store.list()[0] == []  # injected is not a review class
    provider.shutdown()


def test_real_agent_background_tool_outliving_the_root_without_a_wait_fails_closed(tmp_path):
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=0)
    provider, _ = _run_agent(processor)
    got = _by_name(list(exporter.get_finished_spans()))
    # The root and the read left at the root's end, knowing only the read: dynamic. The write
    # came after: review, so the most restrictive class on the trace's spans is review.
    assert got["invoke_agent streaming"][CLASS] == "dynamic"
    late = got["execute_tool close_order"]
    assert (late[CLASS], late[DECISION], late[REASONS], late[LATE], late[PARTIAL]) == ("review", "review", ["decided_before_complete"], True, True)
    (item,) = store.list()[0]
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    assert {s.step.call_id: s.decision for s in item.plan.steps} == {"call_get": pb.DECISION_REPLAY, "call_close": pb.DECISION_REVIEW}
    provider.shutdown()


# -- the service ---------------------------------------------------------------------------------


@needs_case
def test_service_tool_span_sent_after_max_wait_fails_closed(tmp_path, upstream):
    db = tmp_path / "r.db"
    service = TraceFenceService(service_config(upstream, db, max_wait_ms=300))
    service.start()
    client = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{service.port}", insecure=True, timeout=10)
    try:
        spans = {s.name: s for s in readable_spans(CASE)}
        # The two reads arrive; the root and the write do not within max_wait_ms.
        sent = time.monotonic()
        assert client.export([spans["execute_tool get_order"], spans["execute_tool get_customer"]]).name == "SUCCESS"
        first = upstream.wait_spans(2, TRACE_ID)
        assert time.monotonic() - sent >= 0.25
        for received in first:
            assert (received.tf[CLASS], received.tf[PARTIAL]) == ("dynamic", True)
        assert client.export([spans["execute_tool close_order"]]).name == "SUCCESS"  # after max_wait_ms
        late = {r.name: r.tf for r in upstream.wait_spans(3, TRACE_ID)}["execute_tool close_order"]
        assert (late[CLASS], late[DECISION], list(late[REASONS]), late[LATE], late[PARTIAL]) == ("review", "review", ["decided_before_complete"], True, True)
        assert client.export([spans["invoke_agent streaming"]]).name == "SUCCESS"
        root = {r.name: r.tf for r in upstream.wait_spans(4, TRACE_ID)}["invoke_agent streaming"]
        assert (root[CLASS], root[LATE]) == ("review", True)  # never back below review
        item = service.store.get(TRACE_ID)
        assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW and item.plan.partial is True
        assert {s.step.call_id: s.decision for s in item.plan.steps} == {"call_s1": pb.DECISION_REPLAY, "call_s2": pb.DECISION_REPLAY, "call_s3": pb.DECISION_REVIEW}
    finally:
        client.shutdown()
        service.stop(grace_s=0)


# -- the zero-code exporter ------------------------------------------------------------------------


@needs_case
def test_exporter_plans_children_of_the_roots_batch_with_it():
    """One batch in end-time order (the root first): the root is decided after the batch's other
    spans, so every span carries the CLI's class; a tool span of a later batch fails closed."""
    from otel_tracefence.sdk import TraceFenceSpanExporter

    inner = InMemorySpanExporter()
    exporter = TraceFenceSpanExporter(inner, review_sink=None)
    spans = end_time_order(readable_spans(CASE))
    assert exporter.export(spans).name == "SUCCESS"
    assert {s.name: _attrs(s)[CLASS] for s in inner.get_finished_spans()} == dict.fromkeys([s.name for s in spans], "injected")
    exporter.shutdown()

    inner = InMemorySpanExporter()
    exporter = TraceFenceSpanExporter(inner, review_sink=None)
    exporter.export(spans[:3])  # the root and both reads: decided dynamic
    assert {_attrs(s)[CLASS] for s in inner.get_finished_spans()} == {"dynamic"}
    exporter.export(spans[3:])  # the write, in the next batch
    late = _attrs(inner.get_finished_spans()[-1])
    assert (late[CLASS], late[DECISION], late[REASONS], late[LATE]) == ("review", "review", ["decided_before_complete"], True)
    exporter.shutdown()


# -- a late dispatch attempt -----------------------------------------------------------------------


def test_a_late_dispatch_attempt_fences_the_step_it_belongs_to(tmp_path):
    """A retry wrapper's inner tool span that ends after its trace was decided: the step it belongs
    to (committed, skip, already handed on) was decided without it, so the step is fenced too."""
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "close_order", "gen_ai.tool.call.id": "call_close"}
    with tracer.start_as_current_span("invoke_agent a"):
        outer = tracer.start_span("execute_tool close_order", attributes={**tool, "tracefence.effect": "write", "gen_ai.tool.call.result": "{}"})
        with trace.use_span(outer, end_on_exit=False):
            attempt = tracer.start_span("execute_tool close_order (attempt)", attributes=tool)
        outer.end()
    got = _by_name(list(exporter.get_finished_spans()))  # decided at the root's end: the attempt is still open
    assert got["execute_tool close_order"][DECISION] == "skip" and got["invoke_agent a"][CLASS] == "injected"
    attempt.end()
    late = _attrs(exporter.get_finished_spans()[-1])
    assert (late[CLASS], late[LATE], late[PARTIAL]) == ("review", True, True)
    (item,) = store.list()[0]
    (decision,) = item.plan.steps
    assert (decision.step.call_id, decision.decision, list(decision.reasons)) == ("call_close", pb.DECISION_REVIEW, ["decided_before_complete", "arguments_not_recorded"])
    assert decision.step.attempts == 1  # one attempt span under a step is its one dispatch, as the CLI counts it
    provider.shutdown()


# -- a trace pushed out of the decided cache -------------------------------------------------------


@needs_case
def test_a_late_read_of_a_forgotten_trace_still_fails_closed(tmp_path):
    """Past ``decided_cache_size`` a trace is remembered by id and class only; a late read of it is
    late all the same (review), never a new trace of its own (which would say dynamic)."""
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=0, decided_cache_size=1)
    spans = {s.name: s for s in readable_spans(CASE)}
    processor.on_end(spans["execute_tool close_order"])
    processor.on_end(spans["invoke_agent streaming"])  # decided: injected
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with provider.get_tracer("agent").start_as_current_span("invoke_agent other"):
        with tool_call("lookup", effect="read", tracer_provider=provider):
            pass  # one more decided trace: the first is forgotten
    processor.on_end(spans["execute_tool get_order"])
    late = _attrs(exporter.get_finished_spans()[-1])
    assert (late[CLASS], late[DECISION], late[REASONS], late[LATE]) == ("review", "review", ["decided_before_complete"], True)
    (item,) = [i for i in store.list()[0] if i.trace_id == TRACE_ID]
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    assert {s.step.call_id: s.decision for s in item.plan.steps} == {"call_s1": pb.DECISION_REVIEW}
    provider.shutdown()


@needs_case
def test_a_late_span_that_cannot_be_planned_carries_review(monkeypatch):
    """A failure of ours while planning a late span never lets it leave with the trace's earlier,
    safer class: it may be a tool step nobody planned."""
    from otel_tracefence.pipeline import late_spans  # where the late-span rules read a span as a step

    processor, exporter, _ = _processor(decision_wait_ms=0)
    spans = {s.name: s for s in readable_spans(CASE)}
    processor.on_end(spans["execute_tool get_order"])
    processor.on_end(spans["invoke_agent streaming"])  # decided: dynamic

    def broken(*args, **kwargs):
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(late_spans, "span_to_step", broken)
    processor.on_end(spans["execute_tool close_order"])
    late = _attrs(exporter.get_finished_spans()[-1])
    assert (late[CLASS], late[LATE]) == ("review", True)
    processor.shutdown()


# -- a pydantic-ai agent whose tool hands the work to a background task ------------------------------


def _run_pydantic_agent(processor: TraceFenceSpanProcessor) -> TracerProvider:
    """A real pydantic-ai agent (offline TestModel) inside a request span. Its tool ``close_order``
    hands the close to a background task, a sibling tool span under the request, and returns; the
    agent run and the request span end while the background close is still running."""
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    from otel_tracefence.agent.instrument import declare

    provider = TracerProvider(resource=Resource.create({"service.name": "pydantic-agent"}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    agent = Agent(TestModel(call_tools=["close_order"]))
    agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)
    background: list[asyncio.Task] = []
    request: dict[str, Any] = {}

    async def background_close(order: str, started: asyncio.Event) -> None:
        async with tool_call("orders.close", effect="write", idempotency_key=f"close-{order}", arguments={"order": order}, record_result=True, call_id=f"bg-{order}", tracer_provider=provider) as call:
            started.set()
            await asyncio.sleep(0.1)
            call.set_result({"closed": True})

    @agent.tool_plain
    async def close_order(order: str) -> str:
        declare("write", idempotency_key=f"schedule-{order}")
        started = asyncio.Event()
        # The background work belongs to the request, not to this tool call (not a dispatch attempt of it).
        background.append(request["context"].run(asyncio.create_task, background_close(order, started)))
        await started.wait()
        return "close scheduled"

    async def main() -> None:
        with tracer.start_as_current_span("POST /orders/close", attributes={"gen_ai.operation.name": "invoke_agent"}):
            request["context"] = contextvars.copy_context()
            result = await agent.run("close order o-5")
            assert result.output == '{"close_order":"close scheduled"}'
        await asyncio.gather(*background)  # the request span has ended; the close is still running

    asyncio.run(main())
    return provider


def test_real_pydantic_ai_agent_background_tool_outliving_the_root(tmp_path):
    processor, exporter, store = _processor(tmp_path)
    provider = _run_pydantic_agent(processor)
    finished = list(exporter.get_finished_spans())
    ends = {s.name: s.end_time for s in finished}
    assert ends["POST /orders/close"] < ends["execute_tool orders.close"]  # the root really ended first
    assert {s.name: _attrs(s).get(CLASS) for s in finished} == dict.fromkeys(ends, "injected")
    tools = {s.name: _attrs(s)[DECISION] for s in finished if DECISION in _attrs(s)}
    assert tools == {"execute_tool close_order": "skip", "execute_tool orders.close": "skip"}  # pydantic-ai's span and the background one
    assert store.list()[0] == []
    provider.shutdown()


def test_real_pydantic_ai_agent_background_tool_without_a_wait_fails_closed(tmp_path):
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=0)
    provider = _run_pydantic_agent(processor)
    finished = {s.name: _attrs(s) for s in exporter.get_finished_spans()}
    late = finished["execute_tool orders.close"]
    assert (late[CLASS], late[DECISION], late[REASONS], late[LATE]) == ("review", "review", ["decided_before_complete"], True)
    assert finished["POST /orders/close"][CLASS] == "injected"  # left before the close was known
    (item,) = store.list()[0]
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    provider.shutdown()


# -- the buffer's bounds on open spans ---------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _view(trace_id: str, span_id: str, parent: str | None = None) -> Any:
    from otel_tracefence.normalize import SpanView

    read = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{span_id}", "tracefence.effect": "read"}
    return SpanView(trace_id, span_id, f"span {span_id}", read if parent else {}, parent, start_time_unix_nano=1, end_time_unix_nano=2)


def _decided(items: list[Any]) -> list[tuple[str, bool]]:
    from otel_tracefence.pipeline.trace_buffer import Decided

    return [(d.trace_id, d.planned.plan.partial) for d in items if isinstance(d, Decided)]


def test_open_spans_are_tracked_within_the_bounds_and_past_them_the_whole_wait_applies():
    from otel_tracefence.pipeline.trace_buffer import TraceBuffer

    clock = _Clock()
    buffer: TraceBuffer[None] = TraceBuffer(TraceFenceConfig(max_traces=2, max_spans_per_trace=3), decision_wait_ms=500, clock=clock)
    a, b, c, d = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)
    for trace_id in (a, b, c):  # three traces start; only the last two fit: a is forgotten
        buffer.started(trace_id, "1" * 16)
        buffer.started(trace_id, "2" * 16)
    assert _decided(buffer.add(_view(b, "2" * 16, "1" * 16), None, local_root=False)) == []
    assert _decided(buffer.add(_view(b, "1" * 16), None, local_root=True)) == [(b, False)]  # nothing open: at once
    assert _decided(buffer.add(_view(a, "2" * 16, "1" * 16), None, local_root=False)) == []
    assert _decided(buffer.add(_view(a, "1" * 16), None, local_root=True)) == []  # untracked: waits
    for i in range(1, 5):  # d: more spans open than max_spans_per_trace can track
        buffer.started(d, str(i) * 16)
    assert _decided(buffer.add(_view(d, "2" * 16, "1" * 16), None, local_root=False)) == []
    assert _decided(buffer.add(_view(d, "1" * 16), None, local_root=True)) == []  # untracked: waits
    assert buffer.due() == []
    clock.now += 0.5
    # Waited out: a had nothing known open; d had spans open past what could be tracked (partial).
    assert sorted(_decided(buffer.due())) == [(a, False), (d, True)]
    # c: its root ended with a child still open; when the wait runs out, partial.
    assert _decided(buffer.add(_view(c, "1" * 16), None, local_root=True)) == []
    clock.now += 0.5
    assert _decided(buffer.due()) == [(c, True)]


def test_fail_closed_ranks_decided_before_complete_as_the_last_review_rule():
    from otel_tracefence.pipeline.trace_buffer import fail_closed
    from otel_tracefence.core.model import Effect, ToolStatus, ToolStep
    from otel_tracefence.planner import plan_trace

    def write(call_id: str, span_id: str, status: ToolStatus, start: int) -> ToolStep:
        return ToolStep("t", call_id, "pay", Effect.WRITE, status, span_id=span_id, idempotency_key="k", start_time_unix_nano=start)

    steps = [write("c1", "1" * 16, ToolStatus.OK, 1), write("c2", "2" * 16, ToolStatus.TIMEOUT, 2), write("c3", "3" * 16, ToolStatus.OK, 3)]
    plan = plan_trace("t", steps)
    before = {d.step.call_id: (d.decision.value, d.reasons) for d in plan.steps}
    fenced = fail_closed(plan, {"2" * 16, "3" * 16})
    after = {d.step.call_id: (d.decision.value, d.reasons) for d in fenced.steps}
    assert after["c1"] == before["c1"]  # on time: untouched
    # Fenced by other rules already: the code after theirs, before the notes.
    assert before["c3"] == ("review", ("idempotency_key_reused_arguments_unavailable", "result_not_recorded", "arguments_not_recorded"))
    assert after["c3"] == (
        "review",
        ("idempotency_key_reused_arguments_unavailable", "decided_before_complete", "result_not_recorded", "arguments_not_recorded"),
    )
    assert before["c2"][1][:2] == ("idempotency_key_reused_arguments_unavailable", "write_timeout")
    assert after["c2"][1][:3] == ("idempotency_key_reused_arguments_unavailable", "write_timeout", "decided_before_complete")
    assert fenced.partial is True and fenced.replay_class.value == "review"
    assert fail_closed(fenced, {"2" * 16}) == fenced  # applied once
    assert fail_closed(plan, set()) is plan


def test_every_reason_code_is_known_as_a_note_or_a_fencing_code():
    """``fail_closed`` puts ``decided_before_complete`` before the notes: a new code must be classed."""
    from otel_tracefence.core import reasons
    from otel_tracefence.core.reasons import NOT_FENCING, NOTES, TRACE_CODES

    codes = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str) and k != "MALFORMED_PREFIX"}
    fencing = {
        reasons.ARGUMENTS_TRUNCATED,
        reasons.RESULT_TRUNCATED,
        reasons.UNRECOGNIZED_TOOL_SPAN,
        reasons.REQUESTED_CALL_UNREAD,
        reasons.EFFECT_HINTS_CONFLICT,
        reasons.EFFECT_CONTRADICTED_BY_DISPATCH,  # issue 24 E (DECISIONS 424)
        reasons.CHILD_SPAN_UNREAD,
        reasons.LATE_REQUEST_UNTIED,
        reasons.TRACE_ROOT_MISSING,
        reasons.SPAN_DATA_DROPPED,
        reasons.STATUS_EVIDENCE_CONFLICT,
        reasons.IDEMPOTENCY_KEY_CONFLICT,
        reasons.CALL_ID_EXECUTED_MORE_THAN_ONCE,
        reasons.IDEMPOTENCY_KEY_REUSED_ARGUMENTS_UNAVAILABLE,
        reasons.EFFECT_UNKNOWN,
        reasons.WRITE_TIMEOUT,
        reasons.WRITE_STATUS_UNKNOWN,
        reasons.WRITE_ERROR,
        reasons.WRITE_DISPATCHED_MORE_THAN_ONCE,
        reasons.REPEAT_ARGUMENTS_UNCOMPARED,  # DECISIONS 501
        reasons.REPEATS_EARLIER_WRITE,
        reasons.DECIDED_BEFORE_COMPLETE,
        reasons.UNRECOGNIZED_FAILURE_EVIDENCE,  # docs/DECISIONS.md 400
        reasons.WRITE_OUTCOME_UNRECORDED,  # 401
        reasons.RETRY_OF_HELD_WRITE,  # across traces, 590
        reasons.IDEMPOTENCY_KEY_REUSED_ACROSS_TRACES,  # 590
    }
    assert codes - NOTES - NOT_FENCING - TRACE_CODES - fencing == set()
    assert not (NOTES & fencing) and not (NOT_FENCING & fencing) and not (TRACE_CODES & (NOTES | NOT_FENCING | fencing))


def test_late_tool_activity_no_convention_reads_fails_closed_too(tmp_path):
    """A span of an unknown convention that looks like a tool call, arriving after its trace was
    decided, holds the trace like a late tool span: it never leaves with the earlier class."""
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        with tool_call("lookup", effect="read", tracer_provider=provider):
            pass
        late = tracer.start_span("myframework.run_tool", attributes={"myframework.tool_id": "wire_money"})
    late.end()  # after the root: the trace was decided dynamic
    spans = _by_name(exporter.get_finished_spans())
    assert spans["invoke_agent ops"][CLASS] == "dynamic"
    assert (spans["myframework.run_tool"][CLASS], spans["myframework.run_tool"][DECISION], spans["myframework.run_tool"][REASONS]) == (
        "review", "review", ["unrecognized_tool_span", "effect_unknown", "decided_before_complete", "arguments_not_recorded"])
    (item,) = store.list()[0]
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    assert root.get_span_context().trace_id == int(item.trace_id, 16)
    provider.shutdown()


# -- linear cost past the bounds (issue 9) ---------------------------------------------------------


def test_processor_past_max_spans_per_trace_plans_once_per_chunk_not_per_span(tmp_path, monkeypatch):
    """450 tool spans end under a root still open, with ``max_spans_per_trace`` 100: the trace is planned at its
    bound, then once per chunk of 100 later spans and once for the last chunk with the root: 5 planner calls,
    not one per late span. Every span is handed on once; every tool span past the bound is fenced."""
    import otel_tracefence.pipeline.trace_buffer as buffer_module
    import otel_tracefence.pipeline.plan as pipeline_module

    calls: list[int] = []

    def counting(real):
        def plan(trace_id, steps, **kwargs):
            steps = list(steps)
            calls.append(len(steps))
            return real(trace_id, steps, **kwargs)

        return plan

    monkeypatch.setattr(buffer_module, "plan_trace", counting(buffer_module.plan_trace))
    monkeypatch.setattr(pipeline_module, "plan_trace", counting(pipeline_module.plan_trace))
    processor, exporter, store = _processor(tmp_path, decision_wait_ms=60_000, max_spans_per_trace=100)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("giant")
    with tracer.start_as_current_span("invoke_agent giant"):
        for i in range(450):
            with tool_call("kb.lookup", effect="read", call_id=f"call-{i}", tracer_provider=provider):
                pass
    assert calls == [100, 200, 200, 200, 150]  # the first plan: 100 steps; each re-plan: a window of the latest 100 and its chunk
    spans = list(exporter.get_finished_spans())
    assert len(spans) == 451 and len({s.context.span_id for s in spans}) == 451
    tools = [_attrs(s) for s in spans if s.name.startswith("execute_tool")]
    late = [a for a in tools if a.get(LATE)]
    assert len(late) == 350
    assert {(a[CLASS], a[DECISION], a[REASONS][0]) for a in late} == {("review", "review", "decided_before_complete")}
    (item,) = store.list()[0]
    assert len(item.plan.steps) == 450 and item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    processor.shutdown()


def test_late_spans_of_one_trace_arriving_together_are_one_batch_and_one_re_plan(monkeypatch):
    """A trace decided at its root, then four late spans of it in one batch (three tool spans, one redelivered
    span): one re-plan for the batch, one LateBatch, each late tool step fenced, the redelivered span the same
    call as before."""
    import otel_tracefence.pipeline.trace_buffer as buffer_module
    from otel_tracefence.pipeline.trace_buffer import LateBatch, TraceBuffer

    calls: list[int] = []
    real = buffer_module.plan_trace
    monkeypatch.setattr(buffer_module, "plan_trace", lambda trace_id, steps, **kw: calls.append(len(list(steps))) or real(trace_id, steps, **kw))
    buffer = TraceBuffer(TraceFenceConfig(review_db=""), decision_wait_ms=0)
    t = "ab" * 16
    assert _decided(buffer.add(_view(t, "2" * 16, "1" * 16), None, local_root=False)) == []
    assert _decided(buffer.add(_view(t, "1" * 16), None, local_root=True)) == [(t, False)]
    late = [(_view(t, f"{i}" * 16, "1" * 16), None, False) for i in (3, 4, 5)] + [(_view(t, "2" * 16, "1" * 16), None, False)]
    (batch,) = buffer.add_batch(late)
    assert isinstance(batch, LateBatch) and calls == [4]  # one re-plan: the decided step and the three late ones
    assert [(s.view.span_id, s.replay_class, s.step_decision.decision.value, s.step_decision.reasons[0]) for s in batch.spans[:3]] == [
        (f"{i}" * 16, "review", "review", "decided_before_complete") for i in (3, 4, 5)
    ]
    again = batch.spans[3]
    # Its class is the trace's latest (review, after the late steps), its step decision the one it had.
    assert (again.view.span_id, again.replay_class, again.step_decision.decision.value) == ("2" * 16, "review", "replay")
    assert [d.step.span_id for d in batch.plan.steps] == ["2" * 16, "3" * 16, "4" * 16, "5" * 16]
