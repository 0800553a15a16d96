"""The fresh-user trial's fail-open inputs (round 5, F2): each now holds its trace, with the reason
naming what was not understood (docs/DECISIONS.md 187-190). The inputs are the trial's files, in
tests/fixtures/trial/."""

from __future__ import annotations

import json

import pytest

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass

from conftest import ROOT

TRIAL = ROOT / "tests" / "fixtures" / "trial"
CONFIG = TraceFenceConfig()


def planned(name: str):
    """(class, [(tool, decision, reasons, malformed messages)]) of the one trace in a trial file."""
    plans, _ = plan_text((TRIAL / name).read_text(), "otlp-json", CONFIG)
    assert len(plans) == 1
    plan = plans[0]
    return plan.replay_class, [(d.step.tool, d.decision.value, list(d.reasons), [m.message for m in d.step.malformed]) for d in plan.steps]


# --- 3. a requested call named after the agent that asked for it ---------------------------------------


def test_a_request_named_after_an_enclosing_agent_is_not_run_by_that_agent():
    assert planned("req_agent_same.json") == planned("req_agent_diff.json") == (
        ReplayClass.REVIEW,
        [("refunds", "review", ["effect_unknown", "requested_not_recorded"], [])],
    )


# --- 4. requested calls that cannot be read --------------------------------------------------------------

READ_LOOKUP = ("lookup", "replay", ["declared_read"], [])


def unread(what: str):
    return (
        "chat m",
        "review",
        ["requested_call_unread", "effect_unknown", "arguments_not_recorded"],
        [f"span 1000000000000002 ('chat m') requested tool calls that could not be read: its recorded output holds {what}"],
    )


@pytest.mark.parametrize(
    "name, what",
    [
        ("rq_second_no_name.json", "a tool_call part with no readable name"),
        ("rq_second_name_obj.json", "a tool_call part with no readable name"),
        ("rq_second_other_type.json", "a part of type 'function_tool_call', which no convention read here defines"),
        ("rq_only_other_type.json", "a part of type 'function_tool_call', which no convention read here defines"),
    ],
)
def test_an_unread_requested_call_holds_its_trace_whatever_else_it_holds(name, what):
    assert planned(name) == (ReplayClass.REVIEW, [unread(what), READ_LOOKUP])


# --- 6. contradictory effect hints --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, said",
    [
        ("http_two.json", "http.request.method=GET (read), http.method=POST (write)"),
        ("hint_two.json", "mcp.tool.annotations.readOnlyHint=true (read), http.request.method=POST (write)"),
    ],
)
def test_contradictory_effect_hints_are_held(name, said):
    assert planned(name) == (
        ReplayClass.REVIEW,
        [("api", "review", ["effect_hints_conflict", "effect_unknown", "arguments_not_recorded"], [f"effect hints contradict each other: {said}"])],
    )


# --- 18. convention values the conventions do not define ----------------------------------------------


def not_read(sign: str):
    why = f"span 1000000000000002 ('charge_card') looks like tool activity ({sign}), but no known convention reads it"
    return (ReplayClass.REVIEW, [("charge_card", "review", ["unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"], [why])])


@pytest.mark.parametrize(
    "name, sign",
    [
        ("v_genai_upper.json", "its attribute gen_ai.operation.name='EXECUTE_TOOL' is 'execute_tool' only after folding its case, separators or invisible characters"),
        ("v_genai_space.json", "its attribute gen_ai.operation.name='execute_tool ' is 'execute_tool' only after folding its case, separators or invisible characters"),
        ("v_oi_fn_call.json", "its attribute openinference.span.kind='FUNCTION' is no OpenInference span kind"),
        ("v_rpc_method.json", "its attribute rpc.method='tools/call' (an MCP tool call recorded as an RPC span, with no mcp.method.name)"),
    ],
)
def test_a_kind_value_understood_only_after_folding_is_held(name, sign):
    assert planned(name) == not_read(sign)


