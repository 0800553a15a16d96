"""The fourth fresh-user trial's findings on the guard and the hints (docs/DECISIONS.md 287-289): exact plans
through ``tracefence plan``'s function and the replay guard on OTLP/JSON files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.agent.replay import NonReplayableTraceError, ReplayGuard

TRACE = "dd" * 16


def _span(span_id: str, name: str, parent: str = "", **fields: Any) -> dict:
    return json_span(TRACE, span_id, name, parent, **fields)


def _file(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]})


def _read(span_id: str = "bb" * 8, parent: str = "aa" * 8, **extra: Any) -> dict:
    """A declared stable read that succeeded: ``dynamic`` on its own."""
    return _span(span_id, "execute_tool accounts.get", parent, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "accounts.get",
                 "tracefence.effect": "read", "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "{\"balance\": 3}", **extra})  # fmt: skip


def _plan(text: str):
    (plan,) = plan_text(text, "auto", TraceFenceConfig())[0]
    return plan


def test_a_recorded_class_more_restrictive_than_the_replay_refuses_it(tmp_path: Path) -> None:
    # The service held this trace as review for a span it refused (not in its output file): re-planned alone, the
    # file's spans are a stable read, `dynamic`. The guard took the re-plan and allowed a dynamic replay.
    path = tmp_path / "out.otlp.json"
    path.write_text(_file(_span("aa" * 8, "invoke_agent a", **{"tracefence.replay.class": "review"}), _read(**{"tracefence.replay.class": "review"})))
    assert _plan(path.read_text()).replay_class.value == "review"  # the plan takes the recorded class (DECISIONS 355)
    for mode in ("dynamic", "injected"):
        with pytest.raises(NonReplayableTraceError) as refused:
            ReplayGuard.from_file(path, mode=mode)
        assert str(refused.value).startswith(f"{mode} replay refused: trace {TRACE} is planned review, more restrictive than the {mode} "
                                             f"replay mode takes, though its steps in this file allow it: its spans record that class")  # fmt: skip
    path.write_text(_file(_span("aa" * 8, "invoke_agent a", **{"tracefence.replay.class": "dynamic"}), _read(**{"tracefence.replay.class": "dynamic"})))
    assert ReplayGuard.from_file(path, mode="dynamic").trace_id == TRACE  # a class that allows it: the re-plan decides


@pytest.mark.parametrize("flag", [("tracefence.trace.partial", "true"), ("tracefence.trace.partial", 1), ("tracefence.trace.late", "yes"),
                                  ("tracefence.trace.reasons", "not_planned_at_shutdown")])  # fmt: skip
def test_a_flag_of_an_incomplete_trace_in_any_value_but_false_makes_it_partial(tmp_path: Path, flag: tuple[str, Any]) -> None:
    # Only a boolean true partial flag counted: "true" (after a Zipkin round trip) or 1 let the guard allow the trace.
    key, value = flag
    path = tmp_path / "out.otlp.json"
    path.write_text(_file(_span("aa" * 8, "invoke_agent a"), _read(**{key: value})))
    plan = _plan(path.read_text())
    assert (plan.replay_class.value, plan.partial) == ("dynamic", True)
    with pytest.raises(NonReplayableTraceError, match=f"the plan of trace {TRACE} is partial"):
        ReplayGuard.from_file(path, mode="dynamic")
    path.write_text(_file(_span("aa" * 8, "invoke_agent a"), _read(**{key: False})))
    assert _plan(path.read_text()).partial is False


def test_a_span_naming_itself_as_its_parent_makes_its_trace_partial() -> None:
    assert _plan(_file(_read(span_id="bb" * 8, parent="bb" * 8))).partial is True


@pytest.mark.parametrize("value", ["true", "True", 1])
def test_an_mcp_hint_that_is_not_a_boolean_is_malformed(value: Any) -> None:
    # destructiveHint "true" beside readOnlyHint true was ignored (only `is True` counted): a hinted read, dynamic.
    span = _span("bb" * 8, "execute_tool rm", "", **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "rm",
                 "mcp.tool.annotations.readOnlyHint": True, "mcp.tool.annotations.destructiveHint": value})  # fmt: skip
    plan = _plan(_file(span))
    (decision,) = plan.steps
    assert (plan.replay_class.value, decision.step.effect.value, decision.reasons[:2]) == ("review", "unknown", ("malformed_effect", "effect_unknown"))
    what = {"true": "a string of 4 characters", "True": "a string of 4 characters", 1: "an integer"}[value]  # never the value (issue 30)
    assert decision.step.malformed[0].message == f"effect hint mcp.tool.annotations.destructiveHint ({what}) is not a boolean: not read as either (docs/DECISIONS.md 287)"


def test_vercel_model_spans_offered_tools_are_model_spans() -> None:
    # ai.generateText.doGenerate spans carry ai.prompt.tools and ai.response.toolCalls: they were held as
    # unrecognized_tool_span, so every Vercel trace whose model was offered tools went to review.
    root = _span("aa" * 8, "ai.generateText", **{"ai.operationId": "ai.generateText", "ai.model.id": "gpt-4o"})
    model = _span("a1" * 8, "ai.generateText.doGenerate", "aa" * 8, **{"ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o",
                  "ai.prompt.tools": "[{\"type\": \"function\", \"name\": \"accounts.get\"}]",
                  "ai.response.toolCalls": "[{\"toolCallId\": \"call_1\", \"toolName\": \"accounts.get\", \"args\": \"{}\"}]"})  # fmt: skip
    tool = _span("bb" * 8, "ai.toolCall", "aa" * 8, **{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "accounts.get", "ai.toolCall.id": "call_1",
                 "ai.toolCall.args": "{}", "ai.toolCall.result": "{\"balance\": 3}", "tracefence.effect": "read"})  # fmt: skip
    plan = _plan(_file(root, model, tool))
    assert (plan.replay_class.value, [(d.step.call_id, d.decision.value, d.reasons) for d in plan.steps]) == ("dynamic", [("call_1", "replay", ("declared_read",))])
