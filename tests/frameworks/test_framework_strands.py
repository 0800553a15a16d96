"""Fixtures made by Strands Agents' own OpenTelemetry instrumentation (issue 8).

A real ``strands.Agent`` runs offline with a scripted ``Model`` subclass that
streams Bedrock-style events (tool uses, then a final text). Strands' tracer
writes ``invoke_agent``, ``execute_event_loop_cycle``, ``chat`` and
``execute_tool <tool>`` spans to an SDK TracerProvider. By default it records a
tool call's arguments and result only in span EVENTS (``gen_ai.tool.message``
``content`` and ``gen_ai.choice`` ``message``), and the model's requested calls
in the ``chat`` span's ``gen_ai.choice`` event (Bedrock ``toolUse`` blocks).
With ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` it writes
``gen_ai.tool.call.arguments`` / ``.result`` attributes and the
``gen_ai.client.inference.operation.details`` event instead.

Tools label the framework's ``execute_tool`` span with ``declare`` inside their
body (that span is current there: checked), or are labelled by ``tool_rules``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("strands")

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import strands.telemetry.tracer as strands_tracer
from strands import Agent, tool
from strands.models.model import Model

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.agent.instrument import declare
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.sdk import TraceFenceSpanProcessor
from framework_helpers import plan_of_spans as plan_of, sha, SWITCH, global_provider, server_views

LATEST = "gen_ai_latest_experimental"


class ScriptedModel(Model):
    """A Strands model that streams scripted turns: a list of (toolUseId, tool, input) calls, or a final text."""

    def __init__(self, turns):
        self.turns = list(turns)
        self.config: dict = {}

    def update_config(self, **model_config):
        self.config.update(model_config)

    def get_config(self):
        return self.config

    async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):
        raise NotImplementedError("not scripted")
        yield  # pragma: no cover - makes this an async generator

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        turn = self.turns.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(turn, str):
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": turn}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        else:
            for tool_use_id, name, tool_input in turn:
                yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tool_use_id, "name": name}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(tool_input)}}}}
                yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        yield {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}, "metrics": {"latencyMs": 0}}}


# What each tool saw as its current span, and how often the flaky write ran.
SEEN: dict = {"current_spans": [], "create_invoice_calls": 0}


@tool
def lookup_customer(customer: str) -> str:
    """Look up a customer."""
    SEEN["current_spans"].append(otel_trace.get_current_span().name)
    declare("read")
    return f"customer {customer}: active"


@tool
def create_invoice(customer: str, amount_cents: int, idempotency_key: str) -> str:
    """Create an invoice; the first call of a run times out when asked to."""
    SEEN["current_spans"].append(otel_trace.get_current_span().name)
    declare("write", idempotency_key=idempotency_key)
    SEEN["create_invoice_calls"] += 1
    if SEEN.get("first_invoice_times_out") and SEEN["create_invoice_calls"] == 1:
        raise TimeoutError("billing API did not answer in 10s")
    return "invoice inv_8812"


@tool
def charge_card(customer: str, amount_cents: int) -> dict:
    """Charge a card; the processor declines (a Strands ToolResult with status error)."""
    declare("write")
    return {"status": "error", "content": [{"text": "card declined"}]}


@tool
def fetch_weather(city: str) -> str:
    """Nobody labels this tool in code."""
    return "sunny"


@tool
def book_meeting(room: str, slot: str, request_id: str) -> str:
    """Nobody labels this tool in code either."""
    return f"booked {room} at {slot}"


TOOLS = [lookup_customer, create_invoice, charge_card, fetch_weather, book_meeting]


@pytest.fixture(autouse=True)
def _reset_seen():
    SEEN.clear()
    SEEN.update(current_spans=[], create_invoice_calls=0)
    yield


def run_agent(monkeypatch, turns, *, opt_in: str = "", processor_config: bool = False):
    """Run a Strands agent with the scripted turns; its tracer writes to a fresh SDK provider.

    Strands keeps one global ``Tracer`` (read from the global provider and the
    opt-in variable when first made); each run gets its own, on its own provider.
    """
    if opt_in:
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
    else:
        monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    if processor_config:
        provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=None))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = strands_tracer.Tracer()
    tracer.tracer_provider = provider
    tracer.tracer = provider.get_tracer(tracer.service_name)
    monkeypatch.setattr(strands_tracer, "_tracer_instance", tracer)
    agent = Agent(model=ScriptedModel(turns), tools=TOOLS, callback_handler=None)
    result = agent("bill customer a")
    provider.force_flush()
    return str(result), exporter.get_finished_spans()


def table(plan):
    return [(d.step.call_id, d.step.tool, d.step.status, d.decision, d.reasons, d.related_call_ids) for d in plan.steps]


INVOICE = {"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}
INVOICE_SHA = sha('{"amount_cents":1200,"customer":"a","idempotency_key":"inv-17"}')


def test_the_tool_span_is_current_in_the_tool_body_and_arguments_live_only_in_events(monkeypatch):
    """The shape this file relies on: Strands' default puts arguments and results in span events."""
    _, spans = run_agent(monkeypatch, [[("tooluse_r1", "lookup_customer", {"customer": "a"})], "done"])
    assert SEEN["current_spans"] == ["execute_tool lookup_customer"]
    (tool_span,) = [s for s in spans if s.name == "execute_tool lookup_customer"]
    attributes = dict(tool_span.attributes)
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.call.id"] == "tooluse_r1"
    assert attributes["gen_ai.tool.status"] == "success"
    assert attributes["tracefence.effect"] == "read"
    assert "gen_ai.tool.call.arguments" not in attributes and "gen_ai.tool.call.result" not in attributes
    assert [(e.name, dict(e.attributes)) for e in tool_span.events] == [
        ("gen_ai.tool.message", {"role": "tool", "content": '{"customer": "a"}', "id": "tooluse_r1"}),
        ("gen_ai.choice", {"message": '[{"text": "customer a: active"}]', "id": "tooluse_r1"}),
    ]


