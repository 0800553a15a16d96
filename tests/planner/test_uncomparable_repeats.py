"""Two writes of one tool whose arguments could not be compared (over ``limits.max_argument_bytes``, nested past
``limits.max_argument_depth``, or not I-JSON: no canonical hash) may be one call made twice: each is held
``repeat_arguments_uncompared``, naming the others (docs/DECISIONS.md 501). Before, with no hash there was no repeat
group: both passed ``skip write_committed`` (a break-it trial's find)."""

from __future__ import annotations

import json

from otlp_json_helpers import json_span
from otel_tracefence.core.config import Limits, TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CONFIG = TraceFenceConfig(limits=Limits(max_argument_bytes=200, max_argument_depth=8))
BIG = json.dumps({"amount": 1250, "memo": "x" * 400})
DEEP = '{"amount": 1250, "nest": ' + "[" * 20 + "]" * 20 + "}"
NOT_I_JSON = '{"amount": 1e400}'


def _rows(*calls: tuple[str, str, str]) -> list[tuple]:
    rows = [{"trace_id": TRACE, "call_id": call_id, "tool": tool, "effect": "write", "status": "ok", "arguments": arguments, "result": {"id": call_id}}
            for call_id, tool, arguments in calls]  # fmt: skip
    (plan,), errors = plan_text(json.dumps(rows), "json", CONFIG)
    assert errors == []
    return [plan.replay_class.value] + [(d.step.call_id, d.decision.value, d.reasons, tuple(d.related_call_ids)) for d in plan.steps]


def test_two_writes_of_one_tool_with_arguments_too_large_are_held_both():
    assert _rows(("c1", "invoice.create", BIG), ("c2", "invoice.create", BIG)) == [
        "review",
        ("c1", "review", ("repeat_arguments_uncompared", "arguments_too_large"), ("c2",)),
        ("c2", "review", ("repeat_arguments_uncompared", "arguments_too_large"), ("c1",)),
    ]


def test_too_deep_and_not_i_json_are_uncompared_too():
    assert _rows(("c1", "invoice.create", DEEP), ("c2", "invoice.create", NOT_I_JSON)) == [
        "review",
        ("c1", "review", ("repeat_arguments_uncompared", "arguments_too_deep"), ("c2",)),
        ("c2", "review", ("repeat_arguments_uncompared", "arguments_not_i_json"), ("c1",)),
    ]


def test_one_such_write_alone_or_of_another_tool_commits():
    assert _rows(("c1", "invoice.create", BIG), ("c2", "invoice.void", BIG), ("c3", "invoice.create", '{"amount": 1}')) == [
        "injected",
        ("c1", "skip", ("write_committed", "arguments_too_large"), ()),
        ("c2", "skip", ("write_committed", "arguments_too_large"), ()),
        ("c3", "skip", ("write_committed",), ()),
    ]


def test_the_span_path_holds_them_the_same_way():
    root = json_span(TRACE, "a3ce929d0e0e4736", "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    spans = [root]
    for index, call_id in enumerate(("c1", "c2")):
        spans.append(json_span(TRACE, f"00f067aa0ba902b{index}", "execute_tool invoice.create", parent="a3ce929d0e0e4736", **{
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": call_id,
            "tracefence.effect": "write", "gen_ai.tool.call.arguments": BIG, "gen_ai.tool.call.result": '{"id": "in_1"}',
        }))  # fmt: skip
    (plan,), errors = plan_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}), "otlp-json", CONFIG)
    assert errors == []
    assert plan.replay_class.value == "review"
    assert [(d.step.call_id, d.decision.value, d.reasons, tuple(d.related_call_ids)) for d in plan.steps] == [
        ("c1", "review", ("repeat_arguments_uncompared", "arguments_too_large"), ("c2",)),
        ("c2", "review", ("repeat_arguments_uncompared", "arguments_too_large"), ("c1",)),
    ]


def test_reads_with_uncompared_arguments_still_replay():
    rows = [{"trace_id": TRACE, "call_id": c, "tool": "invoice.get", "effect": "read", "arguments": BIG} for c in ("c1", "c2")]
    (plan,), _ = plan_text(json.dumps(rows), "json", CONFIG)
    assert [(d.decision.value, d.reasons) for d in plan.steps] == [("replay", ("declared_read", "arguments_too_large"))] * 2
