"""Late spans that are not tool steps but change their trace's plan (s21 trial F3; docs/DECISIONS.md 270):
HTTP requests below a step that arrive after the trace was decided (a second dispatch, a 5xx), and a model span
asking for a call no tool span records. Both doors: the SDK processor on a real TracerProvider, and a real
``tracefence serve`` with the SDK's OTLP/gRPC exporter as client; real SQLite review queues.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from service_helpers import Client, service_config
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.service.server import TraceFenceService

CLASS, LATE, PARTIAL, DECISION = "tracefence.replay.class", "tracefence.trace.late", "tracefence.trace.partial", "tracefence.step.decision"
WRITE = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "call_1", "tracefence.effect": "write",
         "gen_ai.tool.call.arguments": '{"customer":"c-9","amount_cents":1200}', "gen_ai.tool.call.result": '{"invoice":"in_1"}'}
READ = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "customer.lookup", "gen_ai.tool.call.id": "call_1", "tracefence.effect": "read",
        "gen_ai.tool.call.arguments": '{"customer":"c-9"}', "gen_ai.tool.call.result": '{"name":"acme"}'}
LOOKUP = {"type": "tool_call", "id": "call_1", "name": "customer.lookup", "arguments": {"customer": "c-9"}}
CHARGE = {"type": "tool_call", "id": "call_2", "name": "payments.charge", "arguments": {"amount": 5}}
# What a late 504 and a second POST make of the write: the whole trace planned at once says review with
# write_error and write_dispatched_more_than_once (tracefence plan); late, the step is fenced as decided too soon.
DISPATCHED_LATE = ["write_error", "write_dispatched_more_than_once", "decided_before_complete", "error_in_result"]


def _decided_trace(tracer: Any, tool: dict[str, str]) -> tuple[Any, Any]:
    """An agent turn whose one tool span ends before its root: ``(root, tool span)``, both ended."""
    root = tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
    with trace.use_span(root, end_on_exit=False):
        step = tracer.start_span(f"execute_tool {tool['gen_ai.tool.name']}", attributes=tool)
        step.end()
    root.end()
    return root, step


def _post(tracer: Any, under: Any, status_code: int) -> None:
    """An HTTP client POST below ``under`` (the billing API it dispatched to), its span ended."""
    attributes = {"http.request.method": "POST", "url.full": "https://billing/api/invoices", "http.response.status_code": status_code}
    span = tracer.start_span("POST", kind=SpanKind.CLIENT, context=trace.set_span_in_context(under), attributes=attributes)
    if status_code >= 500:
        span.set_status(Status(StatusCode.ERROR))
    span.end()


def _chat(tracer: Any, under: Any, *calls: dict) -> None:
    """A model span below ``under`` whose recorded output asks for ``calls``, ended."""
    output = json.dumps([{"role": "assistant", "parts": list(calls), "finish_reason": "tool_call"}])
    tracer.start_span("chat gpt-4o", context=trace.set_span_in_context(under), attributes={"gen_ai.operation.name": "chat", "gen_ai.output.messages": output}).end()


def _processor(tmp_path: Path) -> tuple[TracerProvider, InMemorySpanExporter, SQLiteReviewStore]:
    exporter, store = InMemorySpanExporter(), SQLiteReviewStore(tmp_path / "review.db")
    provider = TracerProvider()
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=store, decision_wait_ms=0))
    return provider, exporter, store


def _attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _steps(store: Any, trace_id: str) -> dict[str, tuple[int, list[str]]]:
    item = store.get(trace_id)
    assert item is not None, "no review item"
    assert (item.plan.replay_class, item.plan.partial) == (pb.REPLAY_CLASS_REVIEW, True)
    return {d.step.call_id: (d.decision, list(d.reasons)) for d in item.plan.steps}


# -- the processor -------------------------------------------------------------------------------


def test_processor_late_dispatches_below_a_decided_write_fence_it_and_write_a_review_item(tmp_path):
    provider, exporter, store = _processor(tmp_path)
    tracer = provider.get_tracer("agent")
    root, step = _decided_trace(tracer, WRITE)
    trace_id = format(root.get_span_context().trace_id, "032x")
    assert {_attrs(s)[CLASS] for s in exporter.get_finished_spans()} == {"injected"}  # decided at the root's end
    assert store.get(trace_id) is None
    _post(tracer, step, 504)
    _post(tracer, step, 200)
    late = [_attrs(s) for s in exporter.get_finished_spans()[2:]]
    assert [(a[CLASS], a[LATE], a[PARTIAL], DECISION in a) for a in late] == [("review", True, True, False)] * 2
    assert _steps(store, trace_id) == {"call_1": (pb.DECISION_REVIEW, DISPATCHED_LATE)}
    assert store.get(trace_id).plan.steps[0].step.attempts == 2
    provider.shutdown()


def test_processor_late_model_span_asking_for_an_unrecorded_call_writes_a_review_item(tmp_path):
    provider, exporter, store = _processor(tmp_path)
    tracer = provider.get_tracer("agent")
    root, _ = _decided_trace(tracer, READ)
    trace_id = format(root.get_span_context().trace_id, "032x")
    assert {_attrs(s)[CLASS] for s in exporter.get_finished_spans()} == {"dynamic"}
    _chat(tracer, root, LOOKUP, CHARGE)
    chat = _attrs(exporter.get_finished_spans()[-1])
    assert (chat[CLASS], chat[LATE], chat[PARTIAL]) == ("review", True, True)
    assert _steps(store, trace_id) == {
        "call_1": (pb.DECISION_REPLAY, ["declared_read"]),
        "call_2": (pb.DECISION_REVIEW, ["effect_unknown", "decided_before_complete", "requested_not_recorded"]),
    }
    provider.shutdown()


@pytest.mark.parametrize("late", ["get-200", "chat-recorded-call"])
def test_processor_late_spans_that_change_nothing_keep_the_class_and_write_no_item(tmp_path, late):
    """A safe request that went well, and a model span asking only for a call a tool span records: the plan is
    the one handed on, so the late span carries its class and no review item is written."""
    provider, exporter, store = _processor(tmp_path)
    tracer = provider.get_tracer("agent")
    root, step = _decided_trace(tracer, READ)
    trace_id = format(root.get_span_context().trace_id, "032x")
    if late == "get-200":
        tracer.start_span("GET", kind=SpanKind.CLIENT, context=trace.set_span_in_context(step),
                          attributes={"http.request.method": "GET", "url.full": "https://crm/customers/c-9", "http.response.status_code": 200}).end()
    else:
        _chat(tracer, root, LOOKUP)
    got = _attrs(exporter.get_finished_spans()[-1])
    assert (got[CLASS], got[LATE], PARTIAL in got) == ("dynamic", True, False)
    assert store.get(trace_id) is None
    provider.shutdown()


# -- the service ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["dispatches", "chat"])
def test_service_late_non_tool_spans_that_change_the_plan_fail_closed(tmp_path, upstream, case):
    """``tracefence serve`` with the SDK's OTLP/gRPC exporter as client: the trace is decided and handed on, then its
    late spans come in a later Export call."""
    service = TraceFenceService(service_config(upstream, tmp_path / "r.db"))
    service.start()
    client = Client(service.port, batch=True)
    try:
        root, step = _decided_trace(client.tracer, WRITE if case == "dispatches" else READ)
        trace_id = format(root.get_span_context().trace_id, "032x")
        assert client.send().name == "SUCCESS"
        decided = upstream.wait_spans(2, trace_id)
        assert {r.tf[CLASS] for r in decided} == {"injected" if case == "dispatches" else "dynamic"}
        if case == "dispatches":
            _post(client.tracer, step, 504)
            _post(client.tracer, step, 200)
        else:
            _chat(client.tracer, root, LOOKUP, CHARGE)
        assert client.send().name == "SUCCESS"
        late = [r.tf for r in upstream.wait_spans(4 if case == "dispatches" else 3, trace_id)[2:]]
        assert [(a[CLASS], a[LATE], a[PARTIAL]) for a in late] == [("review", True, True)] * len(late)
        expected = (
            {"call_1": (pb.DECISION_REVIEW, DISPATCHED_LATE)}
            if case == "dispatches"
            else {"call_1": (pb.DECISION_REPLAY, ["declared_read"]), "call_2": (pb.DECISION_REVIEW, ["effect_unknown", "decided_before_complete", "requested_not_recorded"])}
        )
        assert _steps(service.store, trace_id) == expected
    finally:
        client.shutdown()
        service.stop(grace_s=0)


# -- the replay guard on a file a door wrote -------------------------------------------------------

LATE_TRACE, WHOLE_TRACE, OTHER_TRACE = "3fa9" + "1" * 28, "3fb0" + "2" * 28, "7a00" + "3" * 28


def _otlp_span(trace_id: str, span_id: str, name: str, attributes: dict[str, Any], parent: str = "") -> dict:
    values = [{"key": k, "value": {"boolValue": v} if isinstance(v, bool) else {"stringValue": v}} for k, v in attributes.items()]
    return {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000", "attributes": values}


def _service_output(path: Path) -> Path:
    """An OTLP/JSON file as the service forwards spans: three traces of one declared read (class dynamic);
    ``LATE_TRACE`` also holds a database span that came after its trace was decided (``tracefence.trace.late``)."""
    spans = []
    for trace_id in (LATE_TRACE, WHOLE_TRACE, OTHER_TRACE):
        spans += [_otlp_span(trace_id, "a" * 16, "invoke_agent billing", {"gen_ai.operation.name": "invoke_agent", CLASS: "dynamic"}),
                  _otlp_span(trace_id, "b" * 16, "execute_tool customer.lookup", {**READ, CLASS: "dynamic"}, "a" * 16)]
    spans.append(_otlp_span(LATE_TRACE, "c" * 16, "SELECT customers", {"db.system": "postgresql", CLASS: "dynamic", LATE: True}, "a" * 16))
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}))
    return path


def test_guard_refuses_a_trace_whose_spans_came_late(tmp_path):
    """DECISIONS 193 and 271: a trace decided before it was complete is partial, and the guard vouches for no partial plan."""
    from otel_tracefence.agent.replay import NonReplayableTraceError, ReplayGuard

    path = _service_output(tmp_path / "spans.otlp.json")
    with pytest.raises(NonReplayableTraceError, match="is partial .*spans came after it was decided") as refused:
        ReplayGuard.from_file(path, LATE_TRACE, mode="dynamic")
    assert (refused.value.trace_id, refused.value.step) == (LATE_TRACE, None)
    assert ReplayGuard.from_file(path, WHOLE_TRACE, mode="dynamic").trace_id == WHOLE_TRACE  # the same trace without a late span


def test_guard_takes_a_trace_id_in_any_case_or_a_unique_prefix_as_review_show_does(tmp_path):
    from otel_tracefence.agent.replay import ReplayGuard

    path = _service_output(tmp_path / "spans.otlp.json")
    assert ReplayGuard.from_file(path, WHOLE_TRACE.upper(), mode="dynamic").trace_id == WHOLE_TRACE
    assert ReplayGuard.from_file(path, "3FB", mode="dynamic").trace_id == WHOLE_TRACE
    with pytest.raises(ValueError, match=f"trace id prefix '3F' matches 2 traces with tool steps: {LATE_TRACE}, {WHOLE_TRACE}; give more of the id"):
        ReplayGuard.from_file(path, "3F")
    with pytest.raises(ValueError, match="no trace 3FC with tool steps"):
        ReplayGuard.from_file(path, "3FC")
    with pytest.raises(ValueError, match="an empty trace id names no trace"):
        ReplayGuard.from_file(path, " ")


def test_service_late_write_with_its_dispatches_in_one_export_is_read_whole(tmp_path, upstream):
    """A late write step and its two POSTs in one Export call, children first (they end first): the POSTs are read
    against the step that comes after them in the batch, so the item says what the whole trace says, fenced."""
    service = TraceFenceService(service_config(upstream, tmp_path / "r.db"))
    service.start()
    client = Client(service.port, batch=True)
    try:
        root = client.tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
        with trace.use_span(root, end_on_exit=False):
            client.tracer.start_span("execute_tool customer.lookup", attributes=READ).end()
            step = client.tracer.start_span("execute_tool invoice.create", attributes={**WRITE, "gen_ai.tool.call.id": "call_2"})
        root.end()
        trace_id = format(root.get_span_context().trace_id, "032x")
        early = [s for s in client.sent.get_finished_spans() if s.name != step.name]
        assert client.exporter.export(early).name == "SUCCESS"
        assert {r.tf[CLASS] for r in upstream.wait_spans(2, trace_id)} == {"dynamic"}
        _post(client.tracer, step, 504)
        _post(client.tracer, step, 200)
        step.end()
        assert client.exporter.export(client.sent.get_finished_spans()[2:]).name == "SUCCESS"
        late = upstream.wait_spans(5, trace_id)[2:]
        assert [(r.name, r.tf[CLASS]) for r in late] == [("POST", "review"), ("POST", "review"), ("execute_tool invoice.create", "review")]
        assert _steps(service.store, trace_id) == {"call_1": (pb.DECISION_REPLAY, ["declared_read"]), "call_2": (pb.DECISION_REVIEW, DISPATCHED_LATE)}
    finally:
        client.shutdown()
        service.stop(grace_s=0)


# -- late requests the buffer cannot tie to a step (s21 trial T2; docs/DECISIONS.md 295) ----------------------


def _decided_with_middleware(tracer: Any, *, posted: bool) -> tuple[Any, Any]:
    """An agent turn whose write step holds a ``middleware`` span (and, with ``posted``, the POST it sent below it),
    all ended before the root: ``(root, middleware span)``."""
    root = tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
    with trace.use_span(root, end_on_exit=False):
        step = tracer.start_span(f"execute_tool {WRITE['gen_ai.tool.name']}", attributes=WRITE)
        middleware = tracer.start_span("middleware", context=trace.set_span_in_context(step))
        if posted:
            _post(tracer, middleware, 200)
        middleware.end()
        step.end()
    root.end()
    return root, middleware


# The untied request's own step: a POST is a write by its method (hinted), its arguments are not recorded.
UNTIED = {
    "failed": ["late_request_untied", "write_error", "decided_before_complete", "arguments_not_recorded"],
    "second-dispatch": ["late_request_untied", "decided_before_complete", "result_not_recorded", "arguments_not_recorded"],
}


@pytest.mark.parametrize("case", ["failed", "second-dispatch"])
def test_service_late_request_below_a_span_between_it_and_the_step_fails_closed(tmp_path, upstream, case):
    """A late POST below a span that is below the write step (not its direct child): the buffer does not remember
    the span between, so the request is tied to no step. Before, the trace stayed ``injected`` with no item
    (planned on time it is review: ``write_error``, or ``write_dispatched_more_than_once``); now the request is a
    review step of its own, ``late_request_untied``, fenced, and the trace is review with its item."""
    service = TraceFenceService(service_config(upstream, tmp_path / "r.db"))
    service.start()
    client = Client(service.port, batch=True)
    try:
        root, middleware = _decided_with_middleware(client.tracer, posted=case == "second-dispatch")
        trace_id = format(root.get_span_context().trace_id, "032x")
        early = 4 if case == "second-dispatch" else 3
        assert client.send().name == "SUCCESS"
        assert {r.tf[CLASS] for r in upstream.wait_spans(early, trace_id)} == {"injected"}
        _post(client.tracer, middleware, 503 if case == "failed" else 200)
        assert client.send().name == "SUCCESS"
        late = upstream.wait_spans(early + 1, trace_id)[early:]
        assert [(r.name, r.tf[CLASS], r.tf[LATE], r.tf[PARTIAL]) for r in late] == [("POST", "review", True, True)]
        post_id = format(client.sent.get_finished_spans()[-1].get_span_context().span_id, "016x")
        assert _steps(service.store, trace_id) == {
            "call_1": (pb.DECISION_SKIP, ["write_committed"]),
            post_id: (pb.DECISION_REVIEW, UNTIED[case]),
        }
    finally:
        client.shutdown()
        service.stop(grace_s=0)