@pytest.mark.parametrize(
    "name",
    ["v_gen_ai_tool_type.json", "v_langfuse_upper.json", "v_langsmith_upper.json", "v_mcp_method.json", "v_mlflow_lower.json",
     "v_oi_lower.json", "v_oi_mixed.json", "v_tool_call_id_only.json", "v_traceloop_upper.json", "v_vercel_other.json"],
)
def test_the_trials_other_variants_are_held(name):
    assert planned(name)[0] is ReplayClass.REVIEW


def _one_tool_span(attributes: dict):
    from otel_tracefence.normalize import SpanView
    from otel_tracefence.pipeline.plan import plan_spans

    trace = "adadadadadadadadadadadadadadadad"
    root = SpanView(trace, "1000000000000001", "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, start_time_unix_nano=1, end_time_unix_nano=9)
    tool = SpanView(trace, "1000000000000002", "execute_tool api", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "api", **attributes},
                    parent_span_id="1000000000000001", start_time_unix_nano=2, end_time_unix_nano=3)
    plan = plan_spans(trace, [root, tool], CONFIG).plan
    return plan.replay_class, [(d.decision.value, list(d.reasons), d.step.effect_source.value) for d in plan.steps]


@pytest.mark.parametrize(
    "attributes, source",
    [
        ({"http.request.method": "HEAD", "http.method": "HEAD"}, "http_method"),  # GET beside HEAD is no one method (374)
        ({"mcp.tool.annotations.readOnlyHint": True, "http.request.method": "GET"}, "mcp_hint"),
    ],
)
def test_a_read_only_hints_say_is_labelled_hinted_not_declared(attributes, source):
    assert _one_tool_span(attributes) == (ReplayClass.DYNAMIC, [("replay", ["hinted_read", "arguments_not_recorded"], source)])


def test_a_declared_read_stays_declared_over_a_contradicting_hint():
    assert _one_tool_span({"tracefence.effect": "read", "http.request.method": "POST"}) == (
        ReplayClass.DYNAMIC, [("replay", ["declared_read", "arguments_not_recorded"], "declared")])


# --- s21 trial 1: misspellings of execute_tool, and operations no convention defines (DECISIONS 203) ---------


def planned_with_operation(operation: str):
    """The trial's ``v_genai_upper.json`` with ``gen_ai.operation.name`` of its tool span set to ``operation``, its agent
    run given an output (one that records none, in a trace with no model span, is held: DECISIONS 1010)."""
    text = (TRIAL / "v_genai_upper.json").read_text().replace('"EXECUTE_TOOL"', json.dumps(operation))
    text = text.replace('"stringValue": "invoke_agent"}}', '"stringValue": "invoke_agent"}}, {"key": "gen_ai.output.messages", "value": {"stringValue": "[]"}}', 1)
    plans, _ = plan_text(text, "otlp-json", CONFIG)
    assert len(plans) == 1
    return plans[0].replay_class, [(d.step.tool, d.decision.value, list(d.reasons), [m.message for m in d.step.malformed]) for d in plans[0].steps]


@pytest.mark.parametrize(
    "operation, shown",
    [("execute-tool", "'execute-tool'"), ("executeTool", "'executeTool'"), ("execute_tool\u200b", "'execute_tool\\u200b'"),
     ("\ufeffexecute.tool", "'\\ufeffexecute.tool'"), ("ｅｘｅｃｕｔｅ＿ｔｏｏｌ", "'ｅｘｅｃｕｔｅ＿ｔｏｏｌ'")],
)
def test_execute_tool_misspelt_by_separators_or_invisible_characters_is_held(operation, shown):
    assert planned_with_operation(operation) == not_read(
        f"its attribute gen_ai.operation.name={shown} is 'execute_tool' only after folding its case, separators or invisible characters")


@pytest.mark.parametrize("operation", ["run_tool", "tool_call", "invokeTool"])
def test_an_operation_no_convention_defines_that_names_a_tool_is_held(operation):
    assert planned_with_operation(operation) == not_read(f"its attribute gen_ai.operation.name={operation!r} is no GenAI operation, and it names a tool")


