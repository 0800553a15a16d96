"""``tracefence tools``: the audit of declared effects against observed behaviour (issue 24, kind E; docs/DECISIONS.md
424). Each tool whose hint or tool rule says read while a request below one of its calls sent a method that is not
safe is listed below the table; with none, the output is the table alone. The real CLI as a subprocess, on a file,
with a tool rule, and on a real SQLite review database."""

from __future__ import annotations

from pathlib import Path


from otel_tracefence.core.schema import plan_from_json
from otel_tracefence.review import SQLiteReviewStore
from test_cli import plans_of, run
from tests.normalize.test_effect_contradicted_by_dispatch import HINTED, TOOL, _lookup, _request
from tests.normalize.test_idempotency_headers import _file, _root

WHY = ("the step's effect is read by mcp_hint, but span d1d1d1d1d1d1d1d1 ('POST') below it sent POST "
       "https://crm.example/v1/customers/acme/touch: a method that is not safe is evidence the tool writes")  # fmt: skip


def _trace(path: Path) -> Path:
    """crm.lookup hinted read twice (the first POSTs), crm.search by a tool rule (it DELETEs), crm.note a declared write."""
    return _file(path, _root(), _lookup(**HINTED), _request("d1" * 8, TOOL, "POST"), _lookup(span_id="b2" * 8, ms=200, **HINTED),
                 _lookup(span_id="b3" * 8, ms=300, tool="crm.search"), _request("d3" * 8, "b3" * 8, "DELETE", 302),
                 _lookup(span_id="b4" * 8, ms=400, tool="crm.note", **{"tracefence.effect": "write"}))  # fmt: skip


def test_tools_lists_each_tool_whose_hint_or_rule_its_dispatches_contradict(tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.json")
    rules = tmp_path / "rules.yaml"
    rules.write_text('tool_rules:\n  - match: "crm.search"\n    effect: read\n')
    proc = run("tools", str(path), "--config", str(rules))
    assert proc.returncode == 0
    assert proc.stdout == (
        "tool        calls  effect  source    statuses  review  example\n"
        "crm.lookup  2      read    mcp_hint  ok=2      1       call-b1\n"
        "crm.search  1      read    config    ok=1      1       call-b3\n"
        "crm.note    1      write   declared  ok=1      0       call-b4\n"
        "\n"
        "effects the traces contradict (read by a hint or a tool rule; a request below sent a method that is not safe):\n"
        "tool        said_by   calls  contradicted  example\n"
        "crm.lookup  mcp_hint  2      1             call-b1\n"
        "crm.search  config    1      1             call-b3\n"
    )
    assert proc.stderr.splitlines()[0] == f"tracefence tools: {path}: warning: line 1, span {TOOL}: effect: {WHY}"


def test_no_audit_when_nothing_is_contradicted(tmp_path: Path) -> None:
    path = _file(tmp_path / "t.json", _root(), _lookup(**HINTED), _request("d1" * 8, TOOL, "GET"))
    proc = run("tools", str(path))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == "tool        calls  effect  source    statuses  review  example\ncrm.lookup  1      read    mcp_hint  ok=1      0       call-b1\n"


def test_the_audit_from_a_review_database(tmp_path: Path) -> None:
    db = tmp_path / "review.db"
    with SQLiteReviewStore(db) as store:
        for plan in plans_of(run("plan", str(_trace(tmp_path / "t.json")))).values():
            store.upsert(plan_from_json(plan), service_name="crm")
    proc = run("tools", "--db", str(db))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.split("\n\n")[1] == (
        "effects the traces contradict (read by a hint or a tool rule; a request below sent a method that is not safe):\n"
        "tool        said_by   calls  contradicted  example\n"
        "crm.lookup  mcp_hint  2      1             call-b1\n"
    )
