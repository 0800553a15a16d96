"""Issue 8's kinds of fault, one test (or a few) per kind: spans as real frameworks emit them.

Each test plans a small trace built as SpanView values and asserts the exact class, and for
every step its call id, decision and reasons. The shapes differ in names and values from the
shared cases (``../shared/cases``) on purpose: the fix is for the kind, not the file.
"""

from __future__ import annotations

import json

from otel_tracefence.core.config import ResultErrorShape, ToolRule, TraceFenceConfig
from otel_tracefence.core.model import ReplayClass, ToolStatus
from otel_tracefence.normalize import SpanView
from otel_tracefence.normalize.span_view import SpanEvent
from otel_tracefence.pipeline.plan import plan_spans

TRACE = "7d1e0c9a2b3f4e5d6c7b8a9f0e1d2c3b"
CONFIG = TraceFenceConfig()


def view(span_id: str, name: str, attributes: dict, *, parent: str | None = "a0a0a0a0a0a0a0a0", start: int = 10, kind: str = "internal",
         status: str = "unset", events: tuple = (), end: int | None = None) -> SpanView:
    return SpanView(TRACE, span_id, name, attributes, parent_span_id=parent, start_time_unix_nano=start,
                    end_time_unix_nano=end if end is not None else start + 5, status_code=status, events=events, kind=kind)


# The agent run records its output: one that records none, in a trace with no tool span and no model span, is held
# for what it asked for (DECISIONS 1010; tests/normalize/test_unrecorded_agent_runs.py).
ROOT = view("a0a0a0a0a0a0a0a0", "invoke_agent ops", {"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": "[]"}, parent=None, start=1, end=1000)


def plan(*spans: SpanView, config: TraceFenceConfig = CONFIG):
    result = plan_spans(TRACE, [ROOT, *spans], config).plan
    return result.replay_class, [(d.step.call_id, d.decision.value, d.reasons) for d in result.steps]


# --- 1. what cannot be read whole: truncated values -----------------------------------------------


def test_arguments_cut_off_by_an_attribute_length_limit_hold_the_write_as_truncated():
    cut = json.dumps({"to": "ops@example.com", "body": "x" * 200})[:64]
    write = view("b1b1b1b1b1b1b1b1", "execute_tool send_mail", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_mail", "gen_ai.tool.call.id": "m1",
        "gen_ai.tool.call.arguments": cut, "gen_ai.tool.call.result": "sent", "tracefence.effect": "write"})
    assert plan(write) == (ReplayClass.REVIEW, [("m1", "review", ("arguments_truncated",))])


def test_a_cut_off_openinference_input_without_a_mime_type_is_truncated_not_text():
    read = view("b2b2b2b2b2b2b2b2", "lookup", {"openinference.span.kind": "TOOL", "tool.name": "lookup",
                                                 "input.value": '{"kwargs": {"query": "open tick', "tracefence.effect": "read"})
    assert plan(read) == (ReplayClass.REVIEW, [("b2b2b2b2b2b2b2b2", "review", ("arguments_truncated",))])


def test_a_value_cut_between_tokens_with_a_truncation_marker_is_truncated():
    for cut in ('{"to": "ops", ...', '{"to": "ops", "cc": [1, 2] [truncated]', '{"to": "ops", "cc": \u2026'):
        write = view("b4b4b4b4b4b4b4b4", "execute_tool send_mail", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_mail",
                                                                    "gen_ai.tool.call.arguments": cut, "tracefence.effect": "write"})
        assert plan(write) == (ReplayClass.REVIEW, [("b4b4b4b4b4b4b4b4", "review", ("arguments_truncated", "result_not_recorded"))]), cut


def test_a_cut_off_json_result_holds_even_a_committed_write_as_result_truncated():
    write = view("b3b3b3b3b3b3b3b3", "execute_tool refund", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund", "gen_ai.tool.call.id": "r1",
        "gen_ai.tool.call.arguments": '{"order": "o-1"}', "gen_ai.tool.call.result": '{"refund_id": "rf_1", "lines": [{"sku": "a', "tracefence.effect": "write"})
    assert plan(write) == (ReplayClass.REVIEW, [("r1", "review", ("result_truncated",))])


