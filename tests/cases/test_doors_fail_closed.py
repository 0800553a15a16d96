"""The fail-open defects left by the fifth trials (s22, docs/DECISIONS.md 300-319): exact decisions, reasons and
classes through the doors a user runs (``tracefence plan`` as a subprocess, the service, the processor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from otlp_json_helpers import json_span
from cli_helpers import run

TRACE = "5a" * 16
ROOT_SPAN, MIDDLE, TOOL = "aa" * 8, "cc" * 8, "bb" * 8


def _span(span_id: str, name: str, parent: str = "", **fields: Any) -> dict:
    return json_span(TRACE, span_id, name, parent, **fields)


def _file(path: Path, *spans: dict) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]}))
    return path


def _tool(tool: str, effect: str, parent: str = ROOT_SPAN, span_id: str = TOOL, **extra: Any) -> dict:
    """A tool step that ended ok with its arguments and result recorded."""
    return _span(span_id, f"execute_tool {tool}", parent, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": "call-1",
                 "tracefence.effect": effect, "gen_ai.tool.call.arguments": '{"amount": 5}', "gen_ai.tool.call.result": '{"id": "ch_1"}', **extra})  # fmt: skip


def _gate(path: Path, fail_on: str) -> tuple[int, dict, list[str]]:
    proc = run("plan", str(path), "--fail-on", fail_on)
    (line,) = proc.stdout.splitlines()
    return proc.returncode, json.loads(line), proc.stderr.splitlines()


# --- 1. --fail-on fails a partial trace, whatever its class (DECISIONS 300) ---------------------------------


PARTIAL_CAUSE = "partial (decided before it was complete, or not whole in this file: steps may be missing)"


def test_fail_on_fails_a_partial_injected_trace(tmp_path: Path) -> None:
    # The root is here, the span between it and the write is not: an `injected` trace, partial. `--fail-on static` passed it.
    path = _file(tmp_path / "t.json", _span(ROOT_SPAN, "invoke_agent a"), _tool("payments.charge", "write", parent=MIDDLE))
    for fail_on in ("injected", "static", "review"):
        code, plan, stderr = _gate(path, fail_on)
        assert (plan["replayClass"], plan["partial"]) == ("injected", True)
        assert code == 1
        cause = "write_committed (call call-1)" if fail_on == "injected" else PARTIAL_CAUSE
        assert stderr == [f"tracefence plan: {path}: fail-on {fail_on}: trace {TRACE}: class injected (partial): {cause}"]


@pytest.mark.parametrize("flag", [("tracefence.trace.late", True), ("tracefence.trace.partial", "true"), ("tracefence.trace.reasons", "evicted")])
def test_fail_on_fails_a_trace_a_door_flagged_partial_or_late_even_dynamic_or_tool_free(tmp_path: Path, flag: tuple[str, Any]) -> None:
    key, value = flag
    dynamic = _file(tmp_path / "d.json", _span(ROOT_SPAN, "invoke_agent a"), _tool("accounts.get", "read", **{key: value}))
    code, plan, stderr = _gate(dynamic, "review")
    assert (code, plan["replayClass"], plan["partial"]) == (1, "dynamic", True)
    assert stderr == [f"tracefence plan: {dynamic}: fail-on review: trace {TRACE}: class dynamic (partial): {PARTIAL_CAUSE}"]
    tool_free = _file(tmp_path / "n.json", _span(ROOT_SPAN, "invoke_agent a", **{key: value}))
    code, plan, stderr = _gate(tool_free, "review")
    assert (code, plan["replayClass"], plan["partial"]) == (1, None, True)
    assert stderr == [f"tracefence plan: {tool_free}: fail-on review: trace {TRACE}: class none (partial): {PARTIAL_CAUSE}"]
    whole = _file(tmp_path / "w.json", _span(ROOT_SPAN, "invoke_agent a"), _tool("accounts.get", "read", **{key: False}))
    code, plan, stderr = _gate(whole, "injected")
    assert (code, plan["replayClass"], plan["partial"], stderr) == (0, "dynamic", False, [])


# --- 2. a trace decided partial with no root span holds its writes (DECISIONS 301, supersedes 297's limit) ---

ROOTLESS_WHY = (f"no span of the trace is its root: span {TOOL} names the parent {ROOT_SPAN}, which is not in the trace; "
                "the part of the trace not seen may hold an earlier attempt of this call, so it cannot be judged")  # fmt: skip


def _decisions(plan: dict) -> list[tuple[str, str, list[str]]]:
    return [(s["step"]["tool"], s["decision"], s["reasons"]) for s in plan["steps"]]


def test_cli_a_rootless_write_is_held_and_a_rootless_read_is_not(tmp_path: Path) -> None:
    # The forgotten trace's late write, as the service's output file or any export holds it: `injected`, partial, before.
    path = _file(tmp_path / "w.json", _tool("payments.charge", "write"), _span("dd" * 8, "POST", TOOL, **{"http.request.method": "POST", "http.response.status_code": 200}))
    proc = run("plan", str(path))
    assert proc.returncode == 0 and proc.stderr == ""  # the file is not malformed: nothing to warn of
    plan = json.loads(proc.stdout)
    assert (plan["replayClass"], plan["partial"]) == ("review", True)
    assert _decisions(plan) == [("payments.charge", "review", ["trace_root_missing"])]
    assert plan["steps"][0]["step"]["malformed"] == [{"field": "parent_span_id", "message": ROOTLESS_WHY}]
    read = _file(tmp_path / "r.json", _tool("accounts.get", "read"))
    plan = json.loads(run("plan", str(read)).stdout)
    assert (plan["replayClass"], plan["partial"], _decisions(plan)) == ("dynamic", True, [("accounts.get", "replay", ["declared_read"])])
    # The root is here, a span between is not: not rootless, the write is judged (partial all the same, 300).
    rooted = _file(tmp_path / "m.json", _span(ROOT_SPAN, "invoke_agent a"), _tool("payments.charge", "write", parent=MIDDLE))
    plan = json.loads(run("plan", str(rooted)).stdout)
    assert (plan["replayClass"], _decisions(plan)) == ("injected", [("payments.charge", "skip", ["write_committed"])])


from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from service_helpers import Client, separate_runs, service_config

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.service.server import TraceFenceService

CHARGE = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge", "tracefence.effect": "write",
          "gen_ai.tool.call.arguments": '{"amount": 5}', "gen_ai.tool.call.result": '{"id": "ch_1"}'}  # fmt: skip
FORGET = 3  # decided_cache_size=1 and FORGOTTEN_FACTOR=2: three more decided traces and the first is not known at all


def _turn(tracer: Any, call_id: str) -> Any:
    """An agent turn with one committed write, ended; its root span."""
    root = tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
    with otel_trace.use_span(root, end_on_exit=False):
        tracer.start_span("execute_tool payments.charge", attributes={**CHARGE, "gen_ai.tool.call.id": call_id}).end()
    root.end()
    return root


def _late_write(tracer: Any, root: Any) -> str:
    """A second charge below ``root``, after its trace was decided and forgotten; its span id (hex)."""
    span = tracer.start_span("execute_tool payments.charge", context=otel_trace.set_span_in_context(root), attributes={**CHARGE, "gen_ai.tool.call.id": "call-late"})
    span.end()
    return format(span.get_span_context().span_id, "016x")


def _held_item(store: Any, trace_id: str) -> list[tuple[str, int, list[str]]]:
    item = store.get(trace_id)
    assert item is not None, "no review item"
    assert (item.plan.replay_class, item.plan.partial) == (pb.REPLAY_CLASS_REVIEW, True)
    return [(d.step.call_id, d.decision, list(d.reasons)) for d in item.plan.steps]


HELD = [("call-late", pb.DECISION_REVIEW, ["trace_root_missing"])]


def test_service_a_late_write_of_a_forgotten_trace_is_held_root_missing(tmp_path: Path, upstream: Any) -> None:
    """Trial T2's `forgotten.py` (DECISIONS 297): the late write started a trace of its own, decided partial when its
    wait ran out, `injected` with no review item. Real `tracefence serve`, the SDK's OTLP/gRPC exporter."""
    config = service_config(upstream, tmp_path / "r.db", max_wait_ms=400).model_copy(update={"decided_cache_size": 1})
    service = TraceFenceService(config)
    service.start()
    client = Client(service.port, batch=True)
    try:
        first = _turn(client.tracer, "call-1")
        trace_id = format(first.get_span_context().trace_id, "032x")
        assert client.send().name == "SUCCESS"
        assert {r.tf["tracefence.replay.class"] for r in upstream.wait_spans(2, trace_id)} == {"injected"}
        for n in range(FORGET):
            _turn(client.tracer, f"call-other-{n}")
            assert client.send().name == "SUCCESS"
            upstream.wait_spans(2 * (n + 2))
        late_id = _late_write(client.tracer, first)
        assert client.send().name == "SUCCESS"
        (late,) = upstream.wait_spans(3, trace_id)[2:]
        assert late.span_id == late_id
        assert {k: late.tf[k] for k in ("tracefence.replay.class", "tracefence.step.decision", "tracefence.step.reasons", "tracefence.trace.partial")} == {
            "tracefence.replay.class": "review", "tracefence.step.decision": "review", "tracefence.step.reasons": ["trace_root_missing"],
            "tracefence.trace.partial": True}  # fmt: skip
        assert _held_item(service.store, trace_id) == HELD
    finally:
        client.shutdown()
        service.stop(grace_s=0)