@pytest.mark.parametrize("operation", ["framework", "execute_event_loop_cycle", "retrieval", "embeddings"])
def test_an_operation_that_names_no_tool_passes_as_before(operation):
    """Spring AI's ``framework`` and Strands' ``execute_event_loop_cycle`` spans are in every trace of those
    frameworks, tool calls or not: an unknown operation alone does not hold a trace (DECISIONS 203)."""
    assert planned_with_operation(operation) == (None, [])


# --- s21 trial 2: a destructive hint beside a read, and a method token in another case (DECISIONS 204) -------


def _conflict(said: str):
    return (ReplayClass.REVIEW, [("review", ["effect_hints_conflict", "effect_unknown", "arguments_not_recorded"], "none")], [f"effect hints contradict each other: {said}"])


def _one_tool_span_messages(attributes: dict):
    from otel_tracefence.normalize import SpanView
    from otel_tracefence.pipeline.plan import plan_spans

    trace = "adadadadadadadadadadadadadadadad"
    root = SpanView(trace, "1000000000000001", "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, start_time_unix_nano=1, end_time_unix_nano=9)
    tool = SpanView(trace, "1000000000000002", "execute_tool api", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "api", **attributes},
                    parent_span_id="1000000000000001", start_time_unix_nano=2, end_time_unix_nano=3)
    plan = plan_spans(trace, [root, tool], CONFIG).plan
    return (plan.replay_class, [(d.decision.value, list(d.reasons), d.step.effect_source.value) for d in plan.steps],
            [m.message for d in plan.steps for m in d.step.malformed])


@pytest.mark.parametrize(
    "attributes, said",
    [
        ({"mcp.tool.annotations.destructiveHint": True, "http.request.method": "GET"},
         "mcp.tool.annotations.destructiveHint=true (write), http.request.method=GET (read)"),
        ({"mcp.tool.annotations.readOnlyHint": True, "mcp.tool.annotations.destructiveHint": True},
         "mcp.tool.annotations.readOnlyHint=true (read), mcp.tool.annotations.destructiveHint=true (write)"),
        ({"gen_ai.tool.annotations.destructiveHint": True, "http.method": "HEAD"},
         "gen_ai.tool.annotations.destructiveHint=true (write), http.method=HEAD (read)"),
        ({"mcp.tool.annotations.readOnlyHint": True, "http.request.method": "get"},
         "mcp.tool.annotations.readOnlyHint=true (read), http.request.method=get (unknown)"),
    ],
)
def test_a_destructive_hint_or_a_method_in_another_case_beside_a_read_is_held(attributes, said):
    assert _one_tool_span_messages(attributes) == _conflict(said)


@pytest.mark.parametrize("method", ["get", "Get", "_OTHER", "PURGE"])
def test_a_method_token_rfc_9110_does_not_define_as_written_has_no_known_effect(method):
    assert _one_tool_span_messages({"http.request.method": method}) == (
        ReplayClass.REVIEW, [("review", ["effect_unknown", "arguments_not_recorded"], "http_method")], [])


def test_a_destructive_hint_alone_is_a_hinted_write_and_its_false_says_nothing():
    assert _one_tool_span_messages({"mcp.tool.annotations.destructiveHint": True}) == (
        ReplayClass.STATIC, [("skip", ["write_committed", "result_not_recorded", "arguments_not_recorded"], "mcp_hint")], [])
    assert _one_tool_span_messages({"mcp.tool.annotations.destructiveHint": False, "http.request.method": "GET"}) == (
        ReplayClass.DYNAMIC, [("replay", ["hinted_read", "arguments_not_recorded"], "http_method")], [])


def test_the_trials_destructive_hint_beside_get_is_held_through_tracefence_plan():
    assert planned("destructive_get.json") == (
        ReplayClass.REVIEW,
        [("api", "review", ["effect_hints_conflict", "effect_unknown", "arguments_not_recorded"],
          ["effect hints contradict each other: mcp.tool.annotations.destructiveHint=true (write), http.request.method=GET (read)"])],
    )
