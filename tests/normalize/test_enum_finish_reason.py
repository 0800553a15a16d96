"""Semantic Kernel's finish reason: the singular ``gen_ai.response.finish_reason``, each completion's ``str()`` of its
``FinishReason`` enum, comma-joined (docs/DECISIONS.md 560). A chat span whose finish reason says the model asked for
tool calls, in a trace where no call can be read (SK writes the requested calls only to log records), is held."""

from __future__ import annotations

from typing import Any

import pytest

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize import SpanView
from otel_tracefence.normalize.activity import asked_for_tools
from otel_tracefence.normalize.trace import normalize_trace
from otel_tracefence.planner import plan_trace

TRACE = "e7" * 16
ROOT, CHAT, AGENT = "b1" * 8, "b2" * 8, "b3" * 8


def _view(span_id: str, name: str, parent: str | None = ROOT, **attributes: Any) -> SpanView:
    return SpanView(trace_id=TRACE, span_id=span_id, parent_span_id=parent, name=name, attributes=attributes,
                    start_time_unix_nano=int(span_id[:2], 16), end_time_unix_nano=int(span_id[:2], 16) + 1)  # fmt: skip


def _chat(finish: Any, key: str = "gen_ai.response.finish_reason") -> SpanView:
    return _view(CHAT, "chat gpt-4o", AGENT, **{"gen_ai.operation.name": "chat", "gen_ai.system": "openai", key: finish})


@pytest.mark.parametrize("finish", ["FinishReason.TOOL_CALLS", "FinishReason.STOP,FinishReason.TOOL_CALLS", "tool_calls", " FinishReason.TOOL_CALLS "])
def test_sk_finish_reason_naming_tool_calls_is_read(finish: str) -> None:
    assert asked_for_tools(_chat(finish))


@pytest.mark.parametrize("finish", ["FinishReason.STOP", "FinishReason.LENGTH", "", "FinishReason.", "a.b.TOOL_CALLS"])
def test_sk_finish_reason_naming_no_tool_calls_is_not(finish: str) -> None:
    assert not asked_for_tools(_chat(finish))


def test_the_enum_form_is_read_only_under_sks_key() -> None:
    """The plural key holds a list of reasons (the GenAI conventions), whose values are not enum texts."""
    assert not asked_for_tools(_chat("FinishReason.TOOL_CALLS", key="gen_ai.response.finish_reasons"))


def test_a_trace_whose_only_chat_span_asked_for_tools_is_held() -> None:
    """SK's requested_never_ran: a filter denied the call, so no execute_tool span; the chat span's finish reason is all
    that shows the request: one step held (review), not a tool-free trace."""
    spans = [
        _view(ROOT, "billing session", None),
        _view(AGENT, "invoke_agent billing", ROOT, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}),
        _chat("FinishReason.TOOL_CALLS"),
    ]
    plan = plan_trace(TRACE, normalize_trace(spans, TraceFenceConfig()).steps)
    assert [(d.step.tool, d.decision.name, tuple(d.reasons)) for d in plan.steps] == [
        ("chat gpt-4o", "REVIEW", (reasons.UNRECOGNIZED_TOOL_SPAN, reasons.EFFECT_UNKNOWN, reasons.ARGUMENTS_NOT_RECORDED)),
    ]
    assert plan.replay_class.name == "REVIEW"


def test_the_same_trace_whose_chat_span_stopped_is_tool_free() -> None:
    spans = [_view(ROOT, "billing session", None), _chat("FinishReason.STOP")]
    assert normalize_trace(spans, TraceFenceConfig()).steps == []
