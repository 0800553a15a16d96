"""An agent span whose output is a framework's text for a run paused with tool calls waiting
(``framework_texts.PAUSED_RUN_TEXTS``), in a trace where no tool step starts after it, holds its trace
(``requested_call_unread``): the calls waiting are in no span (docs/DECISIONS.md 958). The shape is Agno's under
OpenLLMetry, which records no model span."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "9e" * 16
AGENT = "b0" * 8
PAUSED = "I have tools to execute, but I need confirmation."


def plan_of(output: str, tool_after: bool = False) -> tuple:
    agent = json_span(TRACE, AGENT, "billing.agent", **{"traceloop.span.kind": "agent", "gen_ai.agent.name": "billing",
                                                        "traceloop.entity.output": output})
    spans = [agent]
    if tool_after:  # the resumed run's write, after the pause (json_span's times: the agent's end is before it)
        tool = json_span(TRACE, "b1" * 8, "create_invoice.tool", **{"traceloop.span.kind": "tool", "traceloop.entity.name": "create_invoice",
                                                                     "traceloop.entity.output": '"inv_1"', "tracefence.effect": "write"})
        tool["startTimeUnixNano"], tool["endTimeUnixNano"] = str(int(agent["endTimeUnixNano"]) + 10), str(int(agent["endTimeUnixNano"]) + 20)
        spans.append(tool)
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    cls = trace.replay_class.value if trace.replay_class is not None else None
    return cls, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


@pytest.mark.parametrize("text", [PAUSED, "I have tools to execute, but I need confirmation or user input.", "I have tools to execute, but it needs external execution."])
def test_a_run_paused_with_calls_waiting_and_nothing_after_holds_its_trace(text):
    assert plan_of(text) == ("review", [("billing.agent", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))])


def test_a_run_paused_then_resumed_plans_the_resumed_call():
    assert plan_of(PAUSED, tool_after=True) == ("injected", [("create_invoice", "skip", ("write_committed", "arguments_not_recorded"))])


def test_an_agent_output_that_is_no_pause_holds_nothing():
    assert plan_of("The invoice is sent.") == (None, [])
