"""Requested calls a framework records only in its own output fields are read (``conventions.OUTPUT_FIELD_CALLS``,
``normalize/output_fields.py``, docs/DECISIONS.md 963): DSPy ReAct's ``next_tool_name`` / ``next_tool_args`` (ReActV2:
``tool_calls``) in the model's raw answer (``[[ ## field ## ]]`` sections, or a JSON object) and in each module's
``output.value`` echo, with no call id. Every record of one turn (records whose nearest common span is above no tool
step) is one request. Before, a call the model asked for that never ran passed as tool-free (a fail-open)."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import Limits, ToolRule, TraceFenceConfig
from otel_tracefence.normalize.output_fields import output_field_calls
from otel_tracefence.pipeline.documents import plan_text

TRACE = "8e" * 16
REACT = "f0" * 8
RULES = TraceFenceConfig(tool_rules=[ToolRule(match="lookup_customer", effect="read"), ToolRule(match="create_invoice", effect="write")])
ASK_LOOKUP = '[[ ## next_thought ## ]]\nI look\n\n[[ ## next_tool_name ## ]]\nlookup_customer\n\n[[ ## next_tool_args ## ]]\n{"customer": "a"}'
ASK_INVOICE = '[[ ## next_thought ## ]]\ngo\n\n[[ ## next_tool_name ## ]]\ncreate_invoice\n\n[[ ## next_tool_args ## ]]\n{"customer": "a", "amount_cents": 1200}'
CHAIN, LLM = {"openinference.span.kind": "CHAIN"}, {"openinference.span.kind": "LLM"}


def span(span_id: str, name: str, parent: str, kind: dict, output: str | None = None, code: int = 0) -> dict:
    fields = {**kind, **({"output.value": output, "output.mime_type": "application/json"} if output is not None else {})}
    made = json_span(TRACE, span_id, name, parent, **fields)
    made["status"] = {"code": code}
    return made


def turn(prefix: str, answer: str, parsed: bool = True) -> list[dict]:
    """One ReAct turn under REACT: Predict.forward > Predict(StringSignature).forward > ChatAdapter > the LM, each
    module echoing the parsed prediction (``parsed``), else the adapter failing and nothing echoed."""
    echo = None
    if parsed:
        fields = (section.partition(" ## ]]\n") for section in answer.split("[[ ## ")[1:])
        echo = json.dumps({name: json.loads(value) if name == "next_tool_args" else value.strip() for name, _, value in fields})
    return [
        span(prefix + "1" * 14, "Predict.forward", REACT, CHAIN, echo, 0 if parsed else 2),
        span(prefix + "2" * 14, "Predict(StringSignature).forward", prefix + "1" * 14, CHAIN, echo, 0 if parsed else 2),
        span(prefix + "3" * 14, "ChatAdapter.__call__", prefix + "2" * 14, CHAIN, f"[{echo}]" if parsed else None, 0 if parsed else 2),
        span(prefix + "4" * 14, "DummyLM.__call__", prefix + "3" * 14, LLM, json.dumps([answer])),
    ]


def tool(span_id: str, name: str, arguments: dict, output: str = '"ok"', code: int = 0) -> dict:
    made = span(span_id, name, REACT, {"openinference.span.kind": "TOOL", "input.value": json.dumps({"kwargs": arguments}), "input.mime_type": "application/json"}, output, code)
    return made


def plan_of(*spans: dict) -> tuple[str | None, list]:
    root = span(REACT, "ReAct.forward", "", CHAIN)
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [root, *spans]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", RULES)
    klass = trace.replay_class.value if trace.replay_class is not None else None
    return klass, sorted((d.step.call_id, d.step.tool, d.decision.value, d.reasons) for d in trace.steps)


def test_a_call_asked_in_the_models_answer_that_never_ran_is_held_once_for_both_adapter_attempts():
    """The matrix's requested_never_ran: the ChatAdapter and its JSONAdapter fallback each asked the LM, both answers
    name the call, neither parsed, nothing ran: one requested step (it was no step at all: tool-free)."""
    ask = ASK_INVOICE.replace("create_invoice", "delete_customer")
    first = turn("a1", ask, parsed=False)
    retry = [span("a5" + "3" * 14, "JSONAdapter.__call__", "a1" + "2" * 14, CHAIN, None, 2), span("a5" + "4" * 14, "DummyLM.__call__", "a5" + "3" * 14, LLM, json.dumps([ask]))]
    assert plan_of(*first, *retry) == ("review", [("a1" + "4" * 14 + "/0", "delete_customer", "review", ("effect_unknown", "requested_not_recorded"))])


def test_every_modules_echo_of_a_turn_is_the_one_request_the_tool_span_ran():
    assert plan_of(*turn("b1", ASK_LOOKUP), tool("b9" * 8, "lookup_customer.__call__", {"customer": "a"})) == (
        "dynamic", [("b9" * 8, "lookup_customer", "replay", ("declared_read", "arguments_unwrapped"))]
    )


def test_two_turns_asking_one_write_are_two_requests_when_only_one_ran():
    """The turns meet at ReAct.forward, above the tool step: not one turn. The second request ran nowhere: held."""
    ran = tool("c9" * 8, "create_invoice.__call__", {"customer": "a", "amount_cents": 1200})
    assert plan_of(*turn("c1", ASK_INVOICE), ran, *turn("c2", ASK_INVOICE)) == ("review", [
        ("c2" + "1" * 14 + "/0", "create_invoice", "review", ("write_status_unknown", "repeats_earlier_write", "requested_not_recorded")),
        ("c9" * 8, "create_invoice", "skip", ("write_committed", "repeated_later", "arguments_unwrapped")),
    ])


@pytest.mark.parametrize(("value", "calls"), [
    (json.dumps([ASK_LOOKUP]), [(None, "lookup_customer", {"customer": "a"})]),
    (json.dumps(["[[ ## next_tool_name ## ]]\nfinish\n\n[[ ## next_tool_args ## ]]\n{}"]), [(None, "finish", {})]),
    (json.dumps(["[[ ## next_tool_name ## ]]\nlookup_customer\n\n[[ ## next_tool_args ## ]]\n{'customer': 'a'}"]), [(None, "lookup_customer", {"customer": "a"})]),
    (json.dumps(['{"next_thought": "x", "next_tool_name": "lookup_customer", "next_tool_args": {"customer": "a"}}']), [(None, "lookup_customer", {"customer": "a"})]),  # JSONAdapter
    (json.dumps({"next_thought": "x", "next_tool_name": "lookup_customer", "next_tool_args": {"customer": "a"}}), [(None, "lookup_customer", {"customer": "a"})]),
    (json.dumps(['[[ ## next_thought ## ]]\ngo\n\n[[ ## tool_calls ## ]]\n{"tool_calls": [{"name": "a", "args": {"x": 1}}, {"name": "b", "args": {}}]}']),
     [(None, "a", {"x": 1}), (None, "b", {})]),  # ReActV2's raw answer
    (json.dumps({"next_thought": "go", "tool_calls": {"tool_calls": [{"id": "t1", "name": "a", "args": {"x": 1}}]}}), [("t1", "a", {"x": 1})]),
    (json.dumps({"next_thought": "go", "tool_calls": "tool_calls=[ToolCall(id=None, name='a', args={'x': 1})] tool_call_results=None"}), []),  # an echo's repr
    (json.dumps({"reasoning": "done", "answer": "the tool said next_tool_name"}), []),  # no prediction of the table
    (json.dumps({"trajectory": {"tool_name_0": "a"}, "answer": "x"}), []),
])
def test_the_calls_in_each_form(value, calls):
    assert list(output_field_calls(value)) == calls


@pytest.mark.parametrize(("value", "unread"), [
    (json.dumps(["[[ ## next_tool_name ## ]]\nlookup_customer\n\n[[ ## next_tool_args ## ]]\n{customer: a"]),
     "a next_tool_name 'lookup_customer' whose next_tool_args is no JSON or Python literal"),
    (json.dumps({"next_tool_name": ["a"], "next_tool_args": {}}), "a next_tool_name that is no tool name"),
    (json.dumps(["[[ ## next_thought ## ]]\ngo\n\n[[ ## tool_calls ## ]]\n[{'name': 'a'"]), "a tool_calls section that is not JSON"),
    (json.dumps({"next_thought": "go", "tool_calls": {"tool_calls": [{"args": {}}]}}), "a tool_calls entry with no readable name"),
])
def test_a_call_that_cannot_be_read_is_unread(value, unread):
    assert list(output_field_calls(value)) == [unread]


def test_an_unread_answer_holds_its_trace():
    bad = turn("d1", ASK_LOOKUP.replace('{"customer": "a"}', "{customer: a"), parsed=False)
    klass, steps = plan_of(*bad)
    assert (klass, steps) == ("review", [("d1" + "4" * 14, "DummyLM.__call__", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))])


def test_the_arguments_are_read_under_the_limits():
    big = json.dumps(["[[ ## next_tool_name ## ]]\na\n\n[[ ## next_tool_args ## ]]\n" + json.dumps({"x": "y" * 100})])
    (call,) = output_field_calls(big)
    assert call[:2] == (None, "a") and Limits().max_argument_bytes > 100
