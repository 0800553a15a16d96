"""Retries across traces in the span processor (issue 25, docs/DECISIONS.md 590-594): the processor's
write index remembers the writes of the traces it decided, so an agent run again after a timed-out
write gets the retry held, linked to the first trace, on the spans it exports and in its review item."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor


def _run(tracer, *, timed_out: bool, amount: int = 1200) -> str:
    with tracer.start_as_current_span("invoke_agent billing") as root:
        with tracer.start_as_current_span("execute_tool invoice.create") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "invoice.create")
            span.set_attribute("gen_ai.tool.call.id", "call-1")
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"customer": "c-1", "amount_cents": amount, "idempotency_key": "inv-9"}))
            span.set_attribute("tracefence.effect", "write")
            if timed_out:
                span.set_attribute("error.type", "TimeoutError")
                span.set_status(Status(StatusCode.ERROR, "timed out"))
            else:
                span.set_attribute("gen_ai.tool.call.result", json.dumps({"invoice": "in_1"}))
                span.set_status(Status(StatusCode.OK))
        return format(root.get_span_context().trace_id, "032x")


def test_a_retry_in_a_new_trace_is_held_and_names_the_trace_it_retries(tmp_path):
    exporter = InMemorySpanExporter()
    store = SQLiteReviewStore(tmp_path / "review.db")
    provider = TracerProvider()
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=store, decision_wait_ms=0))
    tracer = provider.get_tracer("agent")
    first = _run(tracer, timed_out=True)
    retry = _run(tracer, timed_out=False)
    reused = _run(tracer, timed_out=False, amount=990)
    provider.force_flush()
    tools = {format(s.context.trace_id, "032x"): dict(s.attributes) for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")}
    assert [tools[t]["tracefence.step.decision"] for t in (first, retry, reused)] == ["review", "review", "conflict"]
    assert list(tools[retry]["tracefence.step.reasons"]) == ["retry_of_held_write"]
    assert list(tools[retry]["tracefence.related_traces"]) == [first]
    assert list(tools[reused]["tracefence.step.reasons"]) == ["idempotency_key_reused_across_traces"]
    assert list(tools[reused]["tracefence.related_traces"]) == [first, retry]
    assert "tracefence.related_traces" not in tools[first]
    items, _ = store.list(page_size=10)
    held = {i.trace_id: [(r.trace_id, r.call_id, r.reason) for r in i.plan.steps[0].related_traces] for i in items}
    assert held == {
        first: [],
        retry: [(first, "call-1", "retry_of_held_write")],
        reused: [(first, "call-1", "idempotency_key_reused_across_traces"), (retry, "call-1", "idempotency_key_reused_across_traces")],
    }
    provider.shutdown()
