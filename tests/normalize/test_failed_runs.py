"""A write recorded ok with no result inside an agent run that ended in error is not shown committed
(``write_outcome_unrecorded``, naming the run's span; docs/DECISIONS.md 957): the run's failure may have cancelled or
abandoned it. The shape is the Microsoft Agent Framework's, whose middleware abort cancels a sibling call."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "8d" * 16
AGENT = "a0" * 8


def plan_of(agent_code: int, effect: str = "write", result: str | None = None) -> tuple:
    agent = json_span(TRACE, AGENT, "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    agent["status"] = {"code": agent_code}
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_payment", "gen_ai.tool.call.id": "call_p1",
                  "tracefence.effect": effect}
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result
    tool = json_span(TRACE, "a1" * 8, "execute_tool send_payment", AGENT, **attributes)
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [agent, tool]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    return trace.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps], [m.message for m in trace.steps[0].step.malformed]


def test_a_write_with_no_result_in_a_run_that_failed_is_held_naming_the_run():
    cls, steps, messages = plan_of(2)
    assert (cls, steps) == ("review", [("send_payment", "review", ("write_outcome_unrecorded", "result_not_recorded", "arguments_not_recorded"))])
    assert messages == [
        f"the run it belongs to, span {AGENT} ('invoke_agent billing'), ended in error and it recorded no result: it may have been "
        "cancelled or abandoned, so whether it committed cannot be read"
    ]


@pytest.mark.parametrize("code", [0, 1], ids=["unset", "ok"])
def test_a_write_with_no_result_in_a_run_that_did_not_fail_commits_as_before(code):
    assert plan_of(code)[:2] == ("static", [("send_payment", "skip", ("write_committed", "result_not_recorded", "arguments_not_recorded"))])


def test_a_write_whose_result_reads_as_success_commits_whatever_its_run_did():
    assert plan_of(2, result='{"payment": "p_1"}')[:2] == ("injected", [("send_payment", "skip", ("write_committed", "arguments_not_recorded"))])


def test_a_read_in_a_run_that_failed_replays():
    assert plan_of(2, effect="read")[:2] == ("dynamic", [("send_payment", "replay", ("declared_read", "arguments_not_recorded"))])