# --- 2. tool names from every producer -----------------------------------------------------------


def test_openllmetry_openai_agents_tool_span_named_after_the_tool():
    tool = view("c1c1c1c1c1c1c1c1", "issue_refund.tool", {"traceloop.span.kind": "tool", "traceloop.entity.input": '{"order": "o-2"}',
                                                         "traceloop.entity.output": "ok", "tracefence.effect": "write"})
    assert plan(tool) == (ReplayClass.INJECTED, [("c1c1c1c1c1c1c1c1", "skip", ("write_committed",))])
    named = view("c2c2c2c2c2c2c2c2", "something else", {"traceloop.span.kind": "tool", "gen_ai.completion.tool.name": "issue_refund"})
    assert plan(named) == (ReplayClass.REVIEW, [("c2c2c2c2c2c2c2c2", "review", ("effect_unknown", "arguments_not_recorded"))])


def test_mcp_server_span_names_its_tool_in_the_span_name_and_reads_only_hint():
    # A read only the readOnlyHint says: replayed, labelled hinted_read (docs/DECISIONS.md 189).
    server = view("c3c3c3c3c3c3c3c3", "tools/call get_weather", {"mcp.method.name": "tools/call", "jsonrpc.request.id": "7",
                                                                 "mcp.tool.annotations.readOnlyHint": True}, kind="server")
    assert plan(server) == (ReplayClass.DYNAMIC, [("c3c3c3c3c3c3c3c3", "replay", ("hinted_read", "arguments_not_recorded"))])


def test_an_mcp_client_span_without_a_tool_name_is_an_attempt_of_its_step_not_malformed():
    step = view("c4c4c4c4c4c4c4c4", "execute_tool create_ticket", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_ticket",
                                                                   "gen_ai.tool.call.id": "t1", "tracefence.effect": "write",
                                                                   "gen_ai.tool.call.result": "TK-9"})
    client = view("c5c5c5c5c5c5c5c5", "tools/call", {"mcp.method.name": "tools/call"}, parent="c4c4c4c4c4c4c4c4", kind="client", start=11, end=12)
    assert plan(step, client) == (ReplayClass.INJECTED, [("t1", "skip", ("write_committed", "arguments_not_recorded"))])


def test_crewai_haystack_and_adk_tool_names_and_arguments():
    crew = view("c6c6c6c6c6c6c6c6", "Tool Usage", {"crewai.tool.name": "search_docs", "tracefence.effect": "read"})
    adk = view("c7c7c7c7c7c7c7c7", "execute_tool book_room", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "book_room",
                                                              "gen_ai.tool.call.id": "adk-1", "gcp.vertex.agent.tool_call_args": '{"room": "B"}',
                                                              "gcp.vertex.agent.tool_response": '{"booking": "bk_1"}'}, start=20)
    rules = TraceFenceConfig(tool_rules=[ToolRule(match="book_*", effect="write")])
    assert plan(crew, adk, config=rules) == (ReplayClass.INJECTED, [
        ("c6c6c6c6c6c6c6c6", "replay", ("declared_read", "arguments_not_recorded")),
        ("adk-1", "skip", ("write_committed",)),
    ])


def test_a_haystack_tool_invoker_span_gives_one_step_per_call_with_its_result():
    messages = {"messages": [{"role": "assistant", "content": [
        {"tool_call": {"tool_name": "get_stock", "arguments": {"sku": "A"}, "id": "h1"}},
        {"tool_call": {"tool_name": "reserve_stock", "arguments": {"sku": "A", "n": 2}, "id": "h2"}}]}]}
    output = {"tool_messages": [
        {"role": "tool", "content": [{"tool_call_result": {"result": "7", "origin": {"tool_name": "get_stock", "id": "h1"}, "error": False}}]},
        {"role": "tool", "content": [{"tool_call_result": {"result": "boom", "origin": {"tool_name": "reserve_stock", "id": "h2"}, "error": True}}]}]}
    invoker = view("c8c8c8c8c8c8c8c8", "haystack.component.run", {"haystack.component.type": "ToolInvoker", "haystack.component.name": "tools",
                                                                  "haystack.component.input": json.dumps(messages),
                                                                  "haystack.component.output": json.dumps(output)})
    rules = TraceFenceConfig(tool_rules=[ToolRule(match="get_*", effect="read"), ToolRule(match="reserve_*", effect="write")])
    assert plan(invoker, config=rules) == (ReplayClass.REVIEW, [("h1", "replay", ("declared_read",)), ("h2", "review", ("write_error",))])
    blind = view("c9c9c9c9c9c9c9c9", "haystack.component.run", {"haystack.component.type": "ToolInvoker"})
    assert plan(blind, config=rules) == (ReplayClass.REVIEW, [("c9c9c9c9c9c9c9c9", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))])


