"""A write's ok (or unset) status is evidence of commit only where its producer's path ends a failed call's span
ERROR (``status_paths.STATUS_EVIDENCE_PATHS``, docs/DECISIONS.md 780): AutoGen's McpWorkbench spans (no
``gen_ai.tool.description``, the FunctionTool path's marker) hold the write, and so does a result of MCP content
parts alone from any producer (``isError`` dropped, DECISIONS 800; or the MCP Python SDK's repr of them, 801) unless the MCP server's span of the call says ok;
``write_outcome_unrecorded`` naming what was not seen; reads and every other path read as before. The spans are the frameworks' own, as the matrix's
runners record them (tests/frameworks/test_autogen_mcp_spans.py runs AutoGen's)."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.evidence import status_blind_path
from otel_tracefence.pipeline.documents import plan_text

TRACE = "5b" * 16
ROOT = "c0" * 8
AUTOGEN = {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "autogen", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.id": "call_1"}
AGENTS_JS = {"openinference.span.kind": "TOOL", "llm.system": "openai", "tool.name": "charge_card", "input.value": '{"customer":"a"}'}
PART = '{"type":"text","text":"card declined"}'


def plan_of(attributes: dict, code: int, effect: str = "write") -> tuple[str, list]:
    """(class, [(tool, decision, reasons)]) of one tool span with ``attributes``, status ``code``, labelled ``effect``."""
    root = json_span(TRACE, ROOT, "session", **{"openinference.span.kind": "CHAIN"})
    tool = json_span(TRACE, "c1" * 8, "execute_tool charge_card", ROOT, **attributes, **{"tracefence.effect": effect})
    tool["status"] = {"code": code}
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [root, tool]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    return trace.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


def test_an_autogen_mcp_workbench_write_left_unset_is_held():
    assert plan_of(AUTOGEN, 0) == ("review", [("charge_card", "review", ("write_outcome_unrecorded", "result_not_recorded", "arguments_not_recorded"))])


def test_an_autogen_function_tool_write_left_unset_commits():
    described = {**AUTOGEN, "gen_ai.tool.description": "Charge a card."}
    assert plan_of(described, 0) == ("static", [("charge_card", "skip", ("write_committed", "result_not_recorded", "arguments_not_recorded"))])


def test_an_autogen_mcp_workbench_read_replays():
    assert plan_of(AUTOGEN, 0, "read") == ("dynamic", [("charge_card", "replay", ("declared_read", "arguments_not_recorded"))])


@pytest.mark.parametrize("output", [PART, f"[{PART}]", '[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}]'])
def test_an_agents_sdk_mcp_write_ended_ok_is_held(output):
    assert plan_of({**AGENTS_JS, "output.value": output, "output.mime_type": "application/json"}, 1) == (
        "review", [("charge_card", "review", ("write_outcome_unrecorded",))]
    )


@pytest.mark.parametrize("output", ["charged ch_1", '{"charge":"ch_1"}', '{"type":"charge","id":"ch_1"}', "[]"])
def test_an_agents_sdk_function_tool_write_ended_ok_commits(output):
    assert plan_of({**AGENTS_JS, "output.value": output}, 1) == ("injected", [("charge_card", "skip", ("write_committed",))])


@pytest.mark.parametrize("attributes", [
    {"openinference.span.kind": "TOOL", "tool.name": "charge_card", "input.value": '{"customer":"a"}', "output.value": PART},
    {"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}',
     "gen_ai.tool.call.result": PART},
    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": f"[{PART}]"},
], ids=["openinference", "openllmetry", "genai"])
def test_a_content_part_from_any_producer_holds_an_ok_write(attributes):
    """The shape is the mark, not the producer: content parts alone are a CallToolResult whose isError was dropped."""
    assert plan_of(attributes, 1) == ("review", [("charge_card", "review", ("write_outcome_unrecorded",))])


@pytest.mark.parametrize("result", ['{"type": []}', '[{"type": {"text": "x"}}]'], ids=["list", "object"])
def test_a_result_whose_type_is_no_string_is_an_ordinary_result_not_a_crash(result):
    """A fuzz find: a ``type`` holding a list reached a set membership test (TypeError, unhashable) and the span's trace
    was lost to the exception; it is no MCP content part, so the write reads as any result does."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": result}
    assert plan_of(attributes, 1) == ("injected", [("charge_card", "skip", ("write_committed",))])


def test_a_content_part_read_replays():
    other = {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"customer":"a"}', "output.value": PART}
    assert plan_of(other, 1, "read") == ("dynamic", [("lookup", "replay", ("declared_read",))])