def test_processor_a_late_write_of_a_forgotten_trace_is_held_root_missing(tmp_path: Path) -> None:
    """The same through the span processor in a real TracerProvider: the late write's trace is decided at the
    provider's shutdown, partial (its root never ends in this process)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_db=str(tmp_path / "r.db"), decision_wait_ms=0, decided_cache_size=1))
    tracer = provider.get_tracer("agent")
    first = _turn(tracer, "call-1")
    for n in range(FORGET):
        _turn(tracer, f"call-other-{n}")
    late_id = _late_write(tracer, first)
    provider.shutdown()
    (late,) = [s for s in exporter.get_finished_spans() if format(s.get_span_context().span_id, "016x") == late_id]
    attributes = dict(late.attributes or {})
    assert (attributes["tracefence.replay.class"], attributes["tracefence.step.decision"], list(attributes["tracefence.step.reasons"]),
            attributes["tracefence.trace.partial"]) == ("review", "review", ["trace_root_missing"], True)  # fmt: skip
    with SQLiteReviewStore(tmp_path / "r.db", create=False) as store:
        assert _held_item(store, format(first.get_span_context().trace_id, "032x")) == HELD


# --- 3. an unknown operation that names a function, an action or MCP is held (DECISIONS 302) -----------------

UNKNOWN_OP_FIXTURE = Path(__file__).parents[1] / "fixtures" / "trial" / "v_genai_upper.json"  # an error span `charge_card`, no tool name


def _with_operation(tmp_path: Path, operation: str) -> Path:
    path = tmp_path / "op.json"
    path.write_text(UNKNOWN_OP_FIXTURE.read_text().replace('"EXECUTE_TOOL"', json.dumps(operation)))
    return path


@pytest.mark.parametrize("operation", ["call_function", "execute_action", "mcp_call", "invokeFunction", "run_actions", "MCP"])
def test_cli_an_operation_naming_a_function_an_action_or_mcp_is_held(tmp_path: Path, operation: str) -> None:
    # Before: planned as tool-free (no class), although the span failed while calling something.
    proc = run("plan", str(_with_operation(tmp_path, operation)))
    plan = json.loads(proc.stdout)
    assert plan["replayClass"] == "review"
    assert _decisions(plan) == [("charge_card", "review", ["unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"])]
    assert plan["steps"][0]["step"]["malformed"][0]["message"] == (
        f"span 1000000000000002 ('charge_card') looks like tool activity (its attribute gen_ai.operation.name={operation!r} is no GenAI operation, "
        "and it names a tool), but no known convention reads it")  # fmt: skip


@pytest.mark.parametrize(
    "operation",
    # Strands, Spring AI, AG2, Semantic Kernel (.NET), ADK's model span name, and words that hold a call word only inside
    ["execute_event_loop_cycle", "framework", "embedding", "conversation", "handoff", "chat.completions", "text.completions", "agent_run",
     "call_llm", "invoke_model", "transaction", "functional_test"],
)
def test_cli_ordinary_operations_of_real_frameworks_still_pass(tmp_path: Path, operation: str) -> None:
    # The agent run records its output: alone, a run that recorded none in a trace with no model span is held (1010).
    path = _with_operation(tmp_path, operation)
    path.write_text(path.read_text().replace(
        '"stringValue": "invoke_agent"}}', '"stringValue": "invoke_agent"}}, {"key": "gen_ai.output.messages", "value": {"stringValue": "[]"}}', 1))
    plan = json.loads(run("plan", str(path)).stdout)
    assert (plan["replayClass"], plan.get("steps", [])) == (None, [])


# --- 4. a tool's own HTTP 4xx response is an error, as the HTTP conventions read a client span (DECISIONS 303) --

from opentelemetry.trace import SpanKind


def _processed(kind: SpanKind, status_code: int, method: str = "POST", child: tuple[str, int] | None = None) -> dict[str, Any]:
    """The annotations the processor (in a real TracerProvider) gives an HTTP tool span that got ``status_code``
    (its span status left unset, as an instrumentation that does not follow the conventions leaves it)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_db="", decision_wait_ms=0))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"}):
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "billing.http", "gen_ai.tool.call.id": "call-1",
                      "http.request.method": method, "url.full": "https://billing/api/invoices", "http.response.status_code": status_code}  # fmt: skip
        with tracer.start_as_current_span("execute_tool billing.http", kind=kind, attributes=attributes):
            if child is not None:
                tracer.start_span(child[0], kind=SpanKind.CLIENT, attributes={"http.request.method": child[0], "url.full": "https://billing/api/x",
                                                                               "http.response.status_code": child[1]}).end()  # fmt: skip
    provider.shutdown()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool billing.http"]
    attributes = dict(span.attributes or {})
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in attributes.items() if k.startswith("tracefence.") and k != "tracefence.plan.schema_version"}


