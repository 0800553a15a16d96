"""A tool span whose end is before its start records no outcome (docs/DECISIONS.md 505): a write (or a call of unknown
effect) is held ``malformed_end_time`` beside ``write_status_unknown``, its message naming both times; a read still
replays, its status unknown (a read is safe to run again whatever its outcome). A declared ``ok`` on such a span is a
``status_evidence_conflict`` naming the times. Before, the write got ``write_status_unknown`` and nothing said why."""

from __future__ import annotations

import json

from cli_helpers import run
from otlp_json_helpers import json_span
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.step import span_to_step
from otel_tracefence.pipeline.documents import plan_text

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
START, END = 1700000000100000000, 1700000000000000000
MESSAGE = f"the span ends at {END} before it starts at {START} (Unix nanoseconds): how the call ended is not recorded"


def _trace(effect: str, **extra) -> str:
    tool = json_span(TRACE, "00f067aa0ba902b7", "execute_tool invoice.create", parent="a3ce929d0e0e4736", **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "c1",
        "tracefence.effect": effect, "gen_ai.tool.call.arguments": '{"amount": 1250}', "gen_ai.tool.call.result": '{"id": "in_1"}', **extra,
    })  # fmt: skip
    tool["startTimeUnixNano"], tool["endTimeUnixNano"] = str(START), str(END)
    root = json_span(TRACE, "a3ce929d0e0e4736", "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    root["startTimeUnixNano"], root["endTimeUnixNano"] = "1699999999000000000", "1700000001000000000"
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, tool]}]}]})


def test_a_write_span_ending_before_it_starts_is_held_naming_the_times():
    (plan,), errors = plan_text(_trace("write"), "otlp-json", TraceFenceConfig())
    (step,) = plan.steps
    assert (plan.replay_class.value, step.decision.value, step.reasons, step.step.status.value) == (
        "review", "review", ("malformed_end_time", "write_status_unknown"), "unknown")
    assert [(f.field, f.message) for f in step.step.malformed] == [("end_time", MESSAGE)]
    assert [(e.field, e.message) for e in errors] == [("end_time", MESSAGE)]


def test_a_call_of_unknown_effect_is_told_so_too_and_a_read_still_replays():
    (plan,), _ = plan_text(_trace("unknown"), "otlp-json", TraceFenceConfig())
    assert [(d.decision.value, d.reasons) for d in plan.steps] == [("review", ("malformed_end_time", "effect_unknown"))]
    (plan,), errors = plan_text(_trace("read"), "otlp-json", TraceFenceConfig())
    assert (plan.replay_class.value, [(d.decision.value, d.reasons, d.step.status.value) for d in plan.steps], errors) == (
        "dynamic", [("replay", ("declared_read",), "unknown")], [])


def test_a_declared_ok_on_such_a_span_names_the_times_in_its_conflict():
    (plan,), _ = plan_text(_trace("write", **{"tracefence.status": "ok"}), "otlp-json", TraceFenceConfig())
    (step,) = plan.steps
    assert step.reasons == ("status_evidence_conflict", "write_status_unknown")
    assert [f.message for f in step.step.malformed] == [f"tracefence.status 'ok' is declared, but the span records {MESSAGE}"]


def test_the_cli_says_why(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(_trace("write"))
    proc = run("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    (plan,) = [json.loads(line) for line in proc.stdout.splitlines()]
    (step,) = plan["steps"]
    assert (plan["replayClass"], step["reasons"]) == ("review", ["malformed_end_time", "write_status_unknown"])
    assert step["step"]["malformed"] == [{"field": "end_time", "message": MESSAGE}]
    assert MESSAGE in proc.stderr


def test_a_span_with_no_end_is_still_status_unknown_without_a_malformed_status():
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "c1", "tracefence.effect": "write"}
    step = span_to_step(SpanView(TRACE, "00f067aa0ba902b7", "execute_tool invoice.create", attributes, start_time_unix_nano=START), TraceFenceConfig())
    assert (step.status.value, step.malformed) == ("unknown", ())
