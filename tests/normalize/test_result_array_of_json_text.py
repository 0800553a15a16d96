"""A result recorded as an OTLP ``arrayValue`` of JSON strings (a producer writing each content part as its JSON text:
``["{\\"error\\": ...}"]``, or MCP's content list ``["{\\"type\\": \\"text\\", ...}"]``) is read item by item as the
JSON text it is (docs/DECISIONS.md 502): an item that says error makes an ``ok`` write ``error``, one cut off holds it.
Before, the items were only looked at as plain text: an error object inside passed the write as committed."""

from __future__ import annotations

import json

import pytest

from cli_helpers import run
from otlp_json_helpers import json_span
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _trace(result: list) -> str:
    tool = json_span(TRACE, "00f067aa0ba902b7", "execute_tool invoice.create", parent="a3ce929d0e0e4736", **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "c1",
        "tracefence.effect": "write", "gen_ai.tool.call.arguments": '{"amount": 1250}', "gen_ai.tool.call.result": result,
    })  # fmt: skip
    tool["status"] = {"code": 1}
    root = json_span(TRACE, "a3ce929d0e0e4736", "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, tool]}]}]})


def _plan(result: list) -> tuple:
    (plan,), errors = plan_text(_trace(result), "otlp-json", TraceFenceConfig())
    (step,) = plan.steps
    return plan.replay_class.value, step.decision.value, step.reasons, step.step.status.value, [e.field for e in errors]


CASES = {
    "error_object": ([json.dumps({"error": {"message": "card declined"}})], ("review", "review", ("write_error", "error_in_result"), "error", [])),
    "mcp_content_item_is_error": (
        [json.dumps({"content": [{"type": "text", "text": "card declined"}], "isError": True})],
        ("review", "review", ("write_error", "error_in_result"), "error", []),
    ),
    "mcp_error_part": ([json.dumps({"type": "text", "text": "ok so far"}), json.dumps({"type": "error", "text": "card declined"})],
                       ("review", "review", ("write_error", "error_in_result"), "error", [])),  # fmt: skip
    "template_in_a_text_part": (
        [json.dumps({"type": "text", "text": "An error occurred while running the tool. Please try again. Error: 502"})],
        ("review", "review", ("write_error", "error_template_in_result"), "error", []),
    ),
    "cut_off_item": (['{"id": "in_1250", "amou'], ("review", "review", ("result_truncated",), "ok", ["result"])),
    "success_parts": ([json.dumps({"type": "text", "text": "invoice in_1250 created"}), "plain words"], ("injected", "skip", ("write_committed",), "ok", [])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_array_of_json_strings_is_read_item_by_item(name):
    result, expected = CASES[name]
    assert _plan(result) == expected


def test_the_cli_holds_such_a_write(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(_trace([json.dumps({"error": "card declined"})]))
    proc = run("plan", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (plan,) = [json.loads(line) for line in proc.stdout.splitlines()]
    (step,) = plan["steps"]
    assert (plan["replayClass"], step["decision"], step["reasons"]) == ("review", "review", ["write_error", "error_in_result"])