# --- 3. arguments where producers put them --------------------------------------------------------


def test_smolagents_wrapped_arguments_are_unwrapped_and_match_the_requested_call():
    llm = view("d1d1d1d1d1d1d1d1", "OpenAIServerModel.generate", {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_9",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": {"city": "Oslo"}})
    tool = view("d2d2d2d2d2d2d2d2", "WeatherTool", {"openinference.span.kind": "TOOL", "tool.name": "get_weather", "tracefence.effect": "read",
                                                    "input.value": json.dumps({"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Oslo"}}),
                                                    "output.value": "rain"}, start=20)
    assert plan(llm, tool) == (ReplayClass.DYNAMIC, [("d2d2d2d2d2d2d2d2", "replay", ("declared_read", "arguments_unwrapped"))])


def test_positional_arguments_are_not_unwrapped():
    tool = view("d3d3d3d3d3d3d3d3", "calc", {"openinference.span.kind": "TOOL", "tool.name": "calc", "tracefence.effect": "read",
                                             "input.value": json.dumps({"args": [1, 2], "kwargs": {}})})
    assert plan(tool) == (ReplayClass.DYNAMIC, [("d3d3d3d3d3d3d3d3", "replay", ("declared_read",))])


def test_arguments_and_results_in_genai_operation_details_events():
    def attempt(span_id: str, call_id: str, start: int, status: str) -> SpanView:
        details = SpanEvent("gen_ai.client.inference.operation.details", {
            "gen_ai.input.messages": json.dumps([{"role": "tool", "parts": [{"type": "tool_call", "id": call_id, "name": "pay", "arguments": {"invoice": "i-4"}}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": "paid"}]}])})
        return view(span_id, "execute_tool pay", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay", "gen_ai.tool.call.id": call_id,
                                                  "tracefence.effect": "write"}, start=start, status=status, events=(details,))
    assert plan(attempt("d4d4d4d4d4d4d4d4", "p1", 10, "ok"), attempt("d5d5d5d5d5d5d5d5", "p2", 30, "ok")) == (ReplayClass.REVIEW, [
        ("p1", "skip", ("write_committed", "repeated_later")),
        ("p2", "review", ("repeats_earlier_write",)),
    ])


# --- 4. requested calls matched to the spans that ran them ----------------------------------------


def test_a_requested_call_with_no_tool_span_in_legacy_openllmetry_keys_is_a_step():
    llm = view("e1e1e1e1e1e1e1e1", "openai.chat", {"llm.request.type": "chat", "gen_ai.completion.0.finish_reason": "tool_calls",
                                                   "gen_ai.completion.0.tool_calls.0.id": "call_x", "gen_ai.completion.0.tool_calls.0.name": "wire_money",
                                                   "gen_ai.completion.0.tool_calls.0.arguments": '{"to": "acct-2"}',
                                                   "gen_ai.prompt.1.tool_calls.0.name": "an_earlier_turn"}, kind="client")
    assert plan(llm) == (ReplayClass.REVIEW, [("call_x", "review", ("effect_unknown", "requested_not_recorded"))])


def test_two_requests_sharing_one_call_id_need_two_spans():
    def llm(span_id: str, start: int, args: str) -> SpanView:
        return view(span_id, "chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_0", "name": "post_note", "arguments": json.loads(args)}]}])}, start=start)
    ran = view("e4e4e4e4e4e4e4e4", "execute_tool post_note", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "post_note",
                                                              "gen_ai.tool.call.id": "call_0", "gen_ai.tool.call.arguments": '{"text": "b"}',
                                                              "gen_ai.tool.call.result": "n2", "tracefence.effect": "write"}, start=60)
    klass, steps = plan(llm("e2e2e2e2e2e2e2e2", 10, '{"text": "a"}'), llm("e3e3e3e3e3e3e3e3", 50, '{"text": "b"}'), ran)
    assert klass is ReplayClass.REVIEW
    assert steps == [("call_0", "review", ("effect_unknown", "requested_not_recorded")), ("call_0", "skip", ("write_committed",))]


