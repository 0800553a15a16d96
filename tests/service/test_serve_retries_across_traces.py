"""Retries across traces through ``tracefence serve`` (issue 25, docs/DECISIONS.md 590-594): the issue's
three traces in three Export requests from the SDK's OTLP exporter, into one service and one review DB."""

from __future__ import annotations

from opentelemetry import trace

from service_helpers import Client, RecordingUpstream, service_config, timed_out_write
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.service.server import TraceFenceService


def _turn(client: Client, *, timed_out: bool, amount: int = 1250) -> str:
    root = client.tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
    with trace.use_span(root, end_on_exit=True):
        if timed_out:
            timed_out_write(client, "invoice.create", "inv-9", amount_cents=amount)
        else:
            with client.tool("invoice.create", effect="write", idempotency_key="inv-9", arguments={"amount_cents": amount}, record_result=True, call_id="call-invoice.create") as call:
                call.set_result({"invoice": "in_1"})
    return format(root.get_span_context().trace_id, "032x")


def test_the_retry_and_the_reused_key_are_held_naming_the_first_trace(tmp_path):
    upstream = RecordingUpstream()
    upstream.start()
    service = TraceFenceService(service_config(upstream, tmp_path / "review.db"))
    service.start()
    client = Client(service.port)
    try:
        first = _turn(client, timed_out=True)
        upstream.wait_spans(2, trace_id=first, timeout=30)
        retry = _turn(client, timed_out=False)
        upstream.wait_spans(2, trace_id=retry, timeout=30)
        reused = _turn(client, timed_out=False, amount=990)
        upstream.wait_spans(2, trace_id=reused, timeout=30)
        tools = {t: next(s.tf for s in upstream.trace(t) if "tracefence.step.decision" in s.tf) for t in (first, retry, reused)}
        assert [(tools[t]["tracefence.step.decision"], list(tools[t]["tracefence.step.reasons"])) for t in (first, retry, reused)] == [
            ("review", ["write_timeout"]),
            ("review", ["retry_of_held_write"]),
            ("conflict", ["idempotency_key_reused_across_traces"]),
        ]
        assert [list(tools[t].get("tracefence.related_traces", [])) for t in (first, retry, reused)] == [[], [first], [first, retry]]
    finally:
        client.shutdown()
        service.stop(grace_s=2)
        upstream.stop()
    items, _ = SQLiteReviewStore(tmp_path / "review.db").list(page_size=10)
    links = {i.trace_id: [(r.trace_id, r.reason) for d in i.plan.steps for r in d.related_traces] for i in items}
    assert links == {
        first: [],
        retry: [(first, "retry_of_held_write")],
        reused: [(first, "idempotency_key_reused_across_traces"), (retry, "idempotency_key_reused_across_traces")],
    }
    later = {i.trace_id: [(r.trace_id, r.reason) for r in i.later_traces] for i in items}  # and back: "both items link each other"
    assert later == {
        first: [(retry, "retry_of_held_write"), (reused, "idempotency_key_reused_across_traces")],
        retry: [(reused, "idempotency_key_reused_across_traces")],
        reused: [],
    }