def _annotated(cls: str, decision: str, reasons: list[str], effect: str, status: str) -> dict[str, Any]:
    return {"tracefence.replay.class": cls, "tracefence.step.decision": decision, "tracefence.step.reasons": reasons,
            "tracefence.step.related_call_ids": [], "tracefence.step.effect": effect, "tracefence.step.status": status}  # fmt: skip


@pytest.mark.parametrize("status_code", [400, 404, 408, 409, 422, 429, 499])
def test_processor_a_tool_spans_own_4xx_is_an_error_in_its_result(status_code: int) -> None:
    # Before: status ok, a POST committed (`skip`, `write_committed`, class static). A 409 or 429 may mean not applied,
    # a 408 that the server gave up while it may have applied it: a write is held either way.
    assert _processed(SpanKind.CLIENT, status_code) == _annotated("review", "review", ["write_error", "arguments_not_recorded", "error_in_result"], "write", "error")


def test_processor_a_4xx_stays_ok_on_a_server_span_and_below_a_step() -> None:
    # The conventions leave a server span's 4xx unset (the caller erred); a request below the step keeps 254's rule (5xx).
    committed = _annotated("static", "skip", ["write_committed", "result_not_recorded", "arguments_not_recorded"], "write", "ok")
    assert _processed(SpanKind.SERVER, 409) == committed
    assert _processed(SpanKind.CLIENT, 201, child=("GET", 404)) == committed
    read = _processed(SpanKind.CLIENT, 404, method="GET")  # a read replays whatever its status
    assert (read["tracefence.step.decision"], read["tracefence.step.status"]) == ("replay", "error")


