"""Requested calls recorded in Gemini's part form, Google ADK's LlmResponse and a Langtrace-style whole completion
(docs/DECISIONS.md 978): a request no tool span records is ``requested_not_recorded``; one a tool span records is
no phantom. Exact decisions, reasons and classes through ``plan_text``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text
from tests.normalize.test_idempotency_headers import TRACE, ROOT, _at, _root

MODEL = "b2" * 8
TOOL = "b3" * 8
_CALL = {"name": "payments.refund", "args": {"amount": 5}, "id": "g-1"}
_RECORDS = {
    "functionCall part": {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ["STOP"],
                          "gen_ai.output.messages": json.dumps([{"role": "model", "parts": [{"functionCall": _CALL}]}])},
    "function_call part": {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps([{"role": "model", "parts": [{"function_call": _CALL}]}])},
    "ADK llm_response": {"gen_ai.system": "gcp.vertex.agent", "gen_ai.response.finish_reasons": ["stop"],
                         "gcp.vertex.agent.llm_response": json.dumps({"content": {"parts": [{"function_call": _CALL}], "role": "model"}, "finish_reason": "STOP"})},
    "ADK llm_response camel": {"gcp.vertex.agent.llm_response": json.dumps({"content": {"parts": [{"text": "ok"}, {"functionCall": _CALL}]}})},
    "Langtrace completion": {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.completion": json.dumps([{
        "role": "assistant", "content": "", "tool_calls": [{"id": "g-1", "type": "function", "function": {"name": "payments.refund", "arguments": '{"amount": 5}'}}]}])},
}  # fmt: skip


def _plan(*spans: dict) -> Any:
    text = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [_root(), *spans]}]}]})
    (plan,), _ = plan_text(text, "auto", TraceFenceConfig())
    return plan


def _rows(plan: Any) -> list[tuple]:
    return [(d.step.call_id, d.step.tool, d.decision.value, d.reasons) for d in plan.steps]


@pytest.mark.parametrize("record", list(_RECORDS))
def test_an_unmatched_request_is_requested_not_recorded(record: str) -> None:
    plan = _plan(_at(json_span(TRACE, MODEL, "chat m", ROOT, **_RECORDS[record]), 10))
    assert plan.replay_class.value == "review"
    assert _rows(plan) == [("g-1", "payments.refund", "review", ("effect_unknown", "requested_not_recorded"))]


@pytest.mark.parametrize("record", list(_RECORDS))
def test_a_request_its_tool_span_records_is_no_phantom(record: str) -> None:
    tool = _at(json_span(TRACE, TOOL, "execute_tool payments.refund", ROOT, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.refund", "gen_ai.tool.call.id": "g-1",
        "gen_ai.tool.call.arguments": '{"amount": 5}', "tracefence.effect": "read"}), 20)  # fmt: skip
    plan = _plan(_at(json_span(TRACE, MODEL, "chat m", ROOT, **_RECORDS[record]), 10), tool)
    assert (plan.replay_class.value, _rows(plan)) == ("dynamic", [("g-1", "payments.refund", "replay", ("declared_read",))])


def test_a_plain_text_completion_and_a_text_part_request_nothing() -> None:
    spans = [_at(json_span(TRACE, MODEL, "chat m", ROOT, **{"gen_ai.completion": "I used the refund tool."}), 10),
             _at(json_span(TRACE, "b4" * 8, "call_llm", ROOT, **{"gcp.vertex.agent.llm_response": json.dumps({"content": {"parts": [{"text": "done"}]}})}), 30)]  # fmt: skip
    assert _rows(_plan(*spans)) == []


def test_a_gemini_part_whose_call_is_no_object_is_unread() -> None:
    record = {"gen_ai.output.messages": json.dumps([{"role": "model", "parts": [{"functionCall": "payments.refund"}]}])}
    plan = _plan(_at(json_span(TRACE, MODEL, "chat m", ROOT, **record), 10))
    assert plan.replay_class.value == "review"
    assert [(d.decision.value, d.reasons) for d in plan.steps] == [("review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))]
