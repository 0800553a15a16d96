"""Commit on evidence, not on silence (issue 24 A and section 2, docs/DECISIONS.md 400-403): a write is ``skip`` only
when the trace shows it committed. Exact decisions, reasons and classes of traces planned as ``tracefence plan`` plans
them (the shared normalizer and planner); tests/cases/test_commit_evidence_doors.py runs some through all three doors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig

TRACE = "4e" * 16
ROOT = "a0" * 8


def document(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]})


def root() -> dict:
    return json_span(TRACE, ROOT, "invoke_agent desk", **{"gen_ai.operation.name": "invoke_agent"})


def openinference(span_id: str, tool: str, effect: str, output: Any = None, **extra: Any) -> dict:
    """An OpenInference TOOL span (openai-agents, smolagents, LlamaIndex, LangChain under OpenInference)."""
    attributes = {"openinference.span.kind": "TOOL", "tool.name": tool, "input.value": '{"id": "X-1"}', "input.mime_type": "application/json",
                  "tracefence.effect": effect}  # fmt: skip
    if output is not None:
        attributes["output.value"] = output if isinstance(output, str) else json.dumps(output)
    return json_span(TRACE, span_id, tool, ROOT, **attributes, **extra)


def genai(span_id: str, tool: str, effect: str, result: Any = None, **extra: Any) -> dict:
    """A GenAI semantic-conventions execute_tool span (content capture is opt-in there)."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": f"call-{span_id[:4]}",
                  "gen_ai.tool.call.arguments": '{"id": "X-1"}', "tracefence.effect": effect}  # fmt: skip
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result if isinstance(result, str) else json.dumps(result)
    return json_span(TRACE, span_id, f"execute_tool {tool}", ROOT, **attributes, **extra)


def openllmetry(span_id: str, tool: str, effect: str, output: Any = None, **extra: Any) -> dict:
    """OpenLLMetry's LangChain / LangGraph handler: traceloop.* with gen_ai.* beside it."""
    attributes = {"traceloop.span.kind": "tool", "traceloop.entity.name": tool, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                  "traceloop.entity.input": '{"inputs": {"id": "X-1"}}', "gen_ai.task.status": "success", "tracefence.effect": effect}  # fmt: skip
    if output is not None:
        text = output if isinstance(output, str) else json.dumps(output)
        attributes["traceloop.entity.output"] = text
        attributes["gen_ai.tool.call.result"] = text
    attributes.update(extra)
    return json_span(TRACE, span_id, f"execute_tool {tool}", ROOT, **attributes)


def vercel(span_id: str, tool: str, effect: str, result: Any = None) -> dict:
    attributes = {"ai.toolCall.name": tool, "ai.toolCall.id": f"call-{span_id[:4]}", "ai.toolCall.args": '{"id": "X-1"}', "tracefence.effect": effect}
    if result is not None:
        attributes["ai.toolCall.result"] = json.dumps(result)
    return json_span(TRACE, span_id, "ai.toolCall", ROOT, **attributes)


def plan(*spans: dict) -> tuple[str, list[tuple[str, str, tuple[str, ...]]]]:
    """(class, [(tool, decision, reasons)]) of the one trace of ``spans`` under a root span."""
    (trace,), _ = plan_text(document(root(), *spans), "otlp-json", TraceFenceConfig())
    return trace.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


READ_OK = {"id": "X-1", "state": "open"}
WRITE_OK = {"booking": "B-7"}
FAILED = ("write_error", "error_template_in_result")


# -- 1. a framework's own error or timeout text returned as the tool's output --------------------------------------