def _mcp_dispatch(server_code: int | None) -> tuple[str, list]:
    """A content-part write step (the Agents SDK's record), its MCP client span below, and the MCP server's span of
    the call below that with status ``server_code`` (``None``: the server's spans are not in the trace)."""
    root = json_span(TRACE, ROOT, "Agent Workflow")
    step = json_span(TRACE, "c1" * 8, "charge_card.tool", ROOT, **{"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool",
                     "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": PART,
                     "tracefence.effect": "write"})
    step["status"] = {"code": 1}
    client = json_span(TRACE, "c2" * 8, "MCP send tools/call charge_card", "c1" * 8, **{"mcp.method.name": "tools/call", "jsonrpc.request.id": "7"})
    client["kind"] = 3
    spans = [root, step, client]
    if server_code is not None:
        server = json_span(TRACE, "c3" * 8, "tools/call charge_card", "c2" * 8, **{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                           "gen_ai.tool.name": "charge_card", "tracefence.effect": "write", **({"error.type": "tool_error"} if server_code == 2 else {})})
        server["kind"] = 2
        server["status"] = {"code": server_code}
        spans.append(server)
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    return trace.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


def test_an_mcp_dispatched_content_part_write_without_the_server_span_is_held():
    assert _mcp_dispatch(None) == ("review", [("charge_card", "review", ("write_outcome_unrecorded",))])


@pytest.mark.parametrize("code", [0, 1], ids=["unset", "ok"])
def test_the_mcp_servers_ok_span_of_the_call_is_the_evidence_it_committed(code):
    assert _mcp_dispatch(code) == ("injected", [("charge_card", "skip", ("write_committed",))])


def test_the_mcp_servers_tool_error_fails_the_write():
    assert _mcp_dispatch(2) == ("review", [("charge_card", "review", ("write_error", "dispatch_attempt_failed"))])


def _mcp_client_call(server_code: int | None, *, under_a_step: bool = False) -> tuple[str, list]:
    """An MCP client's tools/call span (the MCP Python SDK 2.x: no result, UNSET on isError) of a write the operator's
    rule names, alone or below a framework step that recorded a result, with the server's span below it (status
    ``server_code``; ``None``: the server's spans are not in the trace)."""
    spans = [json_span(TRACE, ROOT, "invoke_agent billing")]
    parent = ROOT
    if under_a_step:
        step = json_span(TRACE, "c1" * 8, "execute_tool charge_card", ROOT, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card",
                         "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": '{"charge": "ch_1"}'})
        spans.append(step)
        parent = "c1" * 8
    client = json_span(TRACE, "c2" * 8, "MCP send tools/call charge_card", parent, **{"mcp.method.name": "tools/call", "jsonrpc.request.id": "2"})
    client["kind"] = 3
    spans.append(client)
    if server_code is not None:
        server = json_span(TRACE, "c3" * 8, "tools/call charge_card", "c2" * 8, **{"mcp.method.name": "tools/call", **({"error.type": "tool_error"} if server_code == 2 else {})})
        server["kind"] = 2
        server["status"] = {"code": server_code}
        spans.append(server)
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]})
    config = TraceFenceConfig(tool_rules=[{"match": "charge_card", "effect": "write"}])
    (trace,), _ = plan_text(document, "otlp-json", config)
    return trace.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


def test_an_mcp_client_call_alone_is_held_its_status_says_nothing_of_is_error():
    """DECISIONS 988 (a fail-open found beside the Logfire row: an isError charge planned skip, the trace static)."""
    assert _mcp_client_call(None) == ("review", [("charge_card", "review", ("write_outcome_unrecorded", "result_not_recorded", "arguments_not_recorded"))])


def test_the_mcp_servers_ok_span_below_a_client_call_is_the_evidence_it_committed():
    assert _mcp_client_call(0) == ("static", [("charge_card", "skip", ("write_committed", "result_not_recorded", "arguments_not_recorded"))])


def test_the_mcp_servers_tool_error_below_a_client_call_fails_it():
    assert _mcp_client_call(2) == ("review", [("charge_card", "review", ("write_error", "arguments_not_recorded", "dispatch_attempt_failed"))])


def test_an_mcp_client_call_below_a_framework_step_leaves_the_step_to_its_own_rules():
    assert _mcp_client_call(None, under_a_step=True) == ("injected", [("charge_card", "skip", ("write_committed",))])


def test_the_reason_names_the_path():
    assert status_blind_path(AUTOGEN, None) == (
        "a span of autogen BaseTool.run_json (FunctionTool)'s producer without gen_ai.tool.description: not that path, "
        "the one whose failures end the span ERROR"
    )
    assert status_blind_path(AGENTS_JS, '{"text":"card declined","type":"text"}') == (
        "a result of MCP content parts alone, the CallToolResult without its isError (MCP reports a tool's failure as a result with isError true)"
    )
    assert status_blind_path(AGENTS_JS, '"charged"') is None