# --- 5. dispatches recorded as HTTP client spans --------------------------------------------------


def http(span_id: str, method: str, url: str, start: int, status: int = 200, parent: str = "f1f1f1f1f1f1f1f1") -> SpanView:
    return view(span_id, method, {"http.request.method": method, "url.full": url, "http.response.status_code": status},
                parent=parent, start=start, end=start + 1, kind="client")


WRITE_TOOL = view("f1f1f1f1f1f1f1f1", "execute_tool create_payment", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_payment",
                                                                      "gen_ai.tool.call.id": "pay1", "gen_ai.tool.call.arguments": '{"amount": 5}',
                                                                      "gen_ai.tool.call.result": '{"id": "py_1"}', "tracefence.effect": "write"}, end=99)


def test_two_identical_unsafe_http_requests_below_a_write_dispatched_it_twice():
    assert plan(WRITE_TOOL, http("f2f2f2f2f2f2f2f2", "PUT", "https://pay.example/v2/payments/1", 11),
                http("f3f3f3f3f3f3f3f3", "PUT", "https://pay.example/v2/payments/1", 20)) == (
        ReplayClass.REVIEW, [("pay1", "review", ("write_dispatched_more_than_once",))])


def test_requests_to_different_urls_or_safe_ones_are_not_repeats():
    assert plan(WRITE_TOOL, http("f2f2f2f2f2f2f2f2", "POST", "https://pay.example/v2/payments", 11),
                http("f3f3f3f3f3f3f3f3", "POST", "https://pay.example/v2/receipts", 20),
                http("f4f4f4f4f4f4f4f4", "GET", "https://pay.example/v2/payments/1", 30),
                http("f5f5f5f5f5f5f5f5", "GET", "https://pay.example/v2/payments/1", 40)) == (
        ReplayClass.INJECTED, [("pay1", "skip", ("write_committed",))])


def test_a_5xx_response_below_an_ok_write_is_an_error_in_its_result():
    assert plan(WRITE_TOOL, http("f2f2f2f2f2f2f2f2", "POST", "https://pay.example/v2/payments", 11, status=502)) == (
        ReplayClass.REVIEW, [("pay1", "review", ("write_error", "error_in_result"))])


# --- 6. errors inside an OK result ----------------------------------------------------------------


def result_write(result: str, **extra) -> SpanView:
    return view("a1a1a1a1a1a1a1a1", "execute_tool deploy", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "deploy",
                                                            "gen_ai.tool.call.id": "dp1", "gen_ai.tool.call.arguments": '{"rev": 3}',
                                                            "gen_ai.tool.call.result": result, "tracefence.effect": "write", **extra})


def test_error_shaped_results_are_not_committed_writes():
    for result in ('{"content": [{"type": "text", "text": "denied"}], "isError": true}',
                   '{"error": {"code": -32000, "message": "quota"}}',
                   '{"response_status": "Error", "detail": "x"}',
                   '[{"type": "text", "text": "ok"}, {"type": "error", "error": "gateway"}]',
                   '{"status_code": 503}'):
        assert plan(result_write(result)) == (ReplayClass.REVIEW, [("dp1", "review", ("write_error", "error_in_result"))]), result


