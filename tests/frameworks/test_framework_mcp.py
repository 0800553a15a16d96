"""Fixtures made by the ``mcp`` Python SDK's own OpenTelemetry spans (issue 8).

The SDK (2.x) traces natively, with no instrumentation package:

* the client makes a CLIENT span ``MCP send tools/call <tool>`` per request
  (``mcp.method.name`` = ``tools/call``, ``jsonrpc.request.id``; no
  ``gen_ai.tool.name``, no arguments, no result). A request that times out
  ends ERROR with a ``TimeoutError`` exception event, and the caller gets an
  ``MCPError`` ("Request 'tools/call' timed out");
* the server (tests/programs/mcp_billing_server.py, run over stdio with
  ``sys.executable``) makes a SERVER span ``tools/call <tool>`` with
  ``mcp.method.name``, ``gen_ai.operation.name`` = ``execute_tool`` and
  ``gen_ai.tool.name``, parented through ``traceparent`` in ``_meta`` under the
  client span; a ``CallToolResult(isError=True)`` sets ``error.type`` =
  ``tool_error`` and status ERROR on it, while the client span stays UNSET.

The agent side either calls ``ClientSession.call_tool`` bare, or wraps it in
``otel_tracefence.agent.instrument.tool_call`` (an ``execute_tool`` step whose MCP
client span is a dispatch attempt). The server's tools label their own span
with ``declare``. Server spans come back from the subprocess as OTLP protobuf.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.agent.instrument import tool_call
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.sdk import TraceFenceSpanProcessor
from framework_helpers import sha, SWITCH, global_provider, server_views

SERVER = Path(__file__).parents[1] / "programs" / "mcp_billing_server.py"




class Run:
    """One agent turn (one trace, under its ``invoke_agent`` span): the agent process's spans and the server's."""

    def __init__(self, client_spans, annotated_spans, server_views, trace_id: str) -> None:
        self.trace_id = trace_id
        self.client_spans = [s for s in client_spans if format(s.context.trace_id, "032x") == trace_id]
        # The same spans as TraceFenceSpanProcessor handed them on, annotated.
        self.annotated_spans = [s for s in annotated_spans if format(s.context.trace_id, "032x") == trace_id]
        self.client = [from_readable(s, i) for i, s in enumerate(self.client_spans)]
        self.server = [v for v in server_views if v.trace_id == trace_id]

    def views(self, which: str):
        if which == "client":
            return list(self.client)
        if which == "server":
            return list(self.server)
        return list(self.client) + list(self.server)

    def plan(self, which: str = "both", config: TraceFenceConfig | None = None):
        return plan_spans(self.trace_id, self.views(which), config or TraceFenceConfig())


class _FanOut(SpanProcessor):
    def __init__(self, *processors: SpanProcessor) -> None:
        self.processors = processors

    def on_start(self, span, parent_context=None):
        for processor in self.processors:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span):
        for processor in self.processors:
            processor.on_end(span)


def run_agent(spans_dir: Path, turns, *, slow_s: float = 2.0) -> dict[str, Run]:
    """Start the server over stdio once; run each ``(name, body(session))`` turn under its own
    ``invoke_agent`` span (its own trace); collect spans. The SDK itself sends ``tools/list``
    inside the first turn (to learn the tools' output schemas).

    Every span of the agent process goes both to a plain exporter and through a
    ``TraceFenceSpanProcessor`` to a second one."""
    provider = global_provider()
    exporter, annotated = InMemorySpanExporter(), InMemorySpanExporter()
    SWITCH.target = _FanOut(SimpleSpanProcessor(exporter), TraceFenceSpanProcessor(SimpleSpanProcessor(annotated), review_sink=None))
    spans_file = spans_dir / "server-spans.b64"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER)],
        env={"TRACEFENCE_TEST_SPANS": str(spans_file), "TRACEFENCE_TEST_SLOW_S": str(slow_s)},
    )
    tracer = provider.get_tracer("test-agent")
    trace_ids: dict[str, str] = {}

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for name, body in turns:
                    with tracer.start_as_current_span(f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
                        await body(session)
                    trace_ids[name] = format(root.get_span_context().trace_id, "032x")

    try:
        asyncio.run(main())
    finally:
        SWITCH.target = None
    client_spans, annotated_spans = exporter.get_finished_spans(), annotated.get_finished_spans()
    return {name: Run(client_spans, annotated_spans, server_views(spans_file), trace_id) for name, trace_id in trace_ids.items()}


def table(plan):
    return [(d.step.tool, d.step.status, d.decision, d.reasons) for d in plan.steps]


CUSTOMER = {"customer": "a"}
INVOICE = {"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}
PAYMENT = {"customer": "a", "amount_cents": 500, "idempotency_key": "pay-1"}
PAYMENT_2 = {"customer": "a", "amount_cents": 500, "idempotency_key": "pay-2"}
RULES = TraceFenceConfig(
    tool_rules=[ToolRule(match="lookup_*", effect="read"), ToolRule(match="create_*", effect="write"), ToolRule(match="charge_*", effect="write")]
)


async def _read_write(session):
    await session.call_tool("lookup_customer", CUSTOMER)
    await session.call_tool("create_invoice", INVOICE)


async def _bare_error(session):
    result = await session.call_tool("charge_card", {"customer": "a", "amount_cents": 1200})
    assert result.is_error


async def _wrapped_error(session):
    with tool_call("charge_card", effect="write", arguments={"customer": "a", "amount_cents": 1200}, call_id="call_c1", record_result=True) as call:
        result = await session.call_tool("charge_card", {"customer": "a", "amount_cents": 1200})
        call.set_result(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def _pay_with_retry(arguments, session_timeouts):
    async def body(session):
        with tool_call("send_payment", effect="write", idempotency_key=arguments["idempotency_key"], arguments=arguments, call_id="call_p1", record_result=True) as call:
            for timeout in session_timeouts:
                try:
                    result = await session.call_tool("send_payment", arguments, read_timeout_seconds=timeout)
                except MCPError as exc:
                    if "timed out" not in str(exc) or timeout == session_timeouts[-1]:
                        raise
                    continue
                call.set_result(result.model_dump(mode="json", by_alias=True, exclude_none=True))
                return

    return body


TIMEOUT_RAISED: list[str] = []


async def _timeout(session):
    try:
        await _pay_with_retry(PAYMENT_2, [0.3])(session)
    except MCPError as exc:
        TIMEOUT_RAISED.append(str(exc))


async def _wrapped_read_write(session):
    await session.list_tools()  # as agents do at the start of a turn
    with tool_call("lookup_customer", effect="read", arguments=CUSTOMER, call_id="call_r1", record_result=True) as call:
        call.set_result((await session.call_tool("lookup_customer", CUSTOMER)).model_dump(mode="json", by_alias=True, exclude_none=True))
    with tool_call("create_invoice", effect="write", idempotency_key="inv-17", arguments=INVOICE, call_id="call_w1", record_result=True) as call:
        call.set_result((await session.call_tool("create_invoice", INVOICE)).model_dump(mode="json", by_alias=True, exclude_none=True))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    """Every scenario of this file, each its own trace, against one server process (one start-up)."""
    return run_agent(
        tmp_path_factory.mktemp("mcp"),
        [
            ("read_write", _read_write),
            ("bare_error", _bare_error),
            ("wrapped_error", _wrapped_error),
            ("retry", _pay_with_retry(PAYMENT, [0.3, 10.0])),
            ("timeout", _timeout),
            ("wrapped_read_write", _wrapped_read_write),
        ],
    )


def test_the_sdk_traces_tool_calls_on_both_sides(runs):
    run = runs["read_write"]
    (client,) = [s for s in run.client_spans if s.name == "MCP send tools/call lookup_customer"]
    assert sorted(client.attributes) == ["jsonrpc.request.id", "mcp.method.name"]
    assert client.attributes["mcp.method.name"] == "tools/call"
    (server,) = [v for v in run.server if v.name == "tools/call lookup_customer"]
    assert server.parent_span_id == format(client.context.span_id, "016x") and server.parent_is_remote
    assert {k: server.attributes[k] for k in ("mcp.method.name", "gen_ai.operation.name", "gen_ai.tool.name", "tracefence.effect")} == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_customer",
        "tracefence.effect": "read",
    }


@pytest.mark.parametrize("which", ["both", "client", "server"])
def test_a_read_and_a_committed_write_over_bare_mcp_calls(runs, which):
    """No agent-side wrapper: each call is the client span, with the server span as its one attempt.

    ``client`` is what the agent process alone exports (effects from tool_rules): the client span ends UNSET on an
    ``isError`` result too (the next test), so alone it is no evidence the write committed (DECISIONS 988);
    ``server`` what the MCP server alone exports (effects from its ``declare``)."""

    run = runs["read_write"]
    planned = run.plan(which, RULES if which == "client" else None)
    plan = planned.plan
    if which == "client":
        write = ("create_invoice", ToolStatus.OK, Decision.REVIEW, ("write_outcome_unrecorded", "result_not_recorded", "arguments_not_recorded"))
    else:
        write = ("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed", "result_not_recorded", "arguments_not_recorded"))
    assert table(plan) == [("lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read", "arguments_not_recorded")), write]
    assert plan.replay_class is (ReplayClass.REVIEW if which == "client" else ReplayClass.STATIC)
    assert all(d.step.attempts == 1 for d in plan.steps)
    assert [bool(d.step.malformed) for d in plan.steps] == [False, which == "client"]
    write = plan.steps[1].step
    if which == "client":
        assert write.effect_source is EffectSource.CONFIG
    else:
        assert (write.effect, write.effect_source, write.idempotency_key) == (Effect.WRITE, EffectSource.DECLARED, "inv-17")
    if which != "server":
        # The client span is the step (no call id is recorded: the span id stands in), the server span its attempt.
        clients = {s.name: format(s.context.span_id, "016x") for s in run.client_spans}
        assert [d.step.call_id for d in plan.steps] == [clients["MCP send tools/call lookup_customer"], clients["MCP send tools/call create_invoice"]]
    if which == "both":
        assert sorted(planned.normalized.attempt_of) == sorted(v.span_id for v in run.server if v.name.startswith("tools/call "))


@pytest.mark.parametrize("which", ["both", "server"])
def test_a_tool_error_result_over_bare_mcp_calls_is_a_write_error(runs, which):
    """``CallToolResult(isError=True)``: the server span is ERROR (``error.type=tool_error``), the client span is not."""
    run = runs["bare_error"]
    (client,) = [s for s in run.client_spans if s.name == "MCP send tools/call charge_card"]
    assert client.status.is_unset
    plan = run.plan(which).plan
    # Seen from both processes, the step is the client span (unset) and the server span its failed attempt.
    notes = ("dispatch_attempt_failed",) if which == "both" else ()
    assert table(plan) == [("charge_card", ToolStatus.ERROR, Decision.REVIEW, ("write_error", "arguments_not_recorded", *notes))]
    assert plan.replay_class is ReplayClass.REVIEW


def test_a_tool_error_result_inside_a_tool_call_step_is_not_a_committed_write(runs):
    """The agent wraps the call in ``tool_call`` and records the result; nothing raised, so the
    step's own label says ``ok``, but the recorded result says ``isError: true``."""
    run = runs["wrapped_error"]
    (step_span,) = [s for s in run.client_spans if s.name == "execute_tool charge_card"]
    assert '"isError": true' in step_span.attributes["gen_ai.tool.call.result"]
    plan = run.plan("client").plan
    assert [(d.step.call_id, *row) for d, row in zip(plan.steps, table(plan))] == [
        ("call_c1", "charge_card", ToolStatus.ERROR, Decision.REVIEW, ("write_error", "error_in_result"))
    ]
    assert plan.replay_class is ReplayClass.REVIEW


@pytest.mark.parametrize("which", ["both", "client"])
def test_a_write_retried_after_a_timeout_inside_one_step_was_dispatched_twice(runs, which):
    run = runs["retry"]
    sends = [s for s in run.client_spans if s.name == "MCP send tools/call send_payment"]
    assert [s.events[0].attributes["exception.type"] if s.events else None for s in sends] == ["TimeoutError", None]
    planned = run.plan(which)
    plan = planned.plan
    assert [(d.step.call_id, *row) for d, row in zip(plan.steps, table(plan))] == [
        ("call_p1", "send_payment", ToolStatus.OK, Decision.REVIEW, ("write_dispatched_more_than_once",))
    ]
    (step,) = (d.step for d in plan.steps)
    assert (step.attempts, step.idempotency_key, step.arguments_sha256, step.result_recorded) == (
        2,
        "pay-1",
        sha('{"amount_cents":500,"customer":"a","idempotency_key":"pay-1"}'),
        True,
    )
    assert plan.replay_class is ReplayClass.REVIEW


def test_a_write_whose_mcp_request_timed_out_is_a_write_timeout(runs):
    """The client gave up waiting (its span: ``TimeoutError``); the caller sees ``MCPError``
    ("Request 'tools/call' timed out"). The write's outcome is unknown: a timeout, not a plain error."""
    run = runs["timeout"]
    assert TIMEOUT_RAISED == ["Request 'tools/call' timed out"]
    (send,) = [s for s in run.client_spans if s.name == "MCP send tools/call send_payment"]
    assert [e.attributes["exception.type"] for e in send.events] == ["TimeoutError"]
    (step_span,) = [s for s in run.client_spans if s.name == "execute_tool send_payment"]
    assert step_span.attributes["error.type"] == "mcp.shared.exceptions.MCPError"
    plan = run.plan("client").plan
    assert [(d.step.call_id, *row) for d, row in zip(plan.steps, table(plan))] == [
        ("call_p1", "send_payment", ToolStatus.TIMEOUT, Decision.REVIEW, ("write_timeout",))
    ]
    assert plan.steps[0].step.arguments_sha256 == sha('{"amount_cents":500,"customer":"a","idempotency_key":"pay-2"}')
    assert plan.replay_class is ReplayClass.REVIEW


def test_the_span_processor_annotates_the_agent_process_spans(runs):
    run = runs["wrapped_read_write"]
    assert len(run.annotated_spans) == len(run.client_spans)
    by_name = {s.name: s for s in run.annotated_spans}
    assert {s.attributes.get("tracefence.replay.class") for s in run.annotated_spans} == {"injected"}
    assert by_name["execute_tool lookup_customer"].attributes["tracefence.step.decision"] == "replay"
    assert by_name["execute_tool create_invoice"].attributes["tracefence.step.decision"] == "skip"
    assert tuple(by_name["execute_tool create_invoice"].attributes["tracefence.step.reasons"]) == ("write_committed",)
    # The MCP client spans are dispatch attempts of the agent's steps.
    for tool in ("lookup_customer", "create_invoice"):
        assert by_name[f"MCP send tools/call {tool}"].attributes["tracefence.step.attempt_of"] == format(
            by_name[f"execute_tool {tool}"].context.span_id, "016x"
        )
    assert "tracefence.step.decision" not in by_name["MCP send tools/list"].attributes
