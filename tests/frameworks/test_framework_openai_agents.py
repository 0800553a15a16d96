"""Fixtures made by the OpenAI Agents SDK with OpenLLMetry's instrumentation (issue 8).

``openai-agents`` runs offline with a scripted ``Model`` (the SDK's model
interface; it opens a ``response_span`` with an ``openai`` ``Response`` as the
SDK's own Responses model does, so the model turn is traced too).
``opentelemetry-instrumentation-openai-agents`` (OpenLLMetry) replaces the SDK's
own trace processors (so nothing is sent to OpenAI) and writes:

* ``Agent Workflow`` (``traceloop.span.kind=workflow``) > ``<agent>.agent``
  (``invoke_agent``) > ``openai.response`` (``chat``; the requested calls in
  ``gen_ai.output.messages`` ``tool_call`` parts, with the model's call id) and
  ``<tool>.tool`` (``traceloop.span.kind=tool``, ``execute_tool``,
  ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments`` / ``.result``; no call id).
* A tool that raises ends ERROR with a redacted ``SpanError`` dict as its
  status description, no exception event and no ``error.type``, and the
  SDK's "An error occurred while running the tool" text as its result.

The tool spans carry no call id, so the model's requested calls are matched
to them by tool name and canonical arguments.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents")
pytest.importorskip("opentelemetry.instrumentation.openai_agents")

from opentelemetry import trace as otel_trace
from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents import Agent, Runner, function_tool

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.agent.instrument import declare
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.sdk import TraceFenceSpanProcessor
from framework_helpers import plan_of_spans as plan_of, sha, SWITCH, global_provider, server_views
from tests.frameworks.isolated.openai_agents_scripted import ScriptedModel  # the matrix's scripted model (one home)




@pytest.fixture(scope="module", autouse=True)
def _instrumented():
    instrumentor = OpenAIAgentsInstrumentor(replace_existing_processors=True)
    instrumentor.instrument(tracer_provider=global_provider())
    yield
    instrumentor.uninstrument()


SEEN: dict = {}


@function_tool
def lookup_customer(customer: str) -> str:
    """Read a customer record."""
    SEEN.setdefault("current_spans", []).append(otel_trace.get_current_span().name)
    declare("read")
    return f"customer {customer}: active"


@function_tool
def create_invoice(customer: str, amount_cents: int, idempotency_key: str) -> str:
    """Create an invoice; times out on its first call when asked to."""
    declare("write", idempotency_key=idempotency_key)
    SEEN["invoices"] = SEEN.get("invoices", 0) + 1
    if SEEN.get("first_invoice_times_out") and SEEN["invoices"] == 1:
        raise TimeoutError("billing API did not answer in 10s")
    return "invoice inv_8812"


@function_tool
def fetch_weather(city: str) -> str:
    """Nobody labels this tool in code."""
    return "sunny"


TOOLS = [lookup_customer, create_invoice, fetch_weather]


@pytest.fixture(autouse=True)
def _reset_seen():
    SEEN.clear()
    yield


def run_agent(turns, *, processor: bool = False):
    exporter = InMemorySpanExporter()
    inner = SimpleSpanProcessor(exporter)
    SWITCH.target = TraceFenceSpanProcessor(inner, review_sink=None) if processor else inner
    try:
        agent = Agent(name="billing", model=ScriptedModel(turns), tools=TOOLS)
        result = Runner.run_sync(agent, "bill customer a")
    finally:
        SWITCH.target = None
    return result.final_output, exporter.get_finished_spans()


def table(plan):
    return [(d.step.tool, d.step.status, d.decision, d.reasons) for d in plan.steps]


INVOICE = {"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}
INVOICE_SHA = sha('{"amount_cents":1200,"customer":"a","idempotency_key":"inv-17"}')


def _span_ids(spans, name):
    return [format(s.context.span_id, "016x") for s in spans if s.name == name]


def test_a_read_and_a_committed_write():
    output, spans = run_agent([[("call_r1", "lookup_customer", {"customer": "a"})], [("call_w1", "create_invoice", INVOICE)], "billed"])
    assert output == "billed"
    assert SEEN["current_spans"] == ["lookup_customer.tool"]  # declare reaches the instrumentation's tool span
    (tool_span,) = [s for s in spans if s.name == "create_invoice.tool"]
    assert {k: tool_span.attributes[k] for k in ("traceloop.span.kind", "gen_ai.operation.name", "gen_ai.tool.name", "tracefence.effect")} == {
        "traceloop.span.kind": "tool",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "create_invoice",
        "tracefence.effect": "write",
    }
    plan = plan_of(spans)
    assert table(plan) == [
        ("lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read",)),
        ("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed",)),
    ]
    write = plan.steps[1].step
    assert (write.call_id, write.effect_source, write.idempotency_key, write.arguments_sha256, write.result_sha256) == (
        _span_ids(spans, "create_invoice.tool")[0],  # the tool span records no call id
        EffectSource.DECLARED,
        "inv-17",
        INVOICE_SHA,
        sha("invoice inv_8812"),
    )
    # Both requested calls (openai.response gen_ai.output.messages) matched their tool spans by name and arguments.
    assert not any(d.step.requested_only for d in plan.steps)
    assert plan.replay_class is ReplayClass.INJECTED


def test_the_span_processor_annotates_openllmetry_spans():
    _, spans = run_agent([[("call_r1", "lookup_customer", {"customer": "a"})], [("call_w1", "create_invoice", INVOICE)], "billed"], processor=True)
    by_name = {s.name: dict(s.attributes) for s in spans}
    assert {s.attributes["tracefence.replay.class"] for s in spans} == {"injected"}
    assert (by_name["lookup_customer.tool"]["tracefence.step.decision"], by_name["create_invoice.tool"]["tracefence.step.decision"]) == ("replay", "skip")
    assert tuple(by_name["create_invoice.tool"]["tracefence.step.reasons"]) == ("write_committed",)
    assert "tracefence.step.decision" not in by_name["openai.response"]


def test_a_write_that_failed_and_the_models_retry_with_the_same_arguments():
    SEEN["first_invoice_times_out"] = True
    _, spans = run_agent([[("call_w1", "create_invoice", INVOICE)], [("call_w2", "create_invoice", INVOICE)], "billed, eventually"])
    assert SEEN["invoices"] == 2
    first, second = _span_ids(spans, "create_invoice.tool")
    plan = plan_of(spans)
    # The SDK swallows the TimeoutError and the span shows only a redacted "Error running tool": error, not timeout.
    assert [(d.step.call_id, *row, d.related_call_ids) for d, row in zip(plan.steps, table(plan))] == [
        (first, "create_invoice", ToolStatus.ERROR, Decision.REVIEW, ("write_error", "repeated_later"), (second,)),
        (second, "create_invoice", ToolStatus.OK, Decision.REVIEW, ("repeats_earlier_write",), (first,)),
    ]
    assert not any(d.step.requested_only for d in plan.steps)
    assert plan.replay_class is ReplayClass.REVIEW


def test_two_identical_writes_requested_in_one_turn_match_their_two_spans():
    _, spans = run_agent([[("call_w1", "create_invoice", INVOICE), ("call_w2", "create_invoice", INVOICE)], "billed twice"])
    assert SEEN["invoices"] == 2
    plan = plan_of(spans)
    assert table(plan) == [
        ("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed", "repeated_later")),
        ("create_invoice", ToolStatus.OK, Decision.REVIEW, ("repeats_earlier_write",)),
    ]
    assert not any(d.step.requested_only for d in plan.steps)
    assert plan.replay_class is ReplayClass.REVIEW


def test_requested_calls_whose_tool_spans_are_missing():
    _, spans = run_agent([[("call_r1", "lookup_customer", {"customer": "a"}), ("call_w1", "create_invoice", INVOICE)], "billed"])
    kept = [s for s in spans if not s.name.endswith(".tool")]
    plan = plan_of(kept, TraceFenceConfig(tool_rules=[ToolRule(match="lookup_*", effect="read"), ToolRule(match="create_*", effect="write")]))
    assert [(d.step.call_id, d.step.requested_only, *row) for d, row in zip(plan.steps, table(plan))] == [
        ("call_r1", True, "lookup_customer", ToolStatus.UNKNOWN, Decision.REPLAY, ("declared_read", "requested_not_recorded")),
        ("call_w1", True, "create_invoice", ToolStatus.UNKNOWN, Decision.REVIEW, ("write_status_unknown", "requested_not_recorded")),
    ]
    assert plan.steps[1].step.arguments_sha256 == INVOICE_SHA
    assert plan.replay_class is ReplayClass.REVIEW


def test_an_unlabelled_tool_is_review_until_a_tool_rule_names_its_effect():
    _, spans = run_agent([[("call_r1", "fetch_weather", {"city": "Oslo"})], "sunny"])
    assert table(plan_of(spans)) == [("fetch_weather", ToolStatus.OK, Decision.REVIEW, ("effect_unknown",))]
    plan = plan_of(spans, TraceFenceConfig(tool_rules=[ToolRule(match="fetch_*", effect="read")]))
    assert table(plan) == [("fetch_weather", ToolStatus.OK, Decision.REPLAY, ("declared_read",))]
    assert (plan.steps[0].step.effect, plan.steps[0].step.effect_source) == (Effect.READ, EffectSource.CONFIG)
    assert plan.replay_class is ReplayClass.DYNAMIC


# -- The agent's tools served by an MCP server (agents.mcp.MCPServerStdio) --------------------------------------

MCP_SERVER = Path(__file__).parents[1] / "programs" / "mcp_billing_server.py"
MCP_RULES = TraceFenceConfig(
    tool_rules=[ToolRule(match="lookup_*", effect="read"), ToolRule(match="create_*", effect="write"), ToolRule(match="charge_*", effect="write")]
)


@pytest.fixture(scope="module")
def agents_over_mcp(tmp_path_factory):
    pytest.importorskip("mcp.server.mcpserver")
    from agents.mcp import MCPServerStdio

    spans_file = tmp_path_factory.mktemp("agents-mcp") / "server-spans.b64"
    exporter = InMemorySpanExporter()
    SWITCH.target = SimpleSpanProcessor(exporter)
    turns = [
        [("call_r1", "lookup_customer", {"customer": "a"})],
        [("call_w1", "create_invoice", INVOICE)],
        [("call_c1", "charge_card", {"customer": "a", "amount_cents": 1200})],
        "billed, card declined",
    ]

    async def main():
        params = {"command": sys.executable, "args": [str(MCP_SERVER)], "env": {"TRACEFENCE_TEST_SPANS": str(spans_file)}}
        async with MCPServerStdio(params=params) as server:
            agent = Agent(name="billing", model=ScriptedModel(turns), mcp_servers=[server])
            await Runner.run(agent, "bill customer a")

    try:
        asyncio.run(main())
    finally:
        SWITCH.target = None
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "Agent Workflow"]
    trace_id = format(root.context.trace_id, "032x")
    client_views = [from_readable(s, i) for i, s in enumerate(spans) if s.context.trace_id == root.context.trace_id]
    return trace_id, client_views, [v for v in server_views(spans_file) if v.trace_id == trace_id]


def test_mcp_tools_nest_their_mcp_client_span_under_the_tool_span(agents_over_mcp):
    trace_id, client_views, server_views = agents_over_mcp
    names = {v.span_id: v.name for v in client_views + server_views}
    assert sorted((v.name, names.get(v.parent_span_id)) for v in client_views + server_views if "tools/call" in v.name) == [
        ("MCP send tools/call charge_card", "charge_card.tool"),
        ("MCP send tools/call create_invoice", "create_invoice.tool"),
        ("MCP send tools/call lookup_customer", "lookup_customer.tool"),
        ("tools/call charge_card", "MCP send tools/call charge_card"),
        ("tools/call create_invoice", "MCP send tools/call create_invoice"),
        ("tools/call lookup_customer", "MCP send tools/call lookup_customer"),
    ]
    # The SDK lists the server's tools before every model turn, inside the agent's trace.
    assert [names.get(v.parent_span_id) for v in client_views if v.name == "MCP send tools/list"] == ["billing.agent"] * 4
    # The agent side loses MCP's isError: the tool span is OK and its result is the text part alone.
    (charge,) = [v for v in client_views if v.name == "charge_card.tool"]
    assert (charge.status_code, charge.attributes["gen_ai.tool.call.result"]) == ("ok", '{"type": "text", "text": "card declined"}')


@pytest.mark.parametrize("which", ["client", "both"])
def test_openai_agents_calling_mcp_tools(agents_over_mcp, which):
    """``client``: the agent process's spans (effects from tool_rules); ``both``: with the MCP
    server's spans (effects and keys from the server's ``declare``, the tool error from its span)."""
    trace_id, client_views, server_views = agents_over_mcp
    views = client_views if which == "client" else client_views + server_views
    planned = plan_spans(trace_id, views, MCP_RULES if which == "client" else TraceFenceConfig())
    plan = planned.plan
    # From the agent process's spans alone nothing says the charge failed (see the test above): the SDK keeps the MCP
    # content parts and drops isError, so neither write's ok status is evidence it committed (DECISIONS 800), and
    # both are held. With the MCP server's spans in the trace, each call's server span says what became of it.
    invoice, charge = (
        (("create_invoice", ToolStatus.OK, Decision.REVIEW, ("write_outcome_unrecorded",)),
         ("charge_card", ToolStatus.OK, Decision.REVIEW, ("write_outcome_unrecorded",)))
        if which == "client"
        else (("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed",)),
              ("charge_card", ToolStatus.ERROR, Decision.REVIEW, ("write_error", "dispatch_attempt_failed")))
    )
    assert table(plan) == [
        ("lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read",)),
        invoice,
        charge,
    ]
    write = plan.steps[1].step
    assert (write.idempotency_key, write.arguments_sha256, write.result_recorded, write.attempts) == ("inv-17", INVOICE_SHA, True, 1)
    assert not any(d.step.requested_only for d in plan.steps)
    steps_by_span = {d.step.span_id: d.step.tool for d in plan.steps}
    names = {v.span_id: v.name for v in views}
    assert sorted((names[a], steps_by_span[s]) for a, s in planned.normalized.attempt_of.items()) == sorted(
        [(f"MCP send tools/call {t}", t) for t in ("lookup_customer", "create_invoice", "charge_card")]
        + ([(f"tools/call {t}", t) for t in ("lookup_customer", "create_invoice", "charge_card")] if which == "both" else [])
    )
    assert plan.replay_class is ReplayClass.REVIEW
