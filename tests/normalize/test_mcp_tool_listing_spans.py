"""The OpenAI Agents SDK's listing of an MCP server's tools (``mcp_tools`` span data) is no call: OpenInference's
bridge for the JS SDK names its span ``mcp_tools`` and marks it TOOL with the listed names as output and no tool
name (docs/DECISIONS.md 571). Such a span is neither a step nor unread tool activity; a real tool of that name
(its span carries ``tool.name``) still is a step."""

from __future__ import annotations

import json

from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.span_kinds import is_tool_listing, is_tool_span
from otel_tracefence.pipeline.documents import plan_text

TRACE = "6c" * 16
ROOT = "c0" * 8
LISTING = {"openinference.span.kind": "TOOL", "llm.system": "openai", "output.value": '["charge_card"]', "output.mime_type": "application/json"}


def plan(*spans: dict) -> tuple[str, list]:
    root = json_span(TRACE, ROOT, "Agent workflow", **{"openinference.span.kind": "AGENT"})
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [root, *spans]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    return (trace.replay_class.value if trace.replay_class else None), [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


def lookup(span_id: str) -> dict:
    return json_span(TRACE, span_id, "lookup_customer", ROOT, **{"openinference.span.kind": "TOOL", "tool.name": "lookup_customer",
                     "input.value": '{"customer":"a"}', "output.value": "customer a: active", "tracefence.effect": "read"})  # fmt: skip


def test_a_listing_span_is_no_step():
    assert plan(json_span(TRACE, "c1" * 8, "mcp_tools", ROOT, **LISTING), lookup("c2" * 8)) == (
        "dynamic", [("lookup_customer", "replay", ("declared_read",))]
    )


def test_the_rule_needs_the_exact_name_and_no_tool_name():
    assert is_tool_listing(LISTING, "mcp_tools")
    assert not is_tool_span(LISTING, "mcp_tools")
    assert not is_tool_listing({**LISTING, "tool.name": "mcp_tools"}, "mcp_tools")
    assert is_tool_span({**LISTING, "tool.name": "mcp_tools"}, "mcp_tools")
    assert not is_tool_listing(LISTING, "mcp_tools_sync")


def test_a_tool_named_mcp_tools_is_still_a_step():
    span = json_span(TRACE, "c3" * 8, "mcp_tools", ROOT, **{**LISTING, "tool.name": "mcp_tools", "input.value": "{}"})
    assert plan(span) == ("review", [("mcp_tools", "review", ("effect_unknown",))])
