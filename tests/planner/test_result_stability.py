"""Result stability (issue 11, seed 000 "Decision boundary"): a read whose results differ between
executions is never re-executed: decision ``skip``, reason ``unstable_result``; its trace is
``injected``, or ``static`` when the result was not recorded. From the operator's tool rules
(``result: unstable``), from the producer's label ``tracefence.result_stable`` (``declare`` inside
a pydantic-ai tool, ``tool_call``), and from rows."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.core.config import ConfigError, ToolRule, TraceFenceConfig, load_config
from otel_tracefence.agent.instrument import declare, tool_call
from otel_tracefence.core.model import Decision, ReplayClass
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.readers.rows import read_rows
from otel_tracefence.planner import plan_trace

REPLAY, SKIP, REVIEW = Decision.REPLAY, Decision.SKIP, Decision.REVIEW


def traced(run, config: TraceFenceConfig | None = None):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        run(provider)
    views = [from_readable(s, i) for i, s in enumerate(exporter.get_finished_spans())]
    plan = plan_spans(views[0].trace_id, views, config or TraceFenceConfig()).plan
    return plan, exporter.get_finished_spans()


def decisions(plan):
    return [(d.step.call_id, d.decision, d.reasons) for d in plan.steps]


def test_tool_call_label_unstable_read_with_result_is_skip_and_class_injected():
    def run(provider):
        with tool_call("clock.now", effect="read", call_id="c1", result_stable=False, record_result=True, tracer_provider=provider) as call:
            call.set_result({"now": "2026-11-13T10:00:00Z"})
        with tool_call("read_file", effect="read", call_id="c2", arguments={"path": "a"}, tracer_provider=provider):
            pass

    plan, spans = traced(run)
    assert [s.attributes.get("tracefence.result_stable") for s in spans if s.name.startswith("execute_tool")] == [False, None]
    assert decisions(plan) == [
        ("c1", SKIP, ("unstable_result", "arguments_not_recorded")),
        ("c2", REPLAY, ("declared_read",)),
    ]
    assert plan.replay_class is ReplayClass.INJECTED


def test_unstable_read_without_its_result_makes_the_trace_static():
    def run(provider):
        with tool_call("clock.now", effect="read", call_id="c1", arguments={}, result_stable=False, tracer_provider=provider):
            pass

    plan, _ = traced(run)
    assert decisions(plan) == [("c1", SKIP, ("unstable_result", "result_not_recorded"))]
    assert plan.replay_class is ReplayClass.STATIC


def test_result_stable_true_and_unlabelled_reads_replay():
    def run(provider):
        with tool_call("a", effect="read", call_id="c1", arguments={}, result_stable=True, tracer_provider=provider):
            pass
        with tool_call("b", effect="read", call_id="c2", arguments={}, tracer_provider=provider):
            pass

    plan, _ = traced(run)
    assert decisions(plan) == [("c1", REPLAY, ("declared_read",)), ("c2", REPLAY, ("declared_read",))]
    assert plan.replay_class is ReplayClass.DYNAMIC


def test_config_rule_result_unstable_applies_to_matching_reads_only():
    config = TraceFenceConfig(tool_rules=[ToolRule(match="pager.*", effect="read", result="unstable"), ToolRule(match="*", effect="read")])

    def run(provider):
        with tool_call("pager.list", call_id="c1", arguments={}, record_result=True, tracer_provider=provider) as call:
            call.set_result({"pages": ["pg_8812"]})
        with tool_call("metrics.get", call_id="c2", arguments={}, tracer_provider=provider):
            pass

    plan, _ = traced(run, config)
    assert decisions(plan) == [("c1", SKIP, ("unstable_result",)), ("c2", REPLAY, ("declared_read",))]
    assert plan.replay_class is ReplayClass.INJECTED


def test_the_producer_label_wins_over_the_rule():
    config = TraceFenceConfig(tool_rules=[ToolRule(match="pager.*", result="unstable")])

    def run(provider):
        with tool_call("pager.list", effect="read", call_id="c1", arguments={}, result_stable=True, tracer_provider=provider):
            pass

    plan, _ = traced(run, config)
    assert decisions(plan) == [("c1", REPLAY, ("declared_read",))]


def test_a_write_declared_unstable_is_still_a_committed_write_whose_result_is_injected():
    def run(provider):
        with tool_call("pager.trigger", effect="write", call_id="c1", arguments={}, result_stable=False, record_result=True, tracer_provider=provider) as call:
            call.set_result({"id": "pg_8812"})

    plan, _ = traced(run)
    assert decisions(plan) == [("c1", SKIP, ("write_committed",))]
    assert plan.replay_class is ReplayClass.INJECTED


def test_a_label_that_is_not_a_boolean_is_malformed_never_guessed():
    def run(provider):
        with tool_call("a", effect="read", call_id="c1", arguments={}, tracer_provider=provider) as call:
            call.span.set_attribute("tracefence.result_stable", "no")

    plan, _ = traced(run)
    # taken as unstable (fail closed): nothing was recorded to inject, which is said too
    assert decisions(plan) == [("c1", REVIEW, ("malformed_result_stable", "result_not_recorded"))]
    assert plan.steps[0].step.malformed[0].message == "result_stable (a string of 2 characters) is not a boolean"


def test_the_label_alone_marks_a_tool_span():
    def run(provider):
        provider.get_tracer("t").start_span("some span", attributes={"tracefence.result_stable": False}).end()

    plan, _ = traced(run)
    assert [(d.decision, d.reasons) for d in plan.steps] == [(REVIEW, ("malformed_tool", "effect_unknown", "arguments_not_recorded"))]


def test_helpers_refuse_a_result_stable_that_is_not_a_boolean():
    with pytest.raises(ValueError, match="result_stable must be True, False or None, not 'no'"):
        declare("read", result_stable="no")
    with pytest.raises(ValueError, match="result_stable must be True, False or None, not 1"):
        tool_call("a", result_stable=1)


def test_config_file_and_environment_take_result(tmp_path, monkeypatch):
    path = tmp_path / "t.yaml"
    path.write_text('tool_rules:\n  - match: "clock.*"\n    effect: read\n    result: unstable\n')
    assert load_config(path).rule_for("clock.now").result == "unstable"
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULES", json.dumps([{"match": "x", "result": "stable"}]))
    assert load_config().rule_for("x").result == "stable"
    monkeypatch.delenv("OTEL_TRACEFENCE_TOOL_RULES")
    path.write_text('tool_rules:\n  - match: "clock.*"\n    result: maybe\n')
    with pytest.raises(ConfigError, match="tool_rules.0.result"):
        load_config(path)


def test_rows_take_result_stable_as_a_boolean_or_the_word():
    text = "call_id,tool,effect,status,arguments,result,result_stable\nc1,clock.now,read,ok,{},now,false\nc2,clock.now,read,ok,{},now,true\nc3,clock.now,read,ok,{},now,nope\n"
    read = read_rows(text, "csv", TraceFenceConfig())
    assert [str(e) for e in read.errors] == ["line 4: result_stable: result_stable (a string of 4 characters) is not a boolean"]
    plan = plan_trace("", read.steps[""])
    assert decisions(plan) == [
        ("c1", SKIP, ("unstable_result", "repeated_later")),
        ("c2", REPLAY, ("declared_read", "repeated_later", "repeated_read")),
        ("c3", REVIEW, ("malformed_result_stable", "repeated_read")),
    ]
    ndjson = json.dumps({"call_id": "c1", "tool": "clock.now", "effect": "read", "status": "ok", "arguments": {}, "result_stable": False})
    assert decisions(plan_trace("", read_rows(ndjson, "ndjson", TraceFenceConfig()).steps[""])) == [
        ("c1", SKIP, ("unstable_result", "result_not_recorded"))
    ]


def test_pydantic_ai_tool_labelled_with_declare():
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(TestModel(call_tools=["new_session"]))
    agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)

    @agent.tool_plain
    def new_session(user: str) -> str:
        declare("read", result_stable=False)
        return "sess_5c2e91"

    agent.run_sync("go")
    views = [from_readable(s, i) for i, s in enumerate(exporter.get_finished_spans())]
    plan = plan_spans(views[0].trace_id, views, TraceFenceConfig()).plan
    assert [(d.step.tool, d.decision, d.reasons) for d in plan.steps] == [("new_session", SKIP, ("unstable_result",))]
    assert plan.replay_class is ReplayClass.INJECTED