def test_a_read_and_a_committed_write_read_from_span_events(monkeypatch):
    output, spans = run_agent(
        monkeypatch,
        [[("tooluse_r1", "lookup_customer", {"customer": "a"})], [("tooluse_w1", "create_invoice", INVOICE)], "billed"],
    )
    assert output.strip() == "billed"
    plan = plan_of(spans)
    assert table(plan) == [
        ("tooluse_r1", "lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read",), ()),
        ("tooluse_w1", "create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed",), ()),
    ]
    read, write = (d.step for d in plan.steps)
    # Arguments from the gen_ai.tool.message event, the result from the tool span's gen_ai.choice event.
    assert read.arguments_sha256 == sha('{"customer":"a"}')
    assert (write.effect, write.effect_source, write.idempotency_key, write.arguments_sha256) == (
        Effect.WRITE,
        EffectSource.DECLARED,
        "inv-17",
        INVOICE_SHA,
    )
    assert (write.result_recorded, write.result_sha256) == (True, sha('[{"text": "invoice inv_8812"}]'))
    # The chat spans' gen_ai.choice events request both calls; both ran, so nothing is requested-only.
    assert not any(d.step.requested_only for d in plan.steps)
    assert plan.replay_class is ReplayClass.INJECTED


def test_the_span_processor_annotates_strands_spans(monkeypatch):
    _, spans = run_agent(
        monkeypatch,
        [[("tooluse_r1", "lookup_customer", {"customer": "a"})], [("tooluse_w1", "create_invoice", INVOICE)], "billed"],
        processor_config=True,
    )
    by_name = {s.name: dict(s.attributes) for s in spans}
    assert {s.attributes["tracefence.replay.class"] for s in spans} == {"injected"}
    assert by_name["execute_tool lookup_customer"]["tracefence.step.decision"] == "replay"
    assert by_name["execute_tool create_invoice"]["tracefence.step.decision"] == "skip"
    assert tuple(by_name["execute_tool create_invoice"]["tracefence.step.reasons"]) == ("write_committed",)
    assert "tracefence.step.decision" not in by_name["invoke_agent Strands Agents"]


def test_a_write_that_timed_out_and_its_retry_with_the_same_arguments(monkeypatch):
    SEEN["first_invoice_times_out"] = True
    _, spans = run_agent(
        monkeypatch,
        [[("tooluse_w1", "create_invoice", INVOICE)], [("tooluse_w2", "create_invoice", INVOICE)], "billed, eventually"],
    )
    assert SEEN["create_invoice_calls"] == 2
    timed_out = [s for s in spans if s.name == "execute_tool create_invoice" and s.attributes["gen_ai.tool.call.id"] == "tooluse_w1"][0]
    assert [e.attributes.get("exception.type") for e in timed_out.events if e.name == "exception"] == ["TimeoutError"]
    plan = plan_of(spans)
    assert table(plan) == [
        ("tooluse_w1", "create_invoice", ToolStatus.TIMEOUT, Decision.REVIEW, ("write_timeout", "repeated_later"), ("tooluse_w2",)),
        ("tooluse_w2", "create_invoice", ToolStatus.OK, Decision.REVIEW, ("repeats_earlier_write",), ("tooluse_w1",)),
    ]
    assert all(d.step.arguments_sha256 == INVOICE_SHA and d.step.idempotency_key == "inv-17" for d in plan.steps)
    assert plan.replay_class is ReplayClass.REVIEW