REPR = "TextContent(type='text', text='card declined', annotations=None, meta=None)"
SK_REPR = f"[TextContent(inner_content={REPR}, ai_model_id=None, metadata={{}}, text='card declined')]"


@pytest.mark.parametrize("output", [REPR, "ImageContent(type='image', data='AA==', mimeType='image/png')",
                                    "EmbeddedResource(type='resource', resource=TextResourceContents(uri='file:///a', text='a'))"],
                         ids=["text", "image", "resource"])
def test_the_mcp_sdks_repr_of_a_content_part_holds_an_ok_write(output):
    """Text holding the MCP Python SDK's own repr of its content models is the same record as the JSON parts (DECISIONS 801)."""
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": output}
    assert plan_of(genai, 1) == ("review", [("charge_card", "review", ("write_outcome_unrecorded",))])


def test_semantic_kernels_wrapped_repr_is_held_and_named():
    """Semantic Kernel's list repr does not parse as the JSON it opens like: truncated (DECISIONS 340), and unrecorded (801)."""
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": SK_REPR}
    assert plan_of(genai, 1) == ("review", [("charge_card", "review", ("result_truncated", "write_outcome_unrecorded"))])


def test_a_repr_holding_is_error_false_is_not_held_by_it():
    recorded = f"meta=None content=[{REPR}] structuredContent=None isError=False"
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": recorded}
    assert plan_of(genai, 1) == ("injected", [("charge_card", "skip", ("write_committed",))])


@pytest.mark.parametrize("output", ["the type='text' of TextContent", "Content(type='text')", "charged ch_1"])
def test_text_that_only_looks_like_the_repr_commits(output):
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": output}
    assert plan_of(genai, 1) == ("injected", [("charge_card", "skip", ("write_committed",))])


def test_a_repr_read_replays():
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.arguments": '{"customer":"a"}', "gen_ai.tool.call.result": REPR}
    assert plan_of(genai, 1, "read") == ("dynamic", [("lookup", "replay", ("declared_read",))])


# OpenLLMetry's LangChain handler (0.62.4) on a LangGraph tool span: a handled error ends it unset and writes
# gen_ai.task.status=success (DECISIONS 955); with content traced, the ToolMessage shows the outcome.
LANGGRAPH_OPENLLMETRY = {
    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.provider.name": "langgraph",
    "traceloop.span.kind": "tool", "traceloop.entity.name": "charge_card", "gen_ai.task.status": "success",
}


def test_an_openllmetry_langgraph_write_with_no_result_is_held_its_status_says_nothing():
    assert plan_of(LANGGRAPH_OPENLLMETRY, 0) == (
        "review", [("charge_card", "review", ("write_outcome_unrecorded", "result_not_recorded", "arguments_not_recorded"))]
    )


def test_an_openllmetry_langgraph_write_whose_result_reads_as_success_commits():
    result = {"traceloop.entity.output": json.dumps({"output": {"content": "charged ch_1", "type": "tool", "tool_call_id": "c1", "status": "success"}})}
    assert plan_of({**LANGGRAPH_OPENLLMETRY, **result}, 0) == ("injected", [("charge_card", "skip", ("write_committed", "arguments_not_recorded"))])


def test_an_openllmetry_langgraph_read_with_no_result_replays():
    assert plan_of(LANGGRAPH_OPENLLMETRY, 0, "read") == ("dynamic", [("charge_card", "replay", ("declared_read", "arguments_not_recorded"))])


# OpenLLMetry's Agno instrumentation (0.62.4): the tool span ends OK whenever FunctionCall.execute returns, and Agno
# returns a raised tool as status='failure' (DECISIONS 981); with content traced, the result's text shows the outcome.
AGNO_OPENLLMETRY = {"gen_ai.system": "agno", "traceloop.span.kind": "tool", "traceloop.entity.name": "refund_order", "gen_ai.tool.name": "refund_order"}


def test_an_openllmetry_agno_write_with_no_result_is_held_its_status_says_nothing():
    assert plan_of(AGNO_OPENLLMETRY, 1) == ("review", [("refund_order", "review", ("write_outcome_unrecorded", "result_not_recorded", "arguments_not_recorded"))])


def test_an_openllmetry_agno_write_whose_result_says_success_commits():
    result = {"traceloop.entity.output": "status='success' result='refunded' error=None updated_session_state=None"}
    assert plan_of({**AGNO_OPENLLMETRY, **result}, 1) == ("injected", [("refund_order", "skip", ("write_committed", "arguments_not_recorded"))])


def test_an_openllmetry_agno_read_with_no_result_replays():
    assert plan_of(AGNO_OPENLLMETRY, 1, "read") == ("dynamic", [("refund_order", "replay", ("declared_read", "arguments_not_recorded"))])