TEMPLATES = {
    "openai_agents_default_error": "An error occurred while running the tool. Please try again. Error: carrier API closed the connection",
    "openai_agents_fixed_error": "An error occurred while running the tool. Please try again.",
    "openai_agents_bad_json": "An error occurred while parsing tool arguments. Please try again with valid JSON. Error: Expecting value: line 1",
    "openai_agents_timeout": "Tool 'book_carrier' timed out after 2.5 seconds.",
    "langgraph_toolnode": "Error: ConnectionError('reset by peer')\n Please fix your mistakes.",
    "langgraph_execution": "Error executing tool 'book_carrier' with kwargs {'id': 'X-1'} with error:\n boom\n Please fix the error and try again.",
    "langchain_tool_exception": "Tool execution error",
    "crewai_usage_exception": "I encountered an error while trying to use the tool. This was the error: 503.\n Tool book_carrier accepts these inputs: ...",
    "smolagents": "Error executing tool 'book_carrier' with arguments {\"id\": \"X-1\"}: TimeoutError: read timed out\nPlease try again or use another tool",
    "mcp_server_tool_error": "Error executing tool book_carrier: carrier API closed the connection",  # FastMCP 1.x, MCPServer 2.x
    "mcp_server_unexpected_error": "Error executing tool book_carrier",  # MCPServer 2.x hides an unexpected error's text
    "autogen_tool_not_found": "Error: tool 'book_carrier' not found in any workbench",
    "agno_mcp_tool_failed": "MCP tool 'book_carrier' failed: Request 'tools/call' timed out. The MCP server may be unreachable",
    "agno_mcp_is_error": "Error from MCP tool 'book_carrier': carrier API closed the connection",
    # A result object recorded as its Python text (agno's FunctionExecutionResult under OpenLLMetry; a dataclass repr).
    "repr_status_failure": "status='failure' result=None error='carrier refused: 402' images=None",
    "repr_dataclass_error": "ToolResult(status=\"error\", content='carrier API closed the connection')",
}


@pytest.mark.parametrize("text", list(TEMPLATES.values()), ids=list(TEMPLATES))
def test_a_frameworks_error_text_as_a_writes_output_is_an_error(text: str) -> None:
    assert plan(openinference("b1" * 8, "get_order", "read", READ_OK), openinference("b2" * 8, "book_carrier", "write", text)) == (
        "review", [("get_order", "replay", ("declared_read",)), ("book_carrier", "review", FAILED)])


@pytest.mark.parametrize(
    "result",
    [
        json.dumps(TEMPLATES["openai_agents_default_error"]),  # the text as a JSON string
        [{"type": "text", "text": TEMPLATES["crewai_usage_exception"]}],  # a text part (MCP, the AI SDK)
        {"content": TEMPLATES["langgraph_toolnode"], "type": "tool", "tool_call_id": "call-1"},  # a ToolMessage with no status
        {"output": {"messages": [TEMPLATES["smolagents"]]}},  # in a list, two levels down
    ],
    ids=["json_string", "text_part", "tool_message_content", "nested_list"],
)
def test_the_error_text_is_found_inside_a_json_result_too(result: Any) -> None:
    assert plan(genai("b1" * 8, "book_carrier", "write", result)) == ("review", [("book_carrier", "review", FAILED)])


def test_text_that_only_mentions_an_error_is_no_template() -> None:
    # The templates match at the start of the text, as the frameworks write them: a result that talks about errors is a result.
    said = "Booked B-7. Note: An error occurred while running the tool. Please try again. was shown yesterday"
    assert plan(genai("b1" * 8, "book_carrier", "write", said), genai("b2" * 8, "notify", "write", {"content": "Error: none"})) == (
        "injected", [("book_carrier", "skip", ("write_committed",)), ("notify", "skip", ("write_committed",))])


def test_text_after_the_mcp_servers_tool_name_makes_no_template() -> None:
    # "Error executing tool <name>" is the whole text or is followed by ": " and the error: a name in quotes is
    # another framework's template (LangGraph's, smolagents'), words after the name are a result.
    said = "Error executing tool book_carrier was retried and booked B-7"
    assert plan(genai("b1" * 8, "book_carrier", "write", said)) == ("injected", [("book_carrier", "skip", ("write_committed",))])


def test_a_read_that_returned_an_error_text_still_replays() -> None:
    assert plan(openinference("b1" * 8, "get_order", "read", TEMPLATES["openai_agents_timeout"])) == (
        "dynamic", [("get_order", "replay", ("declared_read", "error_template_in_result"))])


# -- 2. LangChain's ToolMessage with status error, wherever the framework nests it -----------------------------------


def tool_message(status: str, content: str = "carrier API closed the connection") -> dict:
    """A ToolMessage as langchain_core.load.dumpd serializes it."""
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
            "kwargs": {"content": content, "type": "tool", "name": "book_carrier", "tool_call_id": "call_V1", "status": status}}  # fmt: skip


