"""A producer's stand-in for a value it was told to hide (``framework_texts.REDACTED_VALUES``: OpenInference's
``__REDACTED__`` under OPENINFERENCE_HIDE_INPUTS / _OUTPUTS, docs/DECISIONS.md 952) is no value: a write whose result
is hidden is not shown committed (``write_outcome_unrecorded``, naming it), hidden arguments are not compared, and a
trace with no tool step whose model output is hidden is held (the calls it asked for cannot be read)."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "7c" * 16
ROOT = "d0" * 8
HIDDEN = "__REDACTED__"


def plan_of(*spans: dict) -> tuple:
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    steps = [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]
    return (trace.replay_class.value if trace.replay_class is not None else None), steps, [m.message for d in trace.steps for m in d.step.malformed]


def root() -> dict:
    return json_span(TRACE, ROOT, "billing.run", **{"openinference.span.kind": "AGENT", "output.value": HIDDEN})


def tool(span_id: str, name: str, effect: str, arguments: str, output: str) -> dict:
    return json_span(TRACE, span_id, name, ROOT, **{"openinference.span.kind": "TOOL", "tool.name": name, "input.value": arguments,
                                                    "output.value": output, "tracefence.effect": effect})


def test_a_write_whose_result_is_hidden_is_held_naming_the_stand_in():
    cls, steps, messages = plan_of(root(), tool("e1" * 8, "create_invoice", "write", '{"amount": 5}', HIDDEN))
    assert (cls, steps) == ("review", [("create_invoice", "review", ("write_outcome_unrecorded", "result_not_recorded"))])
    assert messages == ["its result __REDACTED__ is its producer's stand-in for a hidden value: whether the write committed cannot be read"]


def test_a_read_whose_result_is_hidden_replays_with_no_result_to_inject():
    cls, steps, _ = plan_of(root(), tool("e1" * 8, "lookup_customer", "read", '{"id": 1}', HIDDEN))
    assert (cls, steps) == ("dynamic", [("lookup_customer", "replay", ("declared_read",))])


def test_two_writes_with_hidden_arguments_are_not_compared_as_the_same_call():
    cls, steps, _ = plan_of(
        root(), tool("e1" * 8, "create_invoice", "write", HIDDEN, '"inv_1"'), tool("e2" * 8, "create_invoice", "write", HIDDEN, '"inv_2"'),
    )
    assert cls == "review"
    assert [reasons for _, _, reasons in steps] == [
        ("repeat_arguments_uncompared", "arguments_hidden"), ("repeat_arguments_uncompared", "arguments_hidden"),
    ]


def test_a_trace_with_no_tool_step_whose_model_output_is_hidden_is_held():
    model = json_span(TRACE, "e3" * 8, "ScriptedModel.invoke", ROOT, **{"openinference.span.kind": "LLM", "output.value": HIDDEN})
    cls, steps, _ = plan_of(root(), model)
    assert cls == "review"
    assert {(tool, decision, reasons[0]) for tool, decision, reasons in steps} == {
        ("billing.run", "review", "unrecognized_tool_span"), ("ScriptedModel.invoke", "review", "unrecognized_tool_span"),
    }


def test_a_model_output_that_is_shown_holds_nothing():
    model = json_span(TRACE, "e3" * 8, "ScriptedModel.invoke", ROOT, **{"openinference.span.kind": "LLM", "output.value": "Paris."})
    assert plan_of(json_span(TRACE, ROOT, "billing.run", **{"openinference.span.kind": "AGENT"}), model)[:2] == (None, [])


@pytest.mark.parametrize("stand_in", ["****", "[Filtered]", "<REDACTED>", "REDACTED", "***", "<hidden>", "<masked>"])
def test_a_write_whose_result_is_a_scrubbers_mask_is_held(stand_in):
    cls, steps, _ = plan_of(root(), tool("e1" * 8, "create_invoice", "write", '{"amount": 5}', stand_in))
    assert (cls, steps) == ("review", [("create_invoice", "review", ("write_outcome_unrecorded", "result_not_recorded"))])


SCRUBBED = "[Scrubbed due to 'session']"  # Logfire's scrubbing mark (DECISIONS 986)


@pytest.mark.parametrize("output", [SCRUBBED, json.dumps({"invoice": "inv_1", "session_id": SCRUBBED})], ids=["whole", "one-field"])
def test_a_write_whose_result_holds_a_scrubbing_mark_is_held_never_injected(output):
    cls, steps, _ = plan_of(root(), tool("e1" * 8, "create_invoice", "write", '{"amount": 5}', output))
    assert (cls, steps) == ("review", [("create_invoice", "review", ("write_outcome_unrecorded", "result_not_recorded"))])


def test_two_writes_whose_arguments_hold_a_scrubbing_mark_are_not_compared():
    hidden = json.dumps({"customer": "a", "auth_token": SCRUBBED})
    cls, steps, _ = plan_of(
        root(), tool("e1" * 8, "create_invoice", "write", hidden, '"inv_1"'), tool("e2" * 8, "create_invoice", "write", hidden, '"inv_2"'),
    )
    assert (cls, [reasons for _, _, reasons in steps]) == (
        "review", [("repeat_arguments_uncompared", "arguments_hidden"), ("repeat_arguments_uncompared", "arguments_hidden")],
    )


def test_a_scrubbed_idempotency_key_label_is_no_key():
    span = tool("e1" * 8, "create_invoice", "write", '{"amount": 5}', '"inv_1"')
    span["attributes"].append({"key": "tracefence.idempotency_key", "value": {"stringValue": SCRUBBED}})
    cls, steps, messages = plan_of(root(), span)
    assert (cls, steps) == ("review", [("create_invoice", "review", ("malformed_idempotency_key",))])
    assert messages == ["idempotency key (a string of 27 characters) is a producer's stand-in for a hidden value"]


@pytest.mark.parametrize("kind_key,kind,input_key,output_key", [
    ("traceloop.span.kind", "agent", "traceloop.entity.input", "traceloop.entity.output"),
    ("openinference.span.kind", "AGENT", "input.value", "output.value"),
    ("gen_ai.operation.name", "invoke_agent", "gen_ai.input.messages", "gen_ai.output.messages"),
], ids=["openllmetry", "openinference", "genai"])
def test_an_agent_run_that_recorded_its_input_and_no_output_in_a_trace_with_no_tool_span_is_held(kind_key, kind, input_key, output_key):
    """DECISIONS 987: Agno under OpenLLMetry, streamed, records the run's input and no output (the stream is consumed
    outside the span); a run that recorded both, or neither (content capture off) beside a model span, shows what content
    allows; neither with no model span in the trace is held too (DECISIONS 1010, tests/normalize/test_unrecorded_agent_runs.py)."""
    def run(**attributes) -> dict:
        return json_span(TRACE, ROOT, "billing.agent", **{kind_key: kind, **attributes})

    cls, steps, messages = plan_of(run(**{input_key: "bill customer a"}))
    assert (cls, steps) == ("review", [("billing.agent", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))])
    assert messages == [
        "span d0d0d0d0d0d0d0d0 ('billing.agent') requested tool calls that could not be read: an agent run that recorded its input and no "
        "output, in a trace with no tool span: what it asked for is in no span"
    ]
    assert plan_of(run(**{input_key: "bill customer a", output_key: "done"}))[:2] == (None, [])
    chat = json_span(TRACE, "d1" * 8, "chat", ROOT, **{"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ["stop"]})
    assert plan_of(run(), chat)[:2] == (None, [])
    assert plan_of(run())[0] == "review"
