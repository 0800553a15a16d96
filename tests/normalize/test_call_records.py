"""Requested calls recorded as call records (``{"toolCallId", "toolName", "args"|"input"|"toolInput"}``) in a
framework's own output objects (``conventions.CALL_RECORD_KEYS``: Mastra 1.x), a record of the same call id and tool
without arguments being the same request, a model span whose enclosing step span recorded its turn's calls, and a
stream-chunk span that names a known call (docs/DECISIONS.md 959). Exact plans through ``tracefence plan``'s function."""

from __future__ import annotations

import json

from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig, ToolRule
from otel_tracefence.pipeline.documents import plan_text

TRACE = "ab" * 16
AGENT, STEP, CHAT, TOOL, CHUNK = "c0" * 8, "c1" * 8, "c2" * 8, "c3" * 8, "c4" * 8
CALL = {"toolCallId": "call_w1", "toolName": "create_invoice", "args": {"customer": "a", "amount_cents": 1200}}
CONFIG = TraceFenceConfig(tool_rules=[ToolRule(match="create_invoice", effect="write")])


def plan_of(*spans: dict) -> tuple:
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]})
    (trace,), _ = plan_text(document, "otlp-json", CONFIG)
    cls = trace.replay_class.value if trace.replay_class is not None else None
    return cls, [(d.step.call_id, d.decision.value, d.reasons) for d in trace.steps]


def agent(output: dict) -> dict:
    return json_span(TRACE, AGENT, "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent", "mastra.agent_run.output": json.dumps(output)})


def step(calls: list) -> dict:
    return json_span(TRACE, STEP, "agent_step billing", AGENT, **{"gen_ai.operation.name": "agent_step", "mastra.model_step.output": json.dumps({"text": "", "toolCalls": calls})})


def chat() -> dict:
    return json_span(TRACE, CHAT, "chat scripted", STEP, **{"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": '["tool-calls"]',
                                                           "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": []}])})


def tool() -> dict:
    return json_span(TRACE, TOOL, "execute_tool create_invoice", STEP, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_invoice", "gen_ai.tool.call.id": "call_w1",
        "gen_ai.tool.call.arguments": json.dumps(CALL["args"]), "gen_ai.tool.call.result": '{"invoice": "inv_1"}'})


def test_a_run_suspended_before_its_call_ran_holds_the_requested_write():
    suspended = {"status": "suspended", "reason": "tool-call-approval", "toolName": "create_invoice", "toolCallId": "call_w1"}
    assert plan_of(agent(suspended), step([CALL]), chat()) == ("review", [("call_w1", "review", ("write_status_unknown", "requested_not_recorded"))])


def test_a_call_recorded_in_the_step_and_run_by_its_tool_span_is_one_committed_write():
    chunk = json_span(TRACE, CHUNK, "model_chunk billing", CHAT, **{"mastra.metadata.toolCallId": "call_w1", "mastra.metadata.toolName": "create_invoice"})
    assert plan_of(agent({"text": "done"}), step([CALL]), chat(), tool(), chunk) == ("injected", [("call_w1", "skip", ("write_committed",))])


def test_a_chunk_naming_a_call_no_record_holds_is_still_held():
    chunk = json_span(TRACE, CHUNK, "model_chunk billing", AGENT, **{"mastra.metadata.toolCallId": "call_zz", "mastra.metadata.toolName": "delete_all"})
    cls, steps = plan_of(agent({"text": "done"}), step([CALL]), tool(), chunk)
    assert cls == "review" and ("c4" * 8, "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded")) in steps


def test_an_output_object_without_call_records_requests_nothing():
    assert plan_of(agent({"text": "done", "files": []})) == (None, [])


def test_a_producers_own_tool_operation_and_plain_output_records_are_read():
    # Mastra 0.24: tool spans under gen_ai.operation.name "tool.execute" (gen_ai.tool.input / .output), the model's calls
    # as records under a plain "output" on its model.step span, the stream's chunk span a record of the same call.
    step_span = json_span(TRACE, STEP, "step: 0", AGENT, **{"gen_ai.operation.name": "model.step", "output": json.dumps({"toolCalls": [CALL]})})
    chunk = json_span(TRACE, CHUNK, "chunk: 'tool-result'", STEP, **{"gen_ai.operation.name": "model.chunk", "output": json.dumps({**CALL, "result": "inv_1"})})
    tool = json_span(TRACE, TOOL, "tool.execute create_invoice", STEP, **{"gen_ai.operation.name": "tool.execute", "gen_ai.tool.name": "create_invoice",
                                                                          "gen_ai.tool.input": json.dumps(CALL["args"]), "gen_ai.tool.output": "invoice inv_1"})
    assert plan_of(agent({"text": "done"}), step_span, tool, chunk) == ("injected", [(TOOL, "skip", ("write_committed",))])
