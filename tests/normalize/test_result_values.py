"""The fifth fresh-user trial's findings on reading values and conventions (docs/DECISIONS.md 340-): exact plans
through ``tracefence plan``'s function (``plan_text``) and the replay guard, on OTLP/JSON text built here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.agent.replay import NonReplayableTraceError, ReplayGuard

TRACE = "ee" * 16
ROOT_ID, TOOL_ID = "aa" * 8, "bb" * 8


def _span(span_id: str, name: str, parent: str = "", **fields: Any) -> dict:
    return json_span(TRACE, span_id, name, parent, **fields)


def _file(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]})


def _write(**attributes: Any) -> dict:
    """A declared write below an agent span; ``attributes`` add to or replace the GenAI keys."""
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "tracefence.effect": "write",
            "gen_ai.tool.call.arguments": "{\"c\": 1}", "gen_ai.tool.call.result": "{\"id\": \"inv_1\"}"}  # fmt: skip
    return _span(TOOL_ID, "execute_tool invoice.create", ROOT_ID, **{k: v for k, v in {**base, **attributes}.items() if v is not None})


def _plan(*spans: dict):
    (plan,) = plan_text(_file(_span(ROOT_ID, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}), *spans), "auto", TraceFenceConfig())[0]
    return plan


def _decisions(plan) -> tuple[str, list[tuple[str, str, tuple[str, ...]]]]:
    return plan.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in plan.steps]


# --- 1. a value that starts like JSON and does not parse is cut off (340) -----------------------------------------

CUT = ["{\"id\":\"inv_1\",\"paid\": t", "{\"id\":\"inv_1\",\"n\":12.", "[1, 2, nul", "{\"amount\": -", "  \n{\"paid\": tru", "\ufeff{\"id\": \"inv_1\"}",
       "\ufeff {\"paid\": t", "{\"id\": \"inv_1\"} x", "{\"n\": NaN}"]  # fmt: skip


@pytest.mark.parametrize("text", CUT)
@pytest.mark.parametrize("key", ["gen_ai.tool.call.result", "output.value", "traceloop.entity.output", "ai.toolCall.result"])
def test_a_result_that_starts_as_a_json_object_or_array_and_does_not_parse_is_truncated(key: str, text: str) -> None:
    # Only text ending inside a string or an open container was cut off: the rest was read as plain text, and a
    # committed write's result cut inside a literal or a number (an SDK's attribute length limit) was injected.
    if key == "gen_ai.tool.call.result":
        span = _write(**{key: text})
    elif key == "output.value":
        span = _span(TOOL_ID, "invoice.create", ROOT_ID, **{"openinference.span.kind": "TOOL", "tool.name": "invoice.create", "tracefence.effect": "write",
                     "input.value": "{\"c\": 1}", key: text})  # fmt: skip
    elif key == "traceloop.entity.output":
        span = _span(TOOL_ID, "invoice.create.tool", ROOT_ID, **{"traceloop.span.kind": "tool", "traceloop.entity.name": "invoice.create", "tracefence.effect": "write",
                     "traceloop.entity.input": "{\"c\": 1}", key: text})  # fmt: skip
    else:
        span = _span(TOOL_ID, "ai.toolCall", ROOT_ID, **{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "invoice.create", "ai.toolCall.id": "c1",
                     "tracefence.effect": "write", "ai.toolCall.args": "{\"c\": 1}", key: text})  # fmt: skip
    assert _decisions(_plan(span)) == ("review", [("invoice.create", "review", ("result_truncated",))])


@pytest.mark.parametrize("text", ["{\"c\":1, \"d\": tru", "\ufeff{\"c\":1, \"d\": \"x", "[1, 2."])
def test_openinference_input_value_cut_inside_a_literal_is_truncated_not_plain_text(text: str) -> None:
    span = _span(TOOL_ID, "invoice.create", ROOT_ID, **{"openinference.span.kind": "TOOL", "tool.name": "invoice.create", "tracefence.effect": "write",
                 "input.value": text, "output.value": "{\"ok\": true}"})  # fmt: skip
    assert _decisions(_plan(span)) == ("review", [("invoice.create", "review", ("arguments_truncated",))])


@pytest.mark.parametrize("text", ["paid: true", "\"quoted\" text", "12.", "Error..."])
def test_plain_text_results_are_still_read_as_text(text: str) -> None:
    assert _decisions(_plan(_write(**{"gen_ai.tool.call.result": text})))[0] == "injected"


def test_the_guard_refuses_to_inject_a_result_cut_inside_a_literal(tmp_path: Path) -> None:
    path = tmp_path / "cut.otlp.json"
    path.write_text(_file(_span(ROOT_ID, "invoke_agent a"), _write(**{"gen_ai.tool.call.result": "{\"id\": \"inv_1\", \"paid\": t"})))
    with pytest.raises(NonReplayableTraceError, match=r"is held for review \(result_truncated\)"):
        ReplayGuard.from_file(path, mode="injected")


# --- 2. the Vercel AI SDK's requested calls: ai.response.toolCalls, ai.response.finishReason (341) ------------------

VERCEL_CALLS = [{"toolCallType": "function", "toolCallId": "c1", "toolName": "search", "args": "{\"q\": \"x\"}"},
                {"toolCallId": "c2", "toolName": "payments.charge", "input": {"amount": 500}}]  # AI SDK 4 and 5 entries  # fmt: skip


def _vercel_model(**attributes: Any) -> dict:
    return _span("a1" * 8, "ai.generateText.doGenerate", ROOT_ID, **{"ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o", **attributes})


def _vercel_search() -> dict:
    return _span(TOOL_ID, "ai.toolCall", ROOT_ID, **{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "search", "ai.toolCall.id": "c1",
                 "ai.toolCall.args": "{\"q\": \"x\"}", "ai.toolCall.result": "{\"hits\": 1}", "tracefence.effect": "read"})  # fmt: skip


def test_a_vercel_model_span_asking_for_a_write_no_tool_span_records_is_held() -> None:
    # ai.response.toolCalls was never read: the charge the model asked for, which no ai.toolCall span records, passed.
    plan = _plan(_vercel_model(**{"ai.response.toolCalls": json.dumps(VERCEL_CALLS), "ai.response.finishReason": "tool-calls"}), _vercel_search())
    assert sorted((d.step.call_id, d.step.tool, d.decision.value, d.reasons) for d in plan.steps) == [
        ("c1", "search", "replay", ("declared_read",)),
        ("c2", "payments.charge", "review", ("effect_unknown", "requested_not_recorded")),
    ]
    assert plan.replay_class.value == "review"


def test_vercel_requested_calls_every_tool_span_records_pass() -> None:
    only_search = json.dumps(VERCEL_CALLS[:1])
    plan = _plan(_vercel_model(**{"ai.response.toolCalls": only_search, "ai.response.finishReason": "tool-calls"}), _vercel_search())
    assert _decisions(plan) == ("dynamic", [("search", "replay", ("declared_read",))])


@pytest.mark.parametrize("attributes, what", [
    ({"ai.response.toolCalls": "[{\"toolCallId\": \"c2\", \"toolName\": \"payments.charge\", \"input\": {\"amount\": 5", "ai.response.finishReason": "tool-calls"},
     "ai.response.toolCalls that is cut off"),
    ({"ai.response.toolCalls": "[\"payments.charge\"]"}, "an ai.response.toolCalls entry that is not an object"),
    ({"ai.response.toolCalls": "{\"toolCallId\": \"c2\"}"}, "ai.response.toolCalls that is not a list"),
    ({"ai.response.toolCalls": "[{\"toolCallId\": \"c2\", \"input\": {}}]"}, "an ai.response.toolCalls entry with no readable name"),
    ({"ai.response.text": "", "ai.response.finishReason": "tool-calls"}, "its finish reason says the model asked for tool calls"),
])  # fmt: skip
def test_unreadable_vercel_requested_calls_hold_the_trace(attributes: dict, what: str) -> None:
    plan = _plan(_vercel_model(**attributes), _vercel_search())
    held = [d for d in plan.steps if d.step.span_id == "a1" * 8]
    assert plan.replay_class.value == "review"
    assert [(d.decision.value, d.reasons[0]) for d in held] == [("review", "requested_call_unread")]
    assert what in held[0].step.malformed[0].message


# --- 3. results that say timeout, cancelled or an unknown outcome (342) --------------------------------------------


@pytest.mark.parametrize("result", ["{\"status\": \"timeout\"}", "{\"status\": \"Timed_Out\"}", "{\"status\": \"cancelled\"}", "{\"status\": \"canceled\"}",
                                    "{\"status\": \"aborted\"}", "{\"status\": \"unknown\"}", "{\"timed_out\": true}", "{\"timedOut\": true}", "{\"timeout\": true}",
                                    "{\"status\": 504}", "{\"status\": 408}", "{\"status\": 429}", "{\"Error\": \"timeout\"}", "{\"SUCCESS\": false}",
                                    "{\"result\": {\"status\": \"error\"}}", "{\"data\": {\"status\": \"timeout\"}}", "{\"response\": {\"status\": 503}}"])  # fmt: skip
def test_a_result_that_says_the_call_timed_out_or_was_cancelled_is_an_error(result: str) -> None:
    assert _decisions(_plan(_write(**{"gen_ai.tool.call.result": result}))) == ("review", [("invoice.create", "review", ("write_error", "error_in_result"))])


@pytest.mark.parametrize("result", ["{\"status\": \"ok\"}", "{\"status\": \"success\"}", "{\"status\": \"completed\"}", "{\"status\": \"paid\"}",
                                    "{\"Status\": \"paid\"}", "{\"status\": 200}", "{\"status\": 201}", "{\"timeout\": 30}", "{\"error\": null}",
                                    "{\"data\": {\"items\": [{\"status\": \"failed\"}]}}", "{\"invoice\": {\"status\": \"error\"}}",
                                    "Error: none"])  # fmt: skip
def test_a_result_that_says_success_or_nests_a_status_deeper_is_committed(result: str) -> None:
    assert _decisions(_plan(_write(**{"gen_ai.tool.call.result": result}))) == ("injected", [("invoice.create", "skip", ("write_committed",))])


def test_plain_text_that_opens_as_an_error_report_is_an_error_template() -> None:
    # DECISIONS 964: a write's plain-text result written as a failure is reported (here a timeout) is no commit.
    plan = _plan(_write(**{"gen_ai.tool.call.result": "Error: TimeoutError('billing API did not answer within 10 s')"}))
    assert _decisions(plan) == ("review", [("invoice.create", "review", ("write_error", "error_template_in_result"))])


@pytest.mark.parametrize("result", [
    '{"message": "card declined", "reason": "mcp_error", "code": null, "retryable": false, "details": {}}',
    '{"message": "rate limited", "reason": "tool_reported", "retryable": "true"}',
    '{"type": "ApplicationError", "message": "declined", "non_retryable": true}',
])
def test_a_result_with_a_retry_verdict_is_a_failure_report(result: str) -> None:
    # DECISIONS 983: CrewAI's ToolFailure (returned by a tool, or by CrewAI's MCP client on isError), Temporal's error.
    plan = _plan(_write(**{"gen_ai.tool.call.result": result}))
    assert _decisions(plan) == ("review", [("invoice.create", "review", ("write_error", "error_in_result"))])


def test_a_call_a_hook_blocked_is_a_framework_template() -> None:
    # DECISIONS 984: CrewAI's text for a call its before-tool-call hook refused, on an OK span (OpenInference's
    # event-listener mode): the call never ran, and the span says nothing of it.
    plan = _plan(_write(**{"gen_ai.tool.call.result": "Tool execution blocked by hook. Tool: invoice.create"}))
    assert _decisions(plan) == ("review", [("invoice.create", "review", ("write_error", "error_template_in_result"))])


# --- 4. a tool span's own 5xx with no HTTP method (343) ------------------------------------------------------------


@pytest.mark.parametrize("status", [{"http.response.status_code": 504}, {"http.status_code": "503"}])
def test_a_tool_spans_own_server_error_with_no_method_is_an_error_in_its_result(status: dict) -> None:
    # DECISIONS 254 read the tool span's own response only when it recorded a method too.
    plan = _plan(_write(**{"gen_ai.tool.call.result": "{\"ok\": 1}", **status}))
    assert _decisions(plan) == ("review", [("invoice.create", "review", ("write_error", "error_in_result"))])
    assert plan.steps[0].step.status.value == "error"


# --- 5. a key one letter from the tracefence namespace, or drawn with look-alike letters (344) ---------------------


@pytest.mark.parametrize("key", ["tracefense.status", "trаcefence.status", "tracfence.status", "ttracefence.status", "tracefеnce.status"])
def test_a_key_one_letter_from_the_tracefence_namespace_or_with_a_look_alike_letter_holds_its_step(key: str) -> None:
    # tracefense.status (a typo) and trаcefence.status (a Cyrillic а) were ignored: the timed-out write passed.
    (decision,) = _plan(_write(**{key: "timeout"})).steps
    assert (decision.decision.value, decision.reasons) == ("review", ("malformed_attributes",))
    assert decision.step.malformed[0].message == (f"attribute key {key!r} is in the tracefence namespace (or one letter from it) but is none of its "
                                                  "keys: not understood")  # fmt: skip


@pytest.mark.parametrize("key", ["trace.id", "tracestate", "traceloop.entity.path", "fence.height", "user.name"])
def test_keys_further_from_the_namespace_are_not_flagged(key: str) -> None:
    assert _decisions(_plan(_write(**{key: "x"}))) == ("injected", [("invoice.create", "skip", ("write_committed",))])


def test_every_key_one_letter_from_the_namespace_holds_a_read_marker() -> None:
    # The service reads a span holding no read marker without its attributes (conventions.READ_MARKERS): a typo of the
    # namespace on such a span must still be seen there, as plan and the processor see it.
    from otel_tracefence.normalize.read_keys import READ_MARKERS, misread_key

    letters = "abcdefghijklmnopqrstuvwxyz_а"
    word = "tracefence"
    typos = {word[:i] + c + word[i + 1 :] for i in range(len(word)) for c in letters} | {word[:i] + word[i + 1 :] for i in range(len(word))}
    typos |= {word[:i] + c + word[i:] for i in range(len(word) + 1) for c in letters}
    for typo in typos - {word}:
        key = f"{typo}.status"
        assert misread_key(key) is not None, key
        assert any(marker in key.lower() for marker in READ_MARKERS), key


# --- 7. a request whose two method keys disagree (346) -------------------------------------------------------------


def _client(span_id: str, parent: str, **attributes: Any) -> dict:
    span = _span(span_id, "HTTP", parent, **attributes)
    span["kind"] = 3  # client
    return span


BOTH = {"http.request.method": "GET", "http.method": "POST", "url.full": "https://pay.example/charge"}


def test_a_request_whose_method_keys_disagree_is_no_safe_request_in_time() -> None:
    # Read as its first key's GET: two retried requests below a write were no dispatch at all, and the write passed.
    plan = _plan(_write(), _client("c1" * 8, TOOL_ID, **BOTH), _client("c2" * 8, TOOL_ID, **BOTH))
    assert _decisions(plan) == ("review", [("invoice.create", "review", ("write_dispatched_more_than_once",))])


def test_a_late_request_whose_method_keys_disagree_is_held_untied() -> None:
    # Late, below a span that is no remembered step: the buffer asks untied_request, which let a "GET" pass.
    from otel_tracefence.normalize.span_view import from_otlp
    from otel_tracefence.normalize.dispatches import untied_request
    from otel_tracefence.otlp.json_reader import read_otlp_json

    read = read_otlp_json(_file(_client("c1" * 8, "dd" * 8, **BOTH)))
    view = from_otlp(read.request.resource_spans[0].scope_spans[0].spans[0])
    step = untied_request(view, TraceFenceConfig())
    assert step is not None and step.malformed[0].reason == "late_request_untied"
    assert "dispatched a request (GET / POST https://pay.example/charge)" in step.malformed[0].message
    same = dict(BOTH, **{"http.method": "GET"})
    read = read_otlp_json(_file(_client("c1" * 8, "dd" * 8, **same)))
    assert untied_request(from_otlp(read.request.resource_spans[0].scope_spans[0].spans[0]), TraceFenceConfig()) is None  # one safe method


# --- 6. not a defect: an exception event on a span that is no step, spelt either way (345) --------------------------


@pytest.mark.parametrize("name", ["exception", "Exception"])
def test_an_exception_event_on_a_plain_span_holds_nothing_however_it_is_spelt(name: str) -> None:
    event = [{"name": name, "timeUnixNano": "1700000000050000000", "attributes": [{"key": "exception.type", "value": {"stringValue": "TimeoutError"}}]}]
    plan = _plan(_write(), _span("cc" * 8, "work", ROOT_ID, events=event, x=1))
    assert _decisions(plan) == ("injected", [("invoice.create", "skip", ("write_committed",))])


# --- 8. an openai-agents handoff: a requested transfer_to_<agent> run as a handoff span and that agent's span (347) --


def _handoff_trace(handoff: bool = True, billing: bool = True) -> list[dict]:
    ask = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "transfer_to_billing", "arguments": {}}]}])
    spans = [_span("a2" * 8, "triage.agent", ROOT_ID, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}),
             _span("a3" * 8, "openai.response", "a2" * 8, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": ask,
                   "gen_ai.response.finish_reasons": "['tool_call']"})]  # fmt: skip
    if handoff:
        spans.append(_span("a4" * 8, "triage → unknown.handoff", "a2" * 8, **{"gen_ai.operation.name": "handoff", "gen_ai.handoff.from_agent": "triage"}))
    if billing:
        spans.append(_span("a5" * 8, "billing.agent", ROOT_ID, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}))
    return spans


def test_an_openai_agents_handoff_accounts_for_its_requested_transfer() -> None:
    # transfer_to_billing, asked for by triage's model, was requested_not_recorded (effect unknown): every handoff held.
    read = _span(TOOL_ID, "lookup_customer.tool", "a5" * 8, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_customer",
                 "tracefence.effect": "read", "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "active"})  # fmt: skip
    assert _decisions(_plan(*_handoff_trace(), read)) == ("dynamic", [("lookup_customer", "replay", ("declared_read",))])


@pytest.mark.parametrize("handoff, billing", [(False, True), (True, False)])
def test_a_transfer_with_no_handoff_span_or_no_agent_span_is_still_requested_not_recorded(handoff: bool, billing: bool) -> None:
    assert _decisions(_plan(*_handoff_trace(handoff, billing))) == ("review", [("transfer_to_billing", "review", ("effect_unknown", "requested_not_recorded"))])