def test_ok_shaped_results_stay_committed_and_an_error_result_beats_a_declared_ok():
    for result in ('{"isError": false, "content": []}', '{"error": null, "id": 1}', '{"status_code": 201}', 'plain text with no error report'):
        assert plan(result_write(result)) == (ReplayClass.INJECTED, [("dp1", "skip", ("write_committed",))]), result
    # Plain text that opens as an error report is a template of any framework (DECISIONS 964; 36 read no plain text).
    assert plan(result_write("error: plain text is read")) == (ReplayClass.REVIEW, [("dp1", "review", ("write_error", "error_template_in_result"))])
    # tool_call() declares ok when nothing raised; the MCP result it recorded says otherwise: the fencing record wins.
    assert plan(result_write('{"isError": true}', **{"tracefence.status": "ok"})) == (ReplayClass.REVIEW, [("dp1", "review", ("write_error", "error_in_result"))])
    assert plan(result_write('{"id": 1}', **{"tracefence.status": "timeout"})) == (ReplayClass.REVIEW, [("dp1", "review", ("write_timeout",))])


def test_a_failed_dispatch_attempt_fails_an_ok_step():
    client = view("e5e5e5e5e5e5e5e5", "MCP send tools/call refund", {"mcp.method.name": "tools/call", "jsonrpc.request.id": "3"},
                  parent="e6e6e6e6e6e6e6e6", start=11, end=19, kind="client")
    server = view("e7e7e7e7e7e7e7e7", "tools/call refund", {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                                                           "gen_ai.tool.name": "refund", "error.type": "tool_error"},
                  parent="e5e5e5e5e5e5e5e5", start=12, end=18, kind="server", status="error")
    step = view("e6e6e6e6e6e6e6e6", "execute_tool refund", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
                                                            "gen_ai.tool.call.id": "rf", "tracefence.effect": "write", "tracefence.status": "ok"}, end=20)
    listing = view("e8e8e8e8e8e8e8e8", "MCP send tools/list", {"mcp.method.name": "tools/list", "jsonrpc.request.id": "2"}, kind="client", start=5)
    assert plan(listing, step, client, server) == (ReplayClass.REVIEW, [("rf", "review", ("write_error", "arguments_not_recorded", "dispatch_attempt_failed"))])


def test_result_error_shapes_extend_from_the_config():
    # "outcome" is a default status-like key (docs/DECISIONS.md 970): a key no default shape reads is added here.
    shaped = TraceFenceConfig(result_error_shapes=[ResultErrorShape(key="verdict", equals="FAILED")])
    assert plan(result_write('{"verdict": "failed"}'), config=shaped) == (ReplayClass.REVIEW, [("dp1", "review", ("write_error", "error_in_result"))])
    assert plan(result_write('{"verdict": "failed"}')) == (ReplayClass.INJECTED, [("dp1", "skip", ("write_committed",))])


# --- 7. tool activity nobody recognized -----------------------------------------------------------


def test_an_unknown_convention_tool_span_holds_its_trace():
    custom = view("a2a2a2a2a2a2a2a2", "myframework.run_tool", {"myframework.tool_id": "charge", "myframework.input": "{}"})
    klass, steps = plan(custom)
    assert klass is ReplayClass.REVIEW
    assert steps == [("a2a2a2a2a2a2a2a2", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))]


def test_a_model_that_asked_for_tools_no_one_can_read_holds_its_trace():
    llm = view("a3a3a3a3a3a3a3a3", "anthropic.messages", {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ["tool_use"]})
    assert plan(llm) == (ReplayClass.REVIEW, [("a3a3a3a3a3a3a3a3", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))])


def test_agent_and_model_spans_that_mention_tools_and_wrappers_around_tool_spans_are_not_activity():
    agent = view("a4a4a4a4a4a4a4a4", "ToolCallingAgent.run", {"openinference.span.kind": "AGENT", "llm.tools.0.tool.json_schema": "{}"})
    llm = view("a5a5a5a5a5a5a5a5", "chat gpt", {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": "[]",
                                                "gen_ai.response.finish_reasons": ["tool_call"]}, parent="a4a4a4a4a4a4a4a4")
    wrapper = view("a6a6a6a6a6a6a6a6", "running tools", {"tools": ["lookup"]}, parent="a4a4a4a4a4a4a4a4", start=20, end=40)
    tool = view("a7a7a7a7a7a7a7a7", "execute_tool lookup", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                                                            "gen_ai.tool.call.id": "l1", "tracefence.effect": "read"}, parent="a6a6a6a6a6a6a6a6", start=21)
    inner = view("a8a8a8a8a8a8a8a8", "FunctionTool.call", {}, parent="a7a7a7a7a7a7a7a7", start=22, end=23)
    assert plan(agent, llm, wrapper, tool, inner) == (ReplayClass.DYNAMIC, [("l1", "replay", ("declared_read", "arguments_not_recorded"))])
    assert plan(agent) == (None, [])
    http_span = view("a9a9a9a9a9a9a9a9", "POST /v1/tools/run", {"http.request.method": "POST", "url.full": "https://x/v1/tools/run"}, kind="client")
    assert plan(http_span) == (None, [])


