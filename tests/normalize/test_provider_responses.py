"""Requested calls in a model provider's raw response recorded as an LLM span's ``output.value``
(``conventions.PROVIDER_RESPONSE_CALLS``, docs/DECISIONS.md 967), read where no other key of the span names a call:
a call the model asked for and no span ran is held, never a tool-free trace."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "cd" * 16
AGENT, LLM, TOOL = "d0" * 8, "d1" * 8, "d2" * 8
RESPONSES = {
    "openai_chat": {"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "invoice.create", "arguments": "{\"amount\": 5}"}}]}, "finish_reason": "tool_calls"}]},
    "openai_responses": {"output": [{"type": "function_call", "call_id": "call_9", "name": "invoice.create", "arguments": "{\"amount\": 5}"}]},
    "anthropic": {"type": "message", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "call_9", "name": "invoice.create",
                                                                                   "input": {"amount": 5}}], "stop_reason": "tool_use"},
    "bedrock": {"output": {"message": {"content": [{"toolUse": {"toolUseId": "call_9", "name": "invoice.create", "input": {"amount": 5}}}]}}},
    "gemini": {"candidates": [{"content": {"parts": [{"functionCall": {"id": "call_9", "name": "invoice.create", "args": {"amount": 5}}}]}}]},
}


def plan_of(response: dict, ran: bool = False) -> tuple:
    spans = [json_span(TRACE, AGENT, "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"}),
             json_span(TRACE, LLM, "chat", AGENT, **{"openinference.span.kind": "LLM", "output.mime_type": "application/json",
                                                     "output.value": json.dumps(response)})]
    if ran:
        spans.append(json_span(TRACE, TOOL, "invoice.create", AGENT, **{"openinference.span.kind": "TOOL", "tool.name": "invoice.create",
                                                                       "tool_call.id": "call_9", "input.value": "{\"amount\": 5}",
                                                                       "output.value": "{\"id\": \"inv_1\"}", "tracefence.effect": "write"}))
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    cls = trace.replay_class.value if trace.replay_class is not None else None
    return cls, [(d.step.call_id, d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


@pytest.mark.parametrize("form", sorted(RESPONSES))
def test_a_call_in_a_raw_response_that_no_span_ran_is_held(form):
    assert plan_of(RESPONSES[form]) == ("review", [("call_9", "invoice.create", "review", ("effect_unknown", "requested_not_recorded"))])


@pytest.mark.parametrize("form", sorted(RESPONSES))
def test_a_call_in_a_raw_response_that_ran_is_its_step(form):
    assert plan_of(RESPONSES[form], ran=True) == ("injected", [("call_9", "invoice.create", "skip", ("write_committed",))])


def test_a_response_without_calls_requests_nothing():
    assert plan_of({"choices": [{"message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}]}) == (None, [])


# A run's chat transcript recorded as its agent's output (CrewAI's TaskOutput.messages; the crew's CHAIN span holds
# them under tasks_output): where no model span records the requests, it is their only record (DECISIONS 982).
TRANSCRIPT = [{"role": "user", "content": "bill customer a"},
              {"role": "assistant", "content": "", "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "invoice_create", "arguments": "{\"amount\": 5}"}}]},
              {"role": "tool", "content": "Tool execution blocked by hook. Tool: invoice_create", "tool_call_id": "call_9"},
              {"role": "assistant", "content": "done"}]  # fmt: skip


def transcript_plan(ran_as: str | None) -> tuple:
    """A crew's CHAIN span and its AGENT span each recording the transcript; ``ran_as``: the name a TOOL span (no call
    id, as CrewAI's) ran the call under, or None."""
    chain = json_span(TRACE, AGENT, "Crew.kickoff", **{"openinference.span.kind": "CHAIN", "output.value": json.dumps({"tasks_output": [{"messages": TRANSCRIPT}]})})
    agent = json_span(TRACE, LLM, "billing._execute_core", AGENT, **{"openinference.span.kind": "AGENT", "output.value": json.dumps({"raw": "done", "messages": TRANSCRIPT})})
    spans = [chain, agent]
    if ran_as:
        spans.append(json_span(TRACE, TOOL, f"{ran_as}._use", LLM, **{"openinference.span.kind": "TOOL", "tool.name": ran_as, "input.value": "{\"amount\": 5}",
                                                                      "output.value": "{\"id\": \"inv_1\"}", "tracefence.effect": "write"}))
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    cls = trace.replay_class.value if trace.replay_class is not None else None
    return cls, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


def test_a_call_in_a_recorded_chat_transcript_that_no_span_ran_is_held_once():
    assert transcript_plan(None) == ("review", [("invoice_create", "review", ("effect_unknown", "requested_not_recorded"))])


@pytest.mark.parametrize("name", ["invoice_create", "Invoice Create", "invoiceCreate"])
def test_the_span_that_ran_a_transcript_call_matches_it_under_the_name_the_model_saw(name):
    """The model sees a sanitized tool name (CrewAI's sanitize_tool_name); the TOOL span records the tool's own: one
    tool when they fold alike (case, separators), so no phantom request."""
    assert transcript_plan(name) == ("injected", [(name, "skip", ("write_committed",))])
