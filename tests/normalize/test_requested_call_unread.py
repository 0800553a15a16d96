"""The second fresh-user trial of round 22 (t24), finding 13: a model span's ``gen_ai.output.messages`` that mentions
tools but does not parse holds its trace as ``requested_call_unread`` (what was not understood: the requested calls),
not as ``unrecognized_tool_span`` (DECISIONS 386)."""

from __future__ import annotations

import json

import pytest

from test_result_values import ROOT_ID, _decisions, _plan, _span, _write

MODEL_ID = "cc" * 8
MESSAGES = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "call1", "name": "invoice.create", "arguments": {"c": 1}}]}])


@pytest.mark.parametrize("text, what", [
    (MESSAGES[:-20], "recorded output that mentions tools but is cut off"),
    (MESSAGES.replace('"c": 1}}]}]', '"c": tru'), "recorded output that mentions tools but is cut off"),
])  # fmt: skip
def test_a_cut_off_output_naming_tools_is_a_requested_call_unread(text: str, what: str) -> None:
    # t24's v9_requested_trunc.py genai_msgs_cut: the model span was held `unrecognized_tool_span`.
    model = _span(MODEL_ID, "chat", ROOT_ID, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": text})
    plan = _plan(model, _write(**{"gen_ai.tool.call.id": "call1"}))
    assert _decisions(plan) == ("review", [
        ("chat", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded")),
        ("invoice.create", "skip", ("write_committed",)),
    ])  # fmt: skip
    assert f"requested tool calls that could not be read: its recorded output holds {what}" in plan.steps[0].step.malformed[0].message


def test_an_unparsed_output_that_names_no_tool_holds_nothing() -> None:
    model = _span(MODEL_ID, "chat", ROOT_ID, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": "Hello, the invoice is re"})
    assert _decisions(_plan(model, _write(**{"gen_ai.tool.call.id": "call1"}))) == ("injected", [("invoice.create", "skip", ("write_committed",))])


# --- spans sharing one span id: what one of them requested is its own (DECISIONS 360, 692) ------------------------

ASKED = {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ["tool_calls"],
         "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "on it"}]}])}  # fmt: skip


def test_a_model_span_whose_asked_for_calls_are_unread_is_held_when_another_span_of_its_id_read_one() -> None:
    """Two model spans under one span id: the first's call is read (and ran), the second's finish reason says it asked
    for calls and none can be read. The first span's read call does not cover the second's: it is held."""
    reads = _span(MODEL_ID, "chat", ROOT_ID, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": MESSAGES})
    plan = _plan(reads, _span(MODEL_ID, "chat again", ROOT_ID, **ASKED), _write(**{"gen_ai.tool.call.id": "call1"}))
    assert _decisions(plan) == ("review", [
        ("chat again", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded")),
        ("invoice.create", "skip", ("write_committed",)),
    ])  # fmt: skip
    assert plan.steps[0].step.malformed[0].message == (
        f"span {MODEL_ID} ('chat again') requested tool calls that could not be read: its finish reason says the model "
        "asked for tool calls, and none could be read from its recorded output")