def test_steps_status_reads_are_unchanged_for_plain_spans():
    # Guard: a read's status is whatever its span says; error_in_result never touches a declared read's decision.
    read = result_write('{"isError": true}', **{"tracefence.effect": "read"})
    klass, steps = plan(read)
    assert (klass, steps) == (ReplayClass.DYNAMIC, [("dp1", "replay", ("declared_read", "error_in_result"))])
    assert plan_spans(TRACE, [ROOT, read], CONFIG).plan.steps[0].step.status is ToolStatus.ERROR


def test_a_tool_invoker_with_tool_spans_below_it_has_its_calls_matched_as_requests():
    messages = {"messages": [{"role": "assistant", "content": [
        {"tool_call": {"tool_name": "get_stock", "arguments": {"sku": "A"}, "id": "h1"}},
        {"tool_call": {"tool_name": "reserve_stock", "arguments": {"sku": "A", "n": 2}, "id": "h2"}}]}]}
    invoker = view("b5b5b5b5b5b5b5b5", "haystack.component.run", {"haystack.component.type": "ToolInvoker",
                                                                  "haystack.component.input": json.dumps(messages)}, end=90)
    ran = view("b6b6b6b6b6b6b6b6", "haystack.agent.step.tool", {"haystack.tool.name": "get_stock", "haystack.tool.call.id": "h1",
                                                                "haystack.agent.step.tool.input": '{"sku": "A"}', "tracefence.effect": "read"},
               parent="b5b5b5b5b5b5b5b5", start=20)
    assert plan(invoker, ran) == (ReplayClass.REVIEW, [
        ("h1", "replay", ("declared_read",)),
        ("h2", "review", ("effect_unknown", "requested_not_recorded")),
    ])


def test_a_kind_value_no_convention_defines_names_no_kind():
    # Spring AI's tool-call observation: operation "framework", named after the call. Read as a step...
    spring = view("b7b7b7b7b7b7b7b7", "tool_call get_weather", {"gen_ai.operation.name": "framework", "spring.ai.kind": "tool_call",
                                                               "spring.ai.tool.definition.name": "get_weather",
                                                               "spring.ai.tool.call.arguments": '{"city": "Rome"}', "tracefence.effect": "read"})
    assert plan(spring) == (ReplayClass.DYNAMIC, [("b7b7b7b7b7b7b7b7", "replay", ("declared_read",))])
    # ...and a span of an unknown OpenInference kind named like a tool call is tool activity.
    unknown = view("b8b8b8b8b8b8b8b8", "tool_call get_weather", {"openinference.span.kind": "UNKNOWN"})
    assert plan(unknown) == (ReplayClass.REVIEW, [("b8b8b8b8b8b8b8b8", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))])


def test_a_dispatch_that_timed_out_while_its_cancelled_server_span_ended_unset_is_a_timeout():
    step = view("c1d1c1d1c1d1c1d1", "execute_tool pay", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay",
                                                        "gen_ai.tool.call.id": "py", "tracefence.effect": "write"}, end=30)
    client = view("c2d2c2d2c2d2c2d2", "MCP send tools/call pay", {"mcp.method.name": "tools/call"}, parent="c1d1c1d1c1d1c1d1",
                  start=11, end=20, kind="client", status="error", events=(SpanEvent("exception", {"exception.type": "TimeoutError"}),))
    server = view("c3d3c3d3c3d3c3d3", "tools/call pay", {"mcp.method.name": "tools/call", "gen_ai.tool.name": "pay"},
                  parent="c2d2c2d2c2d2c2d2", start=12, end=25, kind="server")
    assert plan(step, client, server) == (ReplayClass.REVIEW, [("py", "review", ("write_timeout", "arguments_not_recorded", "dispatch_attempt_failed"))])