@pytest.mark.parametrize(
    "output",
    [
        tool_message("error"),  # the message itself (OpenInference LangChain collapses a one-key output)
        {"output": tool_message("error"), "kwargs": {"tags": []}},  # OpenLLMetry: under "output"
        {"update": {"messages": [tool_message("error")]}},  # a LangGraph Command, three levels down
        {"messages": [{"content": "x", "type": "tool", "tool_call_id": "call_V1", "status": "error"}]},  # model_dump(), not dumpd()
    ],
    ids=["bare", "openllmetry_output", "langgraph_command", "model_dump"],
)
def test_a_tool_message_with_status_error_is_an_error(output: dict) -> None:
    assert plan(openllmetry("b1" * 8, "book_carrier", "write", output), openllmetry("b2" * 8, "post_notice", "write", {"output": tool_message("success")})) == (
        "review", [("book_carrier", "review", ("write_error", "error_in_result")), ("post_notice", "skip", ("write_committed",))])


def test_a_serialized_message_of_another_class_is_not_read_as_a_tool_message() -> None:
    other = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], "kwargs": {"content": "ok", "status": "error"}}
    assert plan(openllmetry("b1" * 8, "book_carrier", "write", {"output": {"reply": other}})) == ("injected", [("book_carrier", "skip", ("write_committed",))])


# -- 3. a framework status attribute the normalizer does not know -------------------------------------------------


@pytest.mark.parametrize(
    "key,value",
    [
        ("crewai.tool.status", "ERROR"),
        ("app.tool.status", "failed"),
        ("agent.toolStatus", "cancelled"),  # camelCase
        ("tool.error", "connection reset by peer"),
        ("myframework.tool.failed", True),
        ("acme.tool.timed_out", True),
        ("acme.toolTimeout", "true"),
        ("tool.success", False),
        ("app.tool.status_code", 503),
        ("app.tool.errors", ["E1"]),
    ],
)
def test_a_failure_attribute_nobody_reads_holds_a_write(key: str, value: Any) -> None:
    cls, steps = plan(openllmetry("b1" * 8, "book_carrier", "write", {"output": tool_message("success")}, **{key: value}))
    assert (cls, steps) == ("review", [("book_carrier", "review", ("unrecognized_failure_evidence",))])


@pytest.mark.parametrize("key,value", [("gen_ai.task.status", "failure"), ("gen_ai.tool.status", "error"), ("gen_ai.tool.status", "timeout")])
def test_a_frameworks_own_status_attribute_is_read_as_the_calls_status(key: str, value: str) -> None:
    # OpenLLMetry's gen_ai.task.status, Strands' gen_ai.tool.status: known keys, read as the status (the span says unset).
    assert plan(openllmetry("b1" * 8, "book_carrier", "write", {"output": tool_message("success")}, **{key: value})) == (
        "review", [("book_carrier", "review", ("write_error", "framework_status_error"))])


@pytest.mark.parametrize(
    "key,value",
    [
        ("gen_ai.task.status", "success"),
        ("app.tool.status", "Completed"),
        ("app.tool.status_code", 200),
        ("otel.status_code", "OK"),
        ("tool.error", ""),
        ("tool.failed", False),
        ("tool.timeout", 30),  # a setting, not an outcome
        ("tool.timeout_ms", "5000ms"),
        ("tool.success", True),
        ("tool.errors", []),
    ],
)
def test_a_success_value_leaves_the_write_committed(key: str, value: Any) -> None:
    assert plan(openllmetry("b1" * 8, "book_carrier", "write", {"output": tool_message("success")}, **{key: value})) == (
        "injected", [("book_carrier", "skip", ("write_committed",))])


def test_a_failure_attribute_on_a_read_changes_nothing() -> None:
    assert plan(openllmetry("b1" * 8, "get_order", "read", READ_OK, **{"app.tool.status": "failed"})) == ("dynamic", [("get_order", "replay", ("declared_read",))])


# -- 4. a write with no result, where its producer records results ------------------------------------------------

UNRECORDED = ("write_outcome_unrecorded", "result_not_recorded")


def test_openinference_write_with_no_output_beside_a_read_with_one_is_held() -> None:
    # openai-agents under OpenInference: the run was cancelled while the write ran; the span says OK, no output.
    assert plan(openinference("b1" * 8, "get_vehicle", "read", READ_OK), openinference("b2" * 8, "schedule_tow", "write", **{})) == (
        "review", [("get_vehicle", "replay", ("declared_read",)), ("schedule_tow", "review", UNRECORDED)])