def test_a_tool_result_with_error_status_is_a_write_error(monkeypatch):
    _, spans = run_agent(
        monkeypatch,
        [[("tooluse_c1", "charge_card", {"customer": "a", "amount_cents": 1200})], "declined"],
    )
    (tool_span,) = [s for s in spans if s.name == "execute_tool charge_card"]
    assert tool_span.attributes["gen_ai.tool.status"] == "error"
    plan = plan_of(spans)
    assert table(plan) == [("tooluse_c1", "charge_card", ToolStatus.ERROR, Decision.REVIEW, ("write_error",), ())]
    assert plan.replay_class is ReplayClass.REVIEW


def test_latest_conventions_with_tool_rules(monkeypatch):
    _, spans = run_agent(
        monkeypatch,
        [
            [("tooluse_r1", "fetch_weather", {"city": "Oslo"})],
            [("tooluse_w1", "book_meeting", {"room": "fjord", "slot": "10:00", "request_id": "mtg-4"})],
            "booked",
        ],
        opt_in=LATEST,
    )
    (book,) = [s for s in spans if s.name == "execute_tool book_meeting"]
    assert json.loads(book.attributes["gen_ai.tool.call.arguments"]) == {"room": "fjord", "slot": "10:00", "request_id": "mtg-4"}
    # Unlabelled in code: review until the operator names the effects.
    assert table(plan_of(spans)) == [
        ("tooluse_r1", "fetch_weather", ToolStatus.OK, Decision.REVIEW, ("effect_unknown",), ()),
        ("tooluse_w1", "book_meeting", ToolStatus.OK, Decision.REVIEW, ("effect_unknown",), ()),
    ]
    config = TraceFenceConfig(
        tool_rules=[
            ToolRule(match="fetch_*", effect="read"),
            ToolRule(match="book_*", effect="write", idempotency_key_argument="request_id"),
        ]
    )
    plan = plan_of(spans, config)
    assert table(plan) == [
        ("tooluse_r1", "fetch_weather", ToolStatus.OK, Decision.REPLAY, ("declared_read",), ()),
        ("tooluse_w1", "book_meeting", ToolStatus.OK, Decision.SKIP, ("write_committed",), ()),
    ]
    write = plan.steps[1].step
    assert (write.effect_source, write.idempotency_key, write.result_recorded) == (EffectSource.CONFIG, "mtg-4", True)
    assert write.arguments_sha256 == sha('{"request_id":"mtg-4","room":"fjord","slot":"10:00"}')
    assert write.result_sha256 == sha('[{"text": "booked fjord at 10:00"}]')
    assert plan.replay_class is ReplayClass.INJECTED


@pytest.mark.parametrize(
    "opt_in",
    ["", LATEST, f"{LATEST},gen_ai_span_attributes_only"],
    ids=["default-events", "latest-experimental", "latest-attributes-only"],
)
def test_a_requested_write_whose_tool_span_is_missing(monkeypatch, opt_in):
    """As if the process died before exporting the tool spans: only the model's request is left.

    Default mode: the request is in the chat span's ``gen_ai.choice`` event (Bedrock
    ``toolUse`` blocks); latest mode: in its ``gen_ai.client.inference.operation.details``
    event (``gen_ai.output.messages`` with ``tool_call`` parts); with ``gen_ai_span_attributes_only``,
    in the chat span's ``gen_ai.output.messages`` attribute.
    """
    _, spans = run_agent(monkeypatch, [[("tooluse_w1", "create_invoice", INVOICE)], "billed"], opt_in=opt_in)
    kept = [s for s in spans if s.attributes.get("gen_ai.operation.name") != "execute_tool"]
    assert len(kept) == len(spans) - 1
    config = TraceFenceConfig(tool_rules=[ToolRule(match="create_*", effect="write")])
    plan = plan_of(kept, config)
    assert table(plan) == [
        ("tooluse_w1", "create_invoice", ToolStatus.UNKNOWN, Decision.REVIEW, ("write_status_unknown", "requested_not_recorded"), ())
    ]
    (step,) = (d.step for d in plan.steps)
    assert (step.requested_only, step.arguments_sha256) == (True, INVOICE_SHA)
    assert plan.replay_class is ReplayClass.REVIEW


