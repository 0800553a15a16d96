"""``tracefence tools``: the tool surface as the traces show it, and the tool_rules skeleton (issue 13).
The real CLI as a subprocess, on files and on a real SQLite review database."""

from __future__ import annotations

from pathlib import Path


from otel_tracefence.core.schema import plan_from_json
from otel_tracefence.core.config import load_config
from otel_tracefence.review import SQLiteReviewStore
from test_cli import plans_of, run
from test_cli_operator import ndjson

ROWS = [
    {"trace_id": "t1", "call_id": "c1", "tool": "crm.lookup", "effect": "read", "status": "ok"},
    {"trace_id": "t1", "call_id": "c2", "tool": "invoice.create", "status": "ok"},
    {"trace_id": "t2", "call_id": "c3", "tool": "invoice.create", "status": "timeout"},
    {"trace_id": "t2", "call_id": "c4", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotency_key": "k", "arguments": {"a": 1}},
    {"trace_id": "t2", "call_id": "c5", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotency_key": "k", "arguments": {"a": 2}},
    {"trace_id": "t3", "call_id": "c6", "tool": "files.*", "status": "error"},
    {"trace_id": "t3", "call_id": "c7", "tool": "invoice.create", "effect": "bogus", "status": "ok"},
]

TABLE = """\
tool            calls  effect   source             statuses        review  example
invoice.create  3      unknown  none=2,declared=1  ok=2,timeout=1  3       c2
ticket.update   2      write    declared           ok=2            2       c4
files.*         1      unknown  none               error=1         1       c6
crm.lookup      1      read     declared           ok=1            0       c1
"""

SKELETON = """\
# tool_rules for otel-tracefence, written by `tracefence tools --rules-skeleton`: one rule
# per tool these traces show with no known effect (its calls are held as effect_unknown).
# For each rule, replace FILL_IN with `read` (safe to run again) or `write` (changes something
# outside), or delete the rule if you are not sure: a tool without a rule stays in review.
# The configuration does not load while an effect is FILL_IN. Rules are tried in order and
# the first match wins: put these before broader globs of your own.
tool_rules:
  # invoice.create: 3 call(s) (ok=2,timeout=1), 3 held for review, e.g. c2
  - match: "invoice.create"
    effect: FILL_IN  # read or write
    # idempotency_key_argument: idempotency_key  # a write's argument holding its idempotency key, if any
  # files.*: 1 call(s) (error=1), 1 held for review, e.g. c6
  - match: "files.[*]"
    effect: FILL_IN  # read or write
    # idempotency_key_argument: idempotency_key  # a write's argument holding its idempotency key, if any
"""


def test_one_row_per_tool_most_held_first(tmp_path: Path):
    path = ndjson(tmp_path, ROWS)
    proc = run("tools", str(path))
    assert proc.returncode == 0
    assert proc.stdout == TABLE
    assert proc.stderr == f"tracefence tools: {path}: warning: line 7: effect: effect (a string of 5 characters) is not one of read, write, unknown\n"


def test_several_files_of_several_formats_add_up(tmp_path: Path):
    first = ndjson(tmp_path, ROWS[:3])
    second = tmp_path / "more.csv"
    second.write_text("trace_id,call_id,tool,status\nt9,c9,invoice.create,ok\n", encoding="utf-8")
    proc = run("tools", str(first), str(second))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == [
        "tool            calls  effect   source    statuses        review  example",
        "invoice.create  3      unknown  none      ok=2,timeout=1  3       c2",
        "crm.lookup      1      read     declared  ok=1            0       c1",
    ]


def test_rules_skeleton_then_filled_in_labels_the_tools(tmp_path: Path):
    path = ndjson(tmp_path, ROWS)
    proc = run("tools", str(path), "--rules-skeleton")
    assert (proc.returncode, proc.stdout) == (0, SKELETON)
    rules = tmp_path / "tracefence.yaml"
    rules.write_text(proc.stdout, encoding="utf-8")
    refused = run("plan", str(path), "--config", str(rules))
    assert refused.returncode == 2
    assert "tool_rules.0.effect: Input should be 'read' or 'write'" in refused.stderr
    rules.write_text(proc.stdout.replace("effect: FILL_IN", "effect: write", 1).replace("effect: FILL_IN", "effect: read", 1), encoding="utf-8")
    assert [(r.match, r.effect) for r in load_config(rules).tool_rules] == [("invoice.create", "write"), ("files.[*]", "read")]
    after = run("tools", str(path), "--config", str(rules))
    assert after.stdout == (
        "tool            calls  effect             source               statuses        review  example\n"
        "invoice.create  3      write=2,unknown=1  config=2,declared=1  ok=2,timeout=1  2       c3\n"
        "ticket.update   2      write              declared             ok=2            2       c4\n"
        "crm.lookup      1      read               declared             ok=1            0       c1\n"
        "files.*         1      read               config               error=1         0       c6\n"
    )
    assert run("tools", str(path), "--config", str(rules), "--rules-skeleton").stdout == "# every tool in these traces has a known effect: no tool_rules needed\n"


def test_from_a_review_database(tmp_path: Path):
    path = ndjson(tmp_path, ROWS)
    db = tmp_path / "review.db"
    with SQLiteReviewStore(db) as store:
        for plan in plans_of(run("plan", str(path), "--on-malformed", "review")).values():
            if plan["replayClass"] == "review":
                store.upsert(plan_from_json(plan), service_name="billing")
    proc = run("tools", "--db", str(db))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == TABLE


def test_files_or_db_not_both_nor_neither(tmp_path: Path):
    path = ndjson(tmp_path, ROWS)
    for args in (("tools",), ("tools", str(path), "--db", str(tmp_path / "r.db"))):
        proc = run(*args)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", "tracefence tools: give trace files (FILE...) or a review database (--db DB), not both and not neither\n")


def test_unreadable_inputs_exit_2_naming_them(tmp_path: Path):
    proc = run("tools", "--db", str(tmp_path / "none.db"))
    assert (proc.returncode, proc.stderr) == (2, f"tracefence tools: {tmp_path / 'none.db'}: no review database there\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    proc = run("tools", str(empty))
    assert (proc.returncode, proc.stderr) == (2, f"tracefence tools: {empty}: the input is empty: no rows or spans to plan; nothing was listed\n")
    proc = run("tools", str(tmp_path / "missing.csv"))
    assert (proc.returncode, proc.stderr) == (2, f"tracefence tools: {tmp_path / 'missing.csv'}: No such file or directory\n")


def test_standard_input_plain_or_gzip_as_a_file(tmp_path: Path):
    import gzip

    path = ndjson(tmp_path, ROWS)
    for stdin in (path.read_bytes(), gzip.compress(path.read_bytes())):
        proc = run("tools", "-", stdin=stdin)
        assert (proc.returncode, proc.stdout) == (0, TABLE)
        assert proc.stderr == "tracefence tools: -: warning: line 7: effect: effect (a string of 5 characters) is not one of read, write, unknown\n"
    proc = run("tools", "-", "-", stdin=b"")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "tracefence tools: -: standard input given more than once: it can be read once; nothing was listed\n"