def test_labels_on_an_invoker_span_that_ran_several_calls_are_not_given_to_any_of_them():
    # Haystack 2.x runs each tool body with the one ToolInvoker span current: declare() in each body
    # writes onto it, the last call's label winning. A write must never inherit a read's label.
    messages = {"messages": [{"role": "assistant", "content": [
        {"tool_call": {"tool_name": "create_invoice", "arguments": {"c": "a"}, "id": "w1"}},
        {"tool_call": {"tool_name": "lookup_customer", "arguments": {"c": "a"}, "id": "r1"}}]}]}
    invoker = view("b9b9b9b9b9b9b9b9", "haystack.component.run", {"haystack.component.type": "ToolInvoker", "tracefence.effect": "read",
                                                                  "haystack.component.input": json.dumps(messages)})
    klass, steps = plan(invoker)
    assert klass is ReplayClass.REVIEW
    assert steps == [("r1", "review", ("malformed_effect", "effect_unknown")),
                     ("w1", "review", ("malformed_effect", "effect_unknown"))]


def test_a_confirmation_hook_span_is_no_tool_run_and_a_managed_agent_runs_its_call():
    hook = view("d6d6d6d6d6d6d6d6", "haystack.agent.hook.human_in_the_loop.strategy", {"haystack.tool.name": "send_email",
                                                                                      "haystack.tool.call.id": "call_3"})
    assert plan(hook) == (None, [])
    manager_llm = view("d7d7d7d7d7d7d7d7", "OpenAIModel.generate", {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "billing",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"task": "bill a"}'})
    sub_agent = view("d8d8d8d8d8d8d8d8", "billing.run", {"openinference.span.kind": "AGENT"}, start=20, end=80)
    sub_tool = view("d9d9d9d9d9d9d9d9", "CreateInvoice", {"openinference.span.kind": "TOOL", "tool.name": "create_invoice", "tracefence.effect": "write",
                                                          "output.value": "inv_1"}, parent="d8d8d8d8d8d8d8d8", start=30)
    assert plan(manager_llm, sub_agent, sub_tool) == (ReplayClass.INJECTED, [("d9d9d9d9d9d9d9d9", "skip", ("write_committed", "arguments_not_recorded"))])


# --- what a new user's attack found ------------------------------------------------------------


def test_a_write_inside_a_declared_read_is_a_step_of_its_own():
    outer = view("f6f6f6f6f6f6f6f6", "execute_tool lookup", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                                                             "tracefence.effect": "read"}, end=90)
    inner = view("f7f7f7f7f7f7f7f7", "execute_tool payments.charge", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge",
                                                                      "tracefence.effect": "write", "tracefence.status": "timeout"},
                 parent="f6f6f6f6f6f6f6f6", start=20)
    assert plan(outer, inner) == (ReplayClass.REVIEW, [
        ("f6f6f6f6f6f6f6f6", "replay", ("declared_read", "arguments_not_recorded")),
        ("f7f7f7f7f7f7f7f7", "review", ("write_timeout", "arguments_not_recorded")),
    ])
    # The same tool inside (a retry wrapper) labelled write makes the step a write.
    same = view("f8f8f8f8f8f8f8f8", "retry lookup", {"gen_ai.tool.name": "lookup", "tracefence.effect": "write"}, parent="f6f6f6f6f6f6f6f6", start=20)
    assert plan(outer, same) == (ReplayClass.STATIC, [("f6f6f6f6f6f6f6f6", "skip", ("write_committed", "result_not_recorded", "arguments_not_recorded"))])


def test_a_call_id_matches_a_request_only_with_its_tool():
    llm = view("f9f9f9f9f9f9f9f9", "chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "payments.charge", "arguments": {"n": 1}}]}])})
    read = view("fafafafafafafafa", "execute_tool lookup", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                                                            "gen_ai.tool.call.id": "c1", "tracefence.effect": "read"}, start=20)
    assert plan(llm, read) == (ReplayClass.REVIEW, [
        ("c1", "review", ("effect_unknown", "requested_not_recorded")),
        ("c1", "replay", ("declared_read", "arguments_not_recorded")),
    ])