# -- Strands calling MCP tools: the MCP SDK's client span is a dispatch attempt of Strands' step --------------

MCP_SERVER = Path(__file__).parents[1] / "programs" / "mcp_billing_server.py"


@pytest.fixture(scope="module")
def strands_over_mcp(tmp_path_factory):
    """A Strands agent whose tools are the MCP server's (strands.tools.mcp.MCPClient over stdio)."""
    pytest.importorskip("mcp.server.mcpserver")
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from strands.tools.mcp import MCPClient

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    provider = global_provider()
    exporter = InMemorySpanExporter()
    SWITCH.target = SimpleSpanProcessor(exporter)
    tracer = strands_tracer.Tracer()
    tracer.tracer_provider = provider
    tracer.tracer = provider.get_tracer(tracer.service_name)
    monkeypatch.setattr(strands_tracer, "_tracer_instance", tracer)
    spans_file = tmp_path_factory.mktemp("strands-mcp") / "server-spans.b64"
    params = StdioServerParameters(command=sys.executable, args=[str(MCP_SERVER)], env={"TRACEFENCE_TEST_SPANS": str(spans_file)})
    turns = [
        [("tooluse_r1", "lookup_customer", {"customer": "a"})],
        [("tooluse_w1", "create_invoice", INVOICE)],
        [("tooluse_c1", "charge_card", {"customer": "a", "amount_cents": 1200})],
        "billed, card declined",
    ]
    try:
        client = MCPClient(lambda: stdio_client(params))
        with client:
            agent = Agent(model=ScriptedModel(turns), tools=client.list_tools_sync(), callback_handler=None)
            agent("bill customer a")
    finally:
        SWITCH.target = None
        monkeypatch.undo()
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "invoke_agent Strands Agents"]
    trace_id = format(root.context.trace_id, "032x")
    client_views = [from_readable(s, i) for i, s in enumerate(spans) if s.context.trace_id == root.context.trace_id]
    return trace_id, client_views, [v for v in server_views(spans_file) if v.trace_id == trace_id]


MCP_RULES = TraceFenceConfig(
    tool_rules=[ToolRule(match="lookup_*", effect="read"), ToolRule(match="create_*", effect="write"), ToolRule(match="charge_*", effect="write")]
)


@pytest.mark.parametrize("which", ["client", "both"])
def test_strands_calling_mcp_tools(strands_over_mcp, which):
    """``client``: the agent process's spans (effects from tool_rules); ``both``: with the MCP
    server's spans too (effects and the key from the server's ``declare``, via the attempts)."""
    trace_id, client_views, server_views = strands_over_mcp
    names = {v.span_id: v.name for v in client_views + server_views}
    assert sorted((v.name, names.get(v.parent_span_id)) for v in client_views + server_views if "tools/call" in v.name) == [
        ("MCP send tools/call charge_card", "execute_tool charge_card"),
        ("MCP send tools/call create_invoice", "execute_tool create_invoice"),
        ("MCP send tools/call lookup_customer", "execute_tool lookup_customer"),
        ("tools/call charge_card", "MCP send tools/call charge_card"),
        ("tools/call create_invoice", "MCP send tools/call create_invoice"),
        ("tools/call lookup_customer", "MCP send tools/call lookup_customer"),
    ]
    views = client_views if which == "client" else client_views + server_views
    planned = plan_spans(trace_id, views, MCP_RULES if which == "client" else TraceFenceConfig())
    plan = planned.plan
    assert table(plan) == [
        ("tooluse_r1", "lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read",), ()),
        ("tooluse_w1", "create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed",), ()),
        ("tooluse_c1", "charge_card", ToolStatus.ERROR, Decision.REVIEW, ("write_error",), ()),
    ]
    write = plan.steps[1].step
    assert (write.idempotency_key, write.arguments_sha256, write.result_recorded, write.attempts) == ("inv-17", INVOICE_SHA, True, 1)
    assert write.effect_source is (EffectSource.CONFIG if which == "client" else EffectSource.DECLARED)
    steps_by_span = {d.step.span_id: d.step.tool for d in plan.steps}
    assert sorted((names[a], steps_by_span[s]) for a, s in planned.normalized.attempt_of.items()) == sorted(
        [(f"MCP send tools/call {t}", t) for t in ("lookup_customer", "create_invoice", "charge_card")]
        + ([(f"tools/call {t}", t) for t in ("lookup_customer", "create_invoice", "charge_card")] if which == "both" else [])
    )
    assert plan.replay_class is ReplayClass.REVIEW
