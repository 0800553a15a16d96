"""Safe traces that were held (issue 24, kind D; docs/DECISIONS.md 441-444): a one-parameter input recorded bare, a
framework's summary span of parallel calls, a request with no recorded arguments or answered by a span whose call id is
only in its result, pydantic-ai's output tool and Koog's ``tool.<Name>`` spans. Each with the variants that must still
be held (fail closed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from otlp_json_helpers import json_span
from door_agreement import class_of, cli_plans, decisions, otlp_file, processor_disagreements, service_disagreements

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.normalize import SpanView
from otel_tracefence.normalize.trace import normalize_trace

TRACE = "d4" * 16
ROOT, MODEL, TOOLS, TOOL, TOOL2, SUMMARY = "e1" * 8, "e2" * 8, "e3" * 8, "e4" * 8, "e5" * 8, "e6" * 8
READ = {"tracefence.effect": "read"}


def _view(span_id: str, name: str, parent: str = ROOT, **attributes: Any) -> SpanView:
    return SpanView(trace_id=TRACE, span_id=span_id, parent_span_id=parent or None, name=name, attributes=attributes,
                    start_time_unix_nano=int(span_id[:2], 16), end_time_unix_nano=int(span_id[:2], 16) + 1)  # fmt: skip


def _steps(*views: SpanView, config: TraceFenceConfig | None = None) -> list[tuple[str, bool]]:
    """(tool, requested only) of each step, sorted (executed steps before requested-only ones of a tool)."""
    return sorted((s.tool, s.requested_only) for s in normalize_trace(list(views), config or TraceFenceConfig()).steps)


def _model(*calls: tuple[str | None, str, Any], **extra: Any) -> SpanView:
    """An OpenInference LLM span whose output requests ``calls`` (id or None, tool, arguments or None)."""
    attributes: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for j, (call_id, tool, arguments) in enumerate(calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
        if call_id is not None:
            attributes[prefix + "id"] = call_id
        attributes[prefix + "function.name"] = tool
        if arguments is not None:
            attributes[prefix + "function.arguments"] = json.dumps(arguments)
    return _view(MODEL, "ChatOpenAI", **attributes, **extra)


def _oi_tool(span_id: str, tool: str, **attributes: Any) -> SpanView:
    return _view(span_id, tool, TOOLS, **{"openinference.span.kind": "TOOL", "tool.name": tool, **READ, **attributes})


# --- 1. a one-parameter input recorded as its bare value (DECISIONS 442) -----------------------------------


@pytest.mark.parametrize("requested,bare", [
    ({"isbn": "978-0-262-04630-5"}, "978-0-262-04630-5"),
    ({"order": "42"}, "42"),  # bare text that reads as a JSON number
    ({"count": 3}, "3"),
    ({"flag": True}, "true"),
    ({"query": "tides at NLRTM, 14 March"}, "tides at NLRTM, 14 March"),
], ids=["isbn", "digits", "number", "bool", "free text"])
@pytest.mark.parametrize("call_id", ["call_1", None], ids=["with id", "no id"])
def test_a_one_key_request_matches_the_span_that_recorded_its_value_bare(requested: dict, bare: str, call_id: str | None) -> None:
    assert _steps(_model((call_id, "lookup", requested)), _oi_tool(TOOL, "lookup", **{"input.value": bare})) == [("lookup", False)]


@pytest.mark.parametrize("requested,bare", [
    ({"isbn": "978-0-262-04630-5"}, "978-0-262-04630-6"),  # another value
    ({"isbn": "978-0", "branch": "W"}, "978-0"),  # two parameters: a bare value is not both
    ({"isbn": {"value": "978-0"}}, '{"value": "978-0"}'),  # an object is no bare value
], ids=["other value", "two keys", "object value"])
def test_a_bare_value_that_is_not_the_requests_one_argument_leaves_the_request_held(requested: dict, bare: str) -> None:
    assert _steps(_model(("call_1", "lookup", requested)), _oi_tool(TOOL, "lookup", **{"input.value": bare})) == [("lookup", False), ("lookup", True)]


def test_the_bare_value_case_through_every_door(tmp_path: Path, upstream: Any) -> None:
    model = json_span(TRACE, MODEL, "ChatOpenAI", ROOT, **{"openinference.span.kind": "LLM",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup_isbn",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"isbn": "978-0-262-04630-5"}'})  # fmt: skip
    tool = json_span(TRACE, TOOL, "lookup_isbn", ROOT, **{"openinference.span.kind": "TOOL", "tool.name": "lookup_isbn", "input.value": "978-0-262-04630-5",
                     "output.value": '{"title": "x"}', **READ})  # fmt: skip
    path = otlp_file(tmp_path / "b.json", json_span(TRACE, ROOT, "LangGraph", **{"openinference.span.kind": "CHAIN"}), model, tool)
    plans = cli_plans(path)
    (plan,) = plans.values()
    assert (class_of(plan), decisions(plan)) == ("dynamic", [("lookup_isbn", "replay", ["declared_read"])])
    assert processor_disagreements(path, plans) == []
    assert service_disagreements(path, plans, upstream, tmp_path) == []


# --- 2. a framework's summary span of parallel calls (DECISIONS 441) ---------------------------------------


def _genai_tool(span_id: str, tool: str, call_id: str | None, arguments: str, result: str, **extra: Any) -> SpanView:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": arguments,
                  "gen_ai.tool.call.result": result, **READ, **extra}  # fmt: skip
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    return _view(span_id, f"execute_tool {tool}", ROOT, **attributes)


def _calls(with_ids: bool) -> list[SpanView]:
    return [
        _genai_tool(TOOL, "get_berth_schedule", "call_B" if with_ids else None, '{"terminal": "D"}', '{"free": ["D3"]}'),
        _genai_tool(TOOL2, "get_tide_window", "call_T" if with_ids else None, '{"port": "NLRTM"}', '{"windows": []}'),
    ]


TRPC_RESULT = json.dumps({"object": "tool.response", "choices": [
    {"message": {"role": "tool", "content": "{}", "tool_id": "call_B", "tool_name": "get_berth_schedule"}},
    {"message": {"role": "tool", "content": "{}", "tool_id": "call_T", "tool_name": "get_tide_window"}}]})  # fmt: skip
ADK_RESULT = json.dumps({"content": {"role": "user", "parts": [
    {"function_response": {"id": "call_B", "name": "get_berth_schedule", "response": {}}},
    {"function_response": {"id": "call_T", "name": "get_tide_window", "response": {}}}]}})  # fmt: skip


def _summary(name: str = "execute_tool (merged tools)", tool: str = "(merged tools)", result: str = TRPC_RESULT, **extra: Any) -> SpanView:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": "N/A", "gen_ai.tool.call.result": result, **extra}
    return _view(SUMMARY, name, ROOT, **attributes)


ADK_SUMMARY = dict(name="execute_tool (merged)", tool="(merged tools)", result=ADK_RESULT)


@pytest.mark.parametrize("summary,with_ids", [
    (dict(), False), (dict(), True),
    (ADK_SUMMARY, True),
    (dict(name="execute_tool (parallel)", tool="(parallel calls)"), True),
    (dict(tool=" (merged) "), False),
], ids=["trpc, calls with no id", "trpc, calls with ids", "google adk", "another placeholder", "spaced placeholder"])
def test_a_summary_span_of_parallel_calls_is_no_step(summary: dict, with_ids: bool) -> None:
    assert _steps(_view(ROOT, "invoke_agent a", ""), *_calls(with_ids), _summary(**summary)) == [("get_berth_schedule", False), ("get_tide_window", False)]


ONE_CALL_RESULT = json.dumps({"choices": [{"message": {"tool_id": "call_B", "tool_name": "get_berth_schedule"}}]})


@pytest.mark.parametrize("summary", [
    dict(result=ONE_CALL_RESULT),  # names one call only
    dict(result="merged"),  # names none
    dict(tool="merged_tools"),  # a name a model can call
    dict(**{"tracefence.effect": "write"}),  # labelled by its producer
    dict(**{"gen_ai.tool.call.arguments": '{"invoice": "I-1"}'}),  # arguments of a call
], ids=["one call named", "none named", "callable name", "labelled", "real arguments"])
def test_a_placeholder_span_that_is_not_surely_a_summary_stays_a_step(summary: dict) -> None:
    steps = _steps(_view(ROOT, "invoke_agent a", ""), *_calls(True), _summary(**summary))
    assert len(steps) == 3


def test_a_summary_with_an_error_status_stays_a_step() -> None:
    summary = _summary()
    summary = SpanView(trace_id=TRACE, span_id=SUMMARY, parent_span_id=ROOT, name=summary.name, attributes={**summary.attributes, "error.type": "ToolError"},
                       start_time_unix_nano=1, end_time_unix_nano=2, status_code=2)  # fmt: skip
    assert len(_steps(_view(ROOT, "invoke_agent a", ""), *_calls(True), summary)) == 3


def test_the_summary_case_through_every_door(tmp_path: Path, upstream: Any) -> None:
    def span(view: SpanView) -> dict:
        return json_span(TRACE, view.span_id, view.name, view.parent_span_id or "", **view.attributes)

    path = otlp_file(tmp_path / "s.json", json_span(TRACE, ROOT, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}),
                     *(span(v) for v in _calls(False)), span(_summary()))  # fmt: skip
    plans = cli_plans(path)
    (plan,) = plans.values()
    assert (class_of(plan), decisions(plan)) == ("dynamic", [("get_berth_schedule", "replay", ["declared_read"]), ("get_tide_window", "replay", ["declared_read"])])
    assert processor_disagreements(path, plans) == []
    assert service_disagreements(path, plans, upstream, tmp_path) == []


# --- 3. a request with no recorded arguments; a call id only in the tool's result (DECISIONS 443) ----------


@pytest.mark.parametrize("call_id", ["call_1", None], ids=["with id", "no id"])
def test_a_request_that_records_no_arguments_is_the_span_of_its_tool_no_request_took(call_id: str | None) -> None:
    tool = _oi_tool(TOOL, "final_answer", **{"input.value": '{"args": [], "kwargs": {"answer": "x"}}'})
    assert _steps(_model((call_id, "final_answer", None)), tool) == [("final_answer", False)]


def test_two_requests_with_no_arguments_and_one_span_leave_one_held() -> None:
    tool = _oi_tool(TOOL, "lookup", **{"input.value": '{"q": "a"}'})
    assert _steps(_model(("call_1", "lookup", None), ("call_2", "lookup", None)), tool) == [("lookup", False), ("lookup", True)]


def test_a_request_matched_by_content_first_then_the_one_with_no_arguments_finds_no_span_left() -> None:
    tool = _oi_tool(TOOL, "lookup", **{"input.value": '{"q": "a"}'})
    assert _steps(_model((None, "lookup", None), (None, "lookup", {"q": "a"})), tool) == [("lookup", False), ("lookup", True)]


def test_a_span_that_records_no_arguments_nor_call_id_takes_a_request_of_its_tool() -> None:
    assert _steps(_model(("call_1", "lookup", {"q": "a"})), _oi_tool(TOOL, "lookup")) == [("lookup", False)]
    # ... but not a request of another tool
    assert _steps(_model(("call_1", "lookup", {"q": "a"})), _oi_tool(TOOL, "search")) == [("lookup", True), ("search", False)]


TOOL_MESSAGES = {
    "openinference langchain": lambda cid: json.dumps({"type": "tool", "data": {"content": "{}", "type": "tool", "name": "reserve", "tool_call_id": cid}}),
    "openllmetry langchain": lambda cid: json.dumps({"output": {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
                                                               "kwargs": {"content": "{}", "tool_call_id": cid, "status": "success"}}, "kwargs": {"name": "reserve"}}),  # fmt: skip
    "message fields": lambda cid: json.dumps({"type": "tool", "content": "{}", "tool_call_id": cid}),
}


@pytest.mark.parametrize("shape", list(TOOL_MESSAGES), ids=list(TOOL_MESSAGES))
def test_a_span_whose_result_names_the_call_is_that_call_whatever_its_arguments(shape: str) -> None:
    # LangGraph's ToolNode: the span records the arguments it ran with (an injected state argument added), its
    # ToolMessage the call id; the model asked without the injected argument.
    tool = _oi_tool(TOOL, "reserve", **{"input.value": '{"isbn": "978", "state": {"user": "u"}}', "input.mime_type": "application/json",
                                        "output.value": TOOL_MESSAGES[shape]("call_R")})  # fmt: skip
    assert _steps(_model(("call_R", "reserve", {"isbn": "978"})), tool) == [("reserve", False)]
    # another call's id in the result: the request is still unrecorded
    other = _oi_tool(TOOL, "reserve", **{"input.value": '{"isbn": "978", "state": {}}', "input.mime_type": "application/json",
                                         "output.value": TOOL_MESSAGES[shape]("call_X")})  # fmt: skip
    assert _steps(_model(("call_R", "reserve", {"isbn": "978"})), other) == [("reserve", False), ("reserve", True)]


def test_a_span_matched_by_its_results_call_id_is_not_matched_again_by_content() -> None:
    tool = _oi_tool(TOOL, "reserve", **{"input.value": '{"isbn": "978"}', "input.mime_type": "application/json", "output.value": TOOL_MESSAGES["message fields"]("call_R")})
    steps = _steps(_model(("call_R", "reserve", {"isbn": "978"}), ("call_S", "reserve", {"isbn": "978"})), tool)
    assert steps == [("reserve", False), ("reserve", True)]


# --- 4. pydantic-ai's output tool, Koog's tool.<Name> spans (DECISIONS 444) ---------------------------------

PARAMETERS = json.dumps({"function_tools": [{"name": "lookup", "kind": "function"}],
                         "output_tools": [{"name": "final_result", "kind": "output"}], "output_mode": "tool"})  # fmt: skip


def _chat(span_id: str, calls: list, **extra: Any) -> SpanView:
    parts = [{"type": "tool_call", "id": cid, "name": tool, "arguments": args} for cid, tool, args in calls]
    return _view(span_id, "chat gpt-4o", ROOT, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
                                                 "gen_ai.response.finish_reasons": ("tool_call",), **extra})  # fmt: skip


def test_a_call_of_a_declared_output_tool_is_the_answer_not_a_step() -> None:
    lookup = _genai_tool(TOOL, "lookup", "c1", '{"q": "a"}', "ok")
    answer = _chat("f1" * 8, [("c2", "final_result", {"status": "a"})], model_request_parameters=PARAMETERS)
    assert _steps(_chat(MODEL, [("c1", "lookup", {"q": "a"})], model_request_parameters=PARAMETERS), lookup, answer) == [("lookup", False)]


def test_final_result_not_declared_an_output_tool_is_held_as_before() -> None:
    answer = _chat("f1" * 8, [("c2", "final_result", {"status": "a"})])
    assert _steps(answer) == [("final_result", True)]
    other = json.dumps({"output_tools": [{"name": "final_result", "kind": "function"}]})
    assert _steps(_chat("f1" * 8, [("c2", "final_result", {})], model_request_parameters=other)) == [("final_result", True)]


def test_an_output_function_that_ran_is_a_step_of_its_own() -> None:
    # pydantic-ai traces an output function as an execute_tool span: it ran, whatever the request was.
    ran = _view(TOOL, "execute_tool final_result", ROOT, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "final_result",
                                                            "gen_ai.tool.call.id": "c2", "gen_ai.tool.call.arguments": '{"order": "a"}'})  # fmt: skip
    assert _steps(_chat("f1" * 8, [("c2", "final_result", {"order": "a"})], model_request_parameters=PARAMETERS), ran) == [("final_result", False)]


def test_koog_tool_span_named_tool_dot_name_is_that_tool() -> None:
    config = TraceFenceConfig(tool_rules=[ToolRule(match="lookup", effect="read")])
    koog = _view(TOOL, "tool.lookup", ROOT, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": '{"q": "a"}'})
    steps = normalize_trace([koog], config).steps
    assert [(s.tool, s.effect.value) for s in steps] == [("lookup", "read")]
    # a span of no tool operation keeps its name
    plain = _view(TOOL, "tool.lookup", ROOT, **{"openinference.span.kind": "TOOL"})
    assert [s.tool for s in normalize_trace([plain], config).steps] == ["tool.lookup"]
