"""Logfire's OpenAI Agents bridge (``logfire.instrument_openai_agents``) read as a tool convention (docs/DECISIONS.md
991-994): a span whose ``logfire.msg_template`` is ``Function: {name}`` is a tool span (``conventions.TOOL_KIND_MARKERS``),
its fields plain keys read on it only (``conventions.MARKED_TOOL_FIELDS``): the tool ``name``, the arguments ``input``,
the result ``output`` (the text ``null`` its ``logfire.json_schema`` types null is no result), the failure ``error``
read where the span's status says error; the model's requests in the ``Responses API`` span's ``response``; the
``Agent run`` and ``MCP: list tools`` spans are no tool activity."""

from __future__ import annotations

import json

from otlp_json_helpers import json_span, json_value

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "ab" * 16
AGENT, MODEL, TOOL = "a0" * 8, "a1" * 8, "a2" * 8
FUNCTION = "Function: {name}"
ARGS = '{"customer": "a", "amount_cents": 1200}'
SCHEMA = {"type": "object", "properties": {"name": {}, "input": {}, "output": {}, "mcp_data": {"type": "null"}, "gen_ai.system": {}}}
ERROR_ATTRIBUTE = json.dumps({"message": "Error running tool (non-fatal)", "data": {"tool_name": "create_invoice", "error": "Tool execution failed."}})
AGENT_RUN = {"logfire.msg_template": "Agent run: {name!r}", "name": "billing", "tools": '["lookup_customer","create_invoice"]', "gen_ai.system": "openai"}
RESPONSE = {"id": "resp_1", "object": "response", "output": [
    {"type": "function_call", "call_id": "call_w1", "name": "create_invoice", "arguments": ARGS, "id": "fc_call_w1", "status": "completed"}]}


def span(span_id: str, span_name: str, parent: str, attributes: dict) -> dict:
    """``json_span`` with ``attributes`` given as a dict (Logfire's key ``name`` is the helper's parameter)."""
    found = json_span(TRACE, span_id, span_name, parent)
    found["attributes"] = [{"key": k, "value": json_value(v)} for k, v in attributes.items()]
    return found


def function_span(effect: str = "write", output: str = "invoice inv_1", schema: dict | None = None, error: bool = False, **extra) -> dict:
    attributes = {"logfire.msg_template": FUNCTION, "logfire.span_type": "span", "name": "create_invoice", "input": ARGS, "output": output,
                  "mcp_data": "null", "gen_ai.system": "openai", "logfire.msg": "Function: create_invoice", "logfire.json_schema": json.dumps(schema or SCHEMA)}
    if effect:
        attributes["tracefence.effect"] = effect
    if error:
        attributes |= {"error": ERROR_ATTRIBUTE, "logfire.level_num": 17}
    found = span(TOOL, FUNCTION, AGENT, attributes | extra)
    if error:
        found["status"] = {"code": 2, "message": "Error running tool (non-fatal)"}
    return found


def plan_of(*spans: dict) -> tuple:
    """The plan of ``spans`` under an ``Agent run`` root span: (class, [(tool, decision, reasons)], the decisions)."""
    root = span(AGENT, "Agent run: {name!r}", "", AGENT_RUN)
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "logfire.openai_agents"}, "spans": [root, *spans]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    cls = trace.replay_class.value if trace.replay_class is not None else None
    return cls, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps], trace.steps


def test_a_function_span_is_a_tool_step_named_by_its_name_attribute_with_input_and_output_read():
    cls, steps, (decision,) = plan_of(function_span())
    assert (cls, steps) == ("injected", [("create_invoice", "skip", ("write_committed",))])
    assert (decision.step.arguments_unavailable, decision.step.result_recorded) == (None, True)


def test_a_declared_read_replays():
    assert plan_of(function_span("read", output='{"id": "a", "plan": "pro"}'))[:2] == ("dynamic", [("create_invoice", "replay", ("declared_read",))])


def test_the_error_attribute_repeats_an_error_status_and_is_read():
    assert plan_of(function_span(error=True))[:2] == ("review", [("create_invoice", "review", ("write_error",))])


def test_the_error_attribute_on_a_span_whose_status_says_no_error_holds_the_write():
    """Logfire always ends such a span ERROR; one that does not is not understood (DECISIONS 993)."""
    found = function_span(error=True)
    del found["status"]
    assert plan_of(found)[:2] == ("review", [("create_invoice", "review", ("unrecognized_failure_evidence",))])


def test_none_written_as_the_text_null_and_typed_null_is_no_result():
    schema = {"type": "object", "properties": {"name": {}, "input": {"type": "null"}, "output": {"type": "null"}}}
    cls, steps, (decision,) = plan_of(function_span(output="null", schema=schema, input="null"))
    assert (cls, steps) == ("review", [("create_invoice", "review", ("write_outcome_unrecorded", "result_not_recorded", "arguments_not_recorded"))])
    assert decision.step.result_recorded is False


def test_the_text_null_its_schema_does_not_type_null_is_a_result():
    """A tool that returned the string "null": Logfire's schema gives it no type, so it is a recorded result."""
    cls, steps, (decision,) = plan_of(function_span(output="null"))
    assert (cls, steps, decision.step.result_recorded) == ("injected", [("create_invoice", "skip", ("write_committed",))], True)


def test_the_plain_keys_are_read_on_the_marked_span_only():
    """``name`` / ``input`` / ``output`` on a span no marker names are not a tool call's fields: the span is no tool."""
    attributes = {"logfire.msg_template": "Task: {name}", "name": "create_invoice", "input": ARGS, "output": "done"}
    assert plan_of(span(TOOL, "Task: {name}", AGENT, attributes))[:2] == (None, [])


def test_the_agent_run_span_s_tools_list_is_no_tool_activity():
    assert plan_of()[:2] == (None, [])


def test_the_mcp_tool_listing_span_is_no_tool_call():
    listing = {"logfire.msg_template": "MCP: list tools from server {server}", "server": "stdio: billing", "result": '["charge_card"]'}
    assert plan_of(span(TOOL, "MCP: list tools from server {server}", AGENT, listing))[:2] == (None, [])


def test_a_call_in_the_model_span_s_response_that_no_span_ran_is_held():
    model = span(MODEL, "Responses API", AGENT, {"logfire.msg_template": "Responses API", "gen_ai.operation.name": "chat",
                                                                "gen_ai.system": "openai", "response": json.dumps(RESPONSE)})
    assert plan_of(model)[:2] == (
        "review", [("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))])


def test_a_call_in_the_model_span_s_response_matched_to_its_function_span():
    model = span(MODEL, "Responses API", AGENT, {"logfire.msg_template": "Responses API", "gen_ai.operation.name": "chat",
                                                                "gen_ai.system": "openai", "response": json.dumps(RESPONSE)})
    assert plan_of(model, function_span())[:2] == ("injected", [("create_invoice", "skip", ("write_committed",))])
