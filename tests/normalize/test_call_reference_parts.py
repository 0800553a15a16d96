"""An output-message part of a type no convention defines that only refers to a call another part of the same message
requests adds no call and holds nothing (``conventions.CALL_REFERENCE_KEYS``, docs/DECISIONS.md 961): the Microsoft
Agent Framework's ``function_approval_request`` and the Vercel AI SDK 7's ``tool_approval_request``, beside the
``tool_call`` part of the call waiting for approval. A part that refers to a call no other part requests, or to one
whose tool or arguments differ, or names no call it can be matched by, stays ``requested_call_unread`` (fail closed)."""

from __future__ import annotations

import json

import pytest

from test_result_values import ROOT_ID, _decisions, _plan, _span, _write

AGENT_ID = "ce" * 8
CALL = {"type": "tool_call", "id": "call_w1", "name": "invoice.create", "arguments": {"c": 1}}
MAF = {"type": "function_approval_request", "id": "af-call-1", "user_input_request": True, "additional_properties": {},
       "function_call": {"type": "function_call", "call_id": "call_w1", "name": "invoice.create", "arguments": {"c": 1}, "id": "af-call-1"}}  # fmt: skip
AI_SDK_7 = {"type": "tool_approval_request", "approval_id": "aitxt-1", "tool_call_id": "call_w1"}
UNREAD = ("review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))
NEVER_RAN = ("invoice.create", "review", ("effect_unknown", "requested_not_recorded"))
RAN = ("invoice.create", "skip", ("write_committed",))


def agent(*parts: dict) -> dict:
    messages = json.dumps([{"role": "assistant", "parts": list(parts), "finish_reason": "tool_call"}])
    return _span(AGENT_ID, "invoke_agent billing", ROOT_ID, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": messages})


@pytest.mark.parametrize("approval", [MAF, AI_SDK_7], ids=["agent_framework", "ai_sdk_7"])
def test_an_approval_part_that_refers_to_a_requested_call_adds_none(approval):
    assert _decisions(_plan(agent(CALL, approval))) == ("review", [NEVER_RAN])  # waiting for approval: never ran
    assert _decisions(_plan(agent(CALL, approval), _write(**{"gen_ai.tool.call.id": "call_w1"}))) == ("injected", [RAN])  # approved and run


@pytest.mark.parametrize("approval", [
    {**AI_SDK_7, "tool_call_id": "call_w2"},  # a call no part requests
    {**MAF, "function_call": {**MAF["function_call"], "call_id": "call_w2"}},
    {**MAF, "function_call": {**MAF["function_call"], "name": "refund"}},  # the same id, another tool
    {**MAF, "function_call": {**MAF["function_call"], "arguments": {"c": 2}}},  # the same id, other arguments
    {**MAF, "function_call": {**MAF["function_call"], "call_id": None}},  # a nested call with no id
    {"type": "tool_approval_request", "approval_id": "aitxt-1"},  # refers to no call at all
    {**AI_SDK_7, "tool_call_id": {"id": "call_w1"}},  # an id that is no string or number
], ids=["other_id", "nested_other_id", "other_tool", "other_arguments", "nested_no_id", "no_reference", "object_id"])
def test_an_unknown_part_that_refers_to_no_requested_call_stays_unread(approval):
    assert _decisions(_plan(agent(CALL, approval), _write(**{"gen_ai.tool.call.id": "call_w1"}))) == ("review", [("invoke_agent billing", *UNREAD), RAN])


def test_arguments_as_json_text_and_as_their_value_are_one_call():
    approval = {**MAF, "function_call": {**MAF["function_call"], "arguments": '{"c": 1}'}}
    assert _decisions(_plan(agent(CALL, approval), _write(**{"gen_ai.tool.call.id": "call_w1"}))) == ("injected", [RAN])


def test_a_reference_in_another_message_does_not_count():
    """The part must refer to a call of its own message: in a message of its own it is unread, as before."""
    messages = json.dumps([{"role": "assistant", "parts": [CALL]}, {"role": "assistant", "parts": [AI_SDK_7]}])
    span = _span(AGENT_ID, "invoke_agent billing", ROOT_ID, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": messages})
    assert _decisions(_plan(span, _write(**{"gen_ai.tool.call.id": "call_w1"}))) == ("review", [("invoke_agent billing", *UNREAD), RAN])