def test_more_error_result_shapes():
    for result in ('{"status": "error", "message": "gateway timeout"}', '{"status": "FAILED"}', '{"success": false}',
                   '{"type": "tool", "status": "error", "content": "Error: TimeoutError"}', '{"data": null, "errors": [{"message": "x"}]}'):
        assert plan(result_write(result)) == (ReplayClass.REVIEW, [("dp1", "review", ("write_error", "error_in_result"))]), result
    for result in ('{"status": "ok"}', '{"success": true}', '{"errors": []}'):
        assert plan(result_write(result)) == (ReplayClass.INJECTED, [("dp1", "skip", ("write_committed",))]), result


def test_failed_dispatches_without_a_response_and_retries_under_other_query_strings():
    lost = view("fbfbfbfbfbfbfbfb", "POST", {"http.request.method": "POST", "url.full": "https://pay.example/v2/payments", "error.type": "timeout"},
                parent="f1f1f1f1f1f1f1f1", start=11, kind="client", status="error")
    assert plan(WRITE_TOOL, lost) == (ReplayClass.REVIEW, [("pay1", "review", ("write_timeout", "dispatch_attempt_failed"))])
    retried = [http("f2f2f2f2f2f2f2f2", "POST", "https://pay.example/v2/payments?attempt=1", 11),
               http("f3f3f3f3f3f3f3f3", "POST", "https://pay.example/v2/payments?attempt=2", 20)]
    assert plan(WRITE_TOOL, *retried) == (ReplayClass.REVIEW, [("pay1", "review", ("write_dispatched_more_than_once",))])
    rpc = [view(f"fc{i}cfcfcfcfcfcfc", "payments.Pay/Create", {"rpc.system": "grpc", "rpc.service": "payments.Pay", "rpc.method": "Create"},
                parent="f1f1f1f1f1f1f1f1", start=11 + i, kind="client") for i in (1, 2)]
    assert plan(WRITE_TOOL, *rpc) == (ReplayClass.REVIEW, [("pay1", "review", ("write_dispatched_more_than_once",))])


def test_model_output_cut_off_or_in_other_shapes_is_never_tool_free():
    cut = view("fdfdfdfdfdfdfdfd", "chat", {"gen_ai.operation.name": "chat",
                                            "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"pay'})
    klass, steps = plan(cut)
    # requested_call_unread since DECISIONS 386 (unrecognized_tool_span before): what is not understood is the calls
    assert (klass, steps) == (ReplayClass.REVIEW, [("fdfdfdfdfdfdfdfd", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))])
    anthropic = view("fefefefefefefefe", "chat", {"gen_ai.operation.name": "chat"}, events=(SpanEvent("gen_ai.choice", {
        "message": json.dumps({"role": "assistant", "content": [{"type": "tool_use", "id": "tu_9", "name": "refund", "input": {"o": 1}}]})}),))
    responses = view("efefefefefefefef", "chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
        [{"type": "function_call", "call_id": "fc_1", "name": "refund", "arguments": '{"o": 2}'}])}, start=30)
    assert plan(anthropic, responses) == (ReplayClass.REVIEW, [
        ("tu_9", "review", ("effect_unknown", "requested_not_recorded")),
        ("fc_1", "review", ("effect_unknown", "requested_not_recorded")),
    ])
    asked = view("dfdfdfdfdfdfdfdf", "chat", {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": '["tool_calls"]'})
    assert plan(asked)[0] is ReplayClass.REVIEW


def test_words_that_describe_tools_only_cancel_a_key_not_a_name():
    named = view("cfcfcfcfcfcfcfcf", "Tool: update_schema", {})
    assert plan(named) == (ReplayClass.REVIEW, [("cfcfcfcfcfcfcfcf", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))])
    described = view("bfbfbfbfbfbfbfbf", "plan step", {"myapp.tool.description": "looks things up", "myapp.available_tools": "[]"})
    assert plan(described) == (None, [])