# --- 5. a status code OTLP does not define: held, the step's tool name and effect read (DECISIONS 305) ---------

UNDEFINED = ["malformed_status", "write_status_unknown"]


@pytest.mark.parametrize("code", [7, -1, 2**40])
def test_cli_a_status_code_otlp_does_not_define_is_held_with_the_tools_name(tmp_path: Path, code: int) -> None:
    # Before: the span stood in as unreadable, its step named no tool (`tool: ""`) and had no effect.
    span = _tool("payments.charge", "write")
    span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.tool.call.result"]
    span["status"] = {"code": code}
    path = _file(tmp_path / "s.json", _span(ROOT_SPAN, "invoke_agent a"), span)
    proc = run("plan", str(path))
    plan = json.loads(proc.stdout)
    shown = min(max(code, -(2**31)), 2**31 - 1)  # past int32 it is clamped, never wrapped to 0 (unset)
    assert (plan["replayClass"], _decisions(plan)) == ("review", [("payments.charge", "review", UNDEFINED)])
    assert plan["steps"][0]["step"]["effect"] == "write"
    assert plan["steps"][0]["step"]["malformed"] == [{"field": "status", "message": f"status code {shown} is not one of 0 (unset), 1 (ok), 2 (error): not understood"}]


def test_service_a_status_code_otlp_does_not_define_is_held_as_the_cli_holds_it(tmp_path: Path, upstream: Any) -> None:
    """The gRPC door read code 7 as `error`: a read replayed. Now every door holds the step at status, with its name."""
    from service_helpers import (
        raw_request,
        raw_span,
        raw_tool_span,
        trace_stub,
        wait_for,
    )

    service = TraceFenceService(separate_runs(service_config(upstream, tmp_path / "r.db")))
    service.start()
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    try:
        trace_id = bytes.fromhex(TRACE)
        tool = raw_tool_span(trace_id, bytes.fromhex(TOOL), "accounts.get", effect="read", status="", parent=bytes.fromhex(ROOT_SPAN))
        del tool.attributes[-1]  # no tracefence.status: the span's own status decides
        tool.status.code = 7
        stub.Export(raw_request(raw_span(trace_id, bytes.fromhex(ROOT_SPAN), "invoke_agent a"), tool), timeout=10)
        (received,) = [r for r in upstream.wait_spans(2, TRACE) if r.span_id == TOOL]
        assert (received.tf["tracefence.replay.class"], received.tf["tracefence.step.decision"], received.tf["tracefence.step.reasons"]) == (
            "review", "review", ["malformed_status", "arguments_not_recorded"])  # fmt: skip
        item = wait_for(lambda: service.store.get(TRACE), what="the review item")
        assert [(d.step.tool, list(d.reasons)) for d in item.plan.steps] == [("accounts.get", ["malformed_status", "arguments_not_recorded"])]
    finally:
        channel.close()
        service.stop(grace_s=0)