@pytest.mark.parametrize("make", [openinference, openllmetry], ids=["openinference", "openllmetry"])
def test_a_write_alone_of_a_producer_that_records_results_by_default_is_held(make: Any) -> None:
    assert plan(make("b2" * 8, "schedule_tow", "write")) == ("review", [("schedule_tow", "review", UNRECORDED)])


def test_vercel_ai_write_without_a_result_beside_one_with_a_result_is_held() -> None:
    assert plan(vercel("b1" * 8, "sendPayout", "write", WRITE_OK), vercel("b2" * 8, "sendPayout2", "write")) == (
        "review", [("sendPayout", "skip", ("write_committed",)), ("sendPayout2", "review", UNRECORDED)])


def test_content_capture_off_stays_static() -> None:
    # OPENINFERENCE_HIDE_OUTPUTS: no tool span of the trace carries an output, so the missing one says nothing.
    assert plan(openinference("b1" * 8, "get_vehicle", "read"), openinference("b2" * 8, "schedule_tow", "write")) == (
        "static", [("get_vehicle", "replay", ("declared_read",)), ("schedule_tow", "skip", ("write_committed", "result_not_recorded"))])


def test_an_opt_in_producer_is_taken_at_its_word() -> None:
    # GenAI semantic conventions: gen_ai.tool.call.result is opt-in and set per call; a write without it stays static,
    # as the shared cases charge_retry and pager_static expect.
    assert plan(genai("b1" * 8, "get_order", "read", READ_OK), genai("b2" * 8, "email.send", "write")) == (
        "static", [("get_order", "replay", ("declared_read",)), ("email.send", "skip", ("write_committed", "result_not_recorded"))])


def test_a_producer_not_in_the_table_is_judged_by_the_trace() -> None:
    labelled = lambda span_id, tool, effect, result=None: json_span(  # noqa: E731
        TRACE, span_id, tool, ROOT, **{"tracefence.effect": effect, "tool.name": tool, "tool_arguments": "{}", **({"tool_response": json.dumps(result)} if result else {})})
    assert plan(labelled("b1" * 8, "get_order", "read", READ_OK), labelled("b2" * 8, "book", "write")) == (
        "review", [("get_order", "replay", ("declared_read",)), ("book", "review", UNRECORDED)])
    assert plan(labelled("b2" * 8, "book", "write")) == ("static", [("book", "skip", ("write_committed", "result_not_recorded"))])


def test_a_write_with_no_result_from_another_producer_is_not_judged_by_this_ones_results() -> None:
    assert plan(openinference("b1" * 8, "get_order", "read", READ_OK), genai("b2" * 8, "email.send", "write")) == (
        "static", [("get_order", "replay", ("declared_read",)), ("email.send", "skip", ("write_committed", "result_not_recorded"))])


def test_rows_are_not_judged_so() -> None:
    # A row's writer declared its status and result: a write row without a result stays committed.
    rows = "\n".join(json.dumps(r) for r in [
        {"trace_id": "t", "call_id": "a1", "tool": "ticket.get", "effect": "read", "status": "ok", "arguments": {}, "result": {"id": 1}},
        {"trace_id": "t", "call_id": "a2", "tool": "ticket.close", "effect": "write", "status": "ok", "arguments": {"id": 1}},
    ])  # fmt: skip
    (trace,), _ = plan_text(rows, "ndjson", TraceFenceConfig())
    assert (trace.replay_class.value, [(d.decision.value, d.reasons) for d in trace.steps]) == (
        "static", [("replay", ("declared_read",)), ("skip", ("write_committed", "result_not_recorded"))])


def test_every_template_has_its_source_and_holds_a_word_the_prefilter_looks_for() -> None:
    from otel_tracefence.normalize.framework_texts import FRAMEWORK_ERROR_TEMPLATES
    from otel_tracefence.normalize.result_errors import template_hint

    assert all(framework and versions and source for framework, versions, _, source in FRAMEWORK_ERROR_TEMPLATES)
    assert all(template_hint(text) for text in TEMPLATES.values())
    assert all(template_hint(pattern.replace("\\", "")) for _, _, pattern, _ in FRAMEWORK_ERROR_TEMPLATES)
