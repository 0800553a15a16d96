"""``tracefence tools --format json`` (issue 28, part 5): one JSON object per tool and line, in the table's order,
with the table's and the audit's columns as fields."""

from __future__ import annotations

import json

from cli_helpers import run
from test_cli_tools import ROWS
from test_cli_operator import ndjson


def test_one_object_per_tool_in_table_order(tmp_path):
    proc = run("tools", str(ndjson(tmp_path, ROWS)), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [t["tool"] for t in got] == ["invoice.create", "ticket.update", "files.*", "crm.lookup"]
    assert got[0] == {
        "tool": "invoice.create", "calls": 3, "effects": {"unknown": 3}, "sources": {"none": 2, "declared": 1},
        "statuses": {"ok": 2, "timeout": 1}, "review": 3, "example": "c2", "unlabelled": 2,
        "contradicted": {}, "contradictedExample": "",
    }
    assert got[3] == {
        "tool": "crm.lookup", "calls": 1, "effects": {"read": 1}, "sources": {"declared": 1}, "statuses": {"ok": 1},
        "review": 0, "example": "c1", "unlabelled": 0, "contradicted": {}, "contradictedExample": "",
    }


def test_no_tool_step_prints_nothing(tmp_path):
    empty = tmp_path / "empty.otlp.json"
    empty.write_text('{"resourceSpans": []}')
    proc = run("tools", str(empty), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""


def test_rules_skeleton_and_json_are_refused_together(tmp_path):
    proc = run("tools", str(ndjson(tmp_path, ROWS)), "--format", "json", "--rules-skeleton")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "tracefence tools: --rules-skeleton prints YAML: give it without --format json\n"
