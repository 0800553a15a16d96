"""A row's recorded result is read by the rule a span's is (docs/DECISIONS.md 500): a write row that says ``ok`` but
whose result is an error object, a framework's own error or timeout text (``framework_texts.FRAMEWORK_ERROR_TEMPLATES``)
or JSON text cut off before its end is no committed write. Before, rows never looked at the result: each of these
passed as ``skip``/``write_committed`` while the same result on an OTLP span held the write (a break-it trial's find)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from cli_helpers import run
from otlp_json_helpers import json_span
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CUT_OFF = '{"id": "in_1250", "amount'
ERROR_OBJECT_TEXT = '{"error": {"message": "card declined"}}'
TEMPLATE = "An error occurred while running the tool. Please try again. Error: upstream 502"
TIMEOUT_TEMPLATE = "Tool 'invoice_create' timed out after 30 seconds."

# (result as JSON rows hold it, the plan: class, the step's decision and reasons, the fields held malformed)
CASES = {
    "error_object": ({"error": {"message": "card declined"}}, ("review", "review", ("write_error", "error_in_result"), [])),
    "error_object_text": (ERROR_OBJECT_TEXT, ("review", "review", ("write_error", "error_in_result"), [])),
    "framework_error_template": (TEMPLATE, ("review", "review", ("write_error", "error_template_in_result"), [])),
    "framework_timeout_template": (TIMEOUT_TEMPLATE, ("review", "review", ("write_error", "error_template_in_result"), [])),
    "cut_off": (CUT_OFF, ("review", "review", ("result_truncated",), ["result"])),
}


def _rows_plan(text: str, fmt: str) -> tuple:
    (plan,), errors = plan_text(text, fmt, TraceFenceConfig())
    (step,) = plan.steps
    return plan.replay_class.value, step.decision.value, step.reasons, [e.field for e in errors]


def _row(result) -> dict:
    return {"trace_id": TRACE, "call_id": "c1", "tool": "invoice_create", "effect": "write", "status": "ok", "arguments": {"amount": 1250}, "result": result}


def _csv(result: str) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["trace_id", "call_id", "tool", "effect", "status", "arguments", "result"])
    writer.writeheader()
    row = _row(result)
    row["arguments"] = json.dumps(row["arguments"])
    writer.writerow(row)
    return out.getvalue()


def _span_plan(result_text: str) -> tuple:
    tool = json_span(TRACE, "00f067aa0ba902b7", "execute_tool invoice_create", parent="a3ce929d0e0e4736", **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice_create", "gen_ai.tool.call.id": "c1",
        "tracefence.effect": "write", "gen_ai.tool.call.arguments": '{"amount": 1250}', "gen_ai.tool.call.result": result_text,
    })  # fmt: skip
    tool["status"] = {"code": 1}
    root = json_span(TRACE, "a3ce929d0e0e4736", "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    (plan,), errors = plan_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, tool]}]}]}), "otlp-json", TraceFenceConfig())
    (step,) = plan.steps
    return plan.replay_class.value, step.decision.value, step.reasons, [e.field for e in errors]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_json_row_reads_its_result_as_a_span_does(name):
    result, expected = CASES[name]
    assert _rows_plan(json.dumps([_row(result)]), "json") == expected
    assert _rows_plan(json.dumps(_row(result)) + "\n", "ndjson") == expected


@pytest.mark.parametrize("name", sorted(name for name in CASES if isinstance(CASES[name][0], str)))
def test_a_csv_row_and_a_span_with_the_same_result_agree(name):
    result, expected = CASES[name]
    assert _rows_plan(_csv(result), "csv") == expected
    span_class, decision, reasons, _ = _span_plan(result)
    assert (span_class, decision, reasons) == expected[:3]


def test_the_cli_holds_a_csv_write_row_whose_result_is_a_framework_error(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(_csv(TEMPLATE))
    proc = run("plan", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (plan,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert plan["replayClass"] == "review"
    (step,) = plan["steps"]
    assert (step["decision"], step["reasons"], step["step"]["status"]) == ("review", ["write_error", "error_template_in_result"], "error")


def test_the_cli_rejects_a_csv_write_row_whose_result_is_cut_off(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(_csv(CUT_OFF))
    proc = run("plan", str(path))
    assert proc.returncode == 2
    assert "result" in proc.stderr and "cut off" in proc.stderr


def test_a_row_whose_result_reads_as_success_still_commits():
    assert _rows_plan(json.dumps([_row({"id": "in_1250", "status": "open"})]), "json") == ("injected", "skip", ("write_committed",), [])


def test_a_row_with_no_declared_status_is_not_made_ok_by_its_result():
    row = _row({"id": "in_1250"})
    del row["status"]
    assert _rows_plan(json.dumps([row]), "json") == ("review", "review", ("write_status_unknown",), [])
