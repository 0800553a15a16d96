"""A tool span named after its tool by a name-is-tool convention, with no tool-name attribute, names the tool less a
trailing call-method suffix (``conventions.NAME_IS_TOOL_CALL_SUFFIXES``, docs/DECISIONS.md 960): OpenInference's DSPy
instrumentation names a tool's span ``<tool>.__call__`` / ``<tool>.acall``, so the operator's rules and the model's
requests match the tool, not the method."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.normalize.span_kinds import tool_name
from otel_tracefence.pipeline.documents import plan_text

TRACE = "6c" * 16
ROOT = "d0" * 8
RULES = TraceFenceConfig(tool_rules=[ToolRule(match="finish", effect="read"), ToolRule(match="charge_card", effect="write")])


def plan_of(*spans: dict, config: TraceFenceConfig = RULES) -> tuple[str | None, list]:
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]})
    (trace,), _ = plan_text(document, "otlp-json", config)
    klass = trace.replay_class.value if trace.replay_class is not None else None
    return klass, sorted((d.step.tool, d.decision.value, d.reasons) for d in trace.steps)


def tool_span(span_id: str, name: str, **attributes) -> dict:
    return json_span(TRACE, span_id, name, ROOT, **{"openinference.span.kind": "TOOL", "input.value": '{"kwargs": {}}', "input.mime_type": "application/json",
                                                   "output.value": '"Completed."', "output.mime_type": "application/json", **attributes})


@pytest.mark.parametrize(("name", "attributes", "expected"), [
    ("lookup_customer.__call__", {"openinference.span.kind": "TOOL"}, "lookup_customer"),
    ("charge_card.acall", {"openinference.span.kind": "TOOL"}, "charge_card"),
    ("charge_card.acall", {"mlflow.spanType": "TOOL"}, "charge_card"),
    (".__call__", {"openinference.span.kind": "TOOL"}, ".__call__"),  # nothing would be left: the whole name
    ("charge_card.acall.__call__", {"openinference.span.kind": "TOOL"}, "charge_card.acall"),  # one suffix only
    ("charge_card.call", {"openinference.span.kind": "TOOL"}, "charge_card.call"),  # no suffix of the table
    ("charge_card.__call__", {"openinference.span.kind": "TOOL", "tool.name": "pay"}, "pay"),  # an attribute first
    ("execute_tool charge_card.acall", {"gen_ai.operation.name": "execute_tool"}, "charge_card.acall"),  # not name-is-tool
])
def test_the_tool_of_a_name_is_tool_span_is_its_name_less_a_call_method_suffix(name, attributes, expected):
    assert tool_name(attributes, name) == expected


def test_dspy_tool_spans_match_the_operators_rules_by_the_tools_name():
    root = json_span(TRACE, ROOT, "ReAct.forward", **{"openinference.span.kind": "CHAIN"})
    charge = tool_span("d1" * 8, "charge_card.acall")
    charge["status"] = {"code": 2, "message": "RuntimeError: Failed to call a MCP tool: card declined"}
    finish = tool_span("d2" * 8, "finish.__call__")
    assert plan_of(root, charge, finish) == ("review", [
        ("charge_card", "review", ("write_error", "arguments_unwrapped")),
        ("finish", "replay", ("declared_read", "arguments_unwrapped")),
    ])


def test_a_span_named_tool_dot_call_plans_as_one_that_names_its_tool():
    """``finish.__call__`` and a span whose ``tool.name`` is ``finish``: one plan (before, the rule matched neither
    the name ``finish.__call__`` nor its step, which was ``effect_unknown``)."""
    root = json_span(TRACE, ROOT, "ReAct.forward", **{"openinference.span.kind": "CHAIN"})
    assert plan_of(root, tool_span("d2" * 8, "finish.__call__")) == plan_of(root, tool_span("d2" * 8, "finish", **{"tool.name": "finish"})) == (
        "dynamic", [("finish", "replay", ("declared_read", "arguments_unwrapped"))]
    )
