"""``tracefence plan FILE...`` (issue 28, part 5): each file planned alone, in the order given, the plans printed in
that order; ``--fail-on`` over all of them, each line naming its file; a file that cannot be read or is rejected
rejects the run (exit 2, nothing on standard output), naming the file, the line and the field."""

from __future__ import annotations

from conftest import ROOT
from cli_helpers import run
from test_cli_operator import ndjson

STATIC = ROOT / "examples" / "pager_static.otlp.json"
READS = ROOT / "examples" / "reads_only.csv"


def _trace_ids(stdout: str) -> list[str]:
    import json

    return [json.loads(line)["traceId"] for line in stdout.splitlines()]


def test_plans_of_several_files_in_the_order_given():
    one, two = run("plan", str(STATIC)), run("plan", str(READS))
    both = run("plan", str(STATIC), str(READS))
    assert both.returncode == 0, both.stderr
    assert both.stdout == one.stdout + two.stdout
    assert run("plan", str(READS), str(STATIC)).stdout == two.stdout + one.stdout
    assert len(_trace_ids(both.stdout)) == len(_trace_ids(one.stdout)) + len(_trace_ids(two.stdout)) >= 2


def test_files_and_standard_input_together():
    both = run("plan", str(STATIC), "-", stdin=READS.read_text())
    assert both.returncode == 0, both.stderr
    assert both.stdout == run("plan", str(STATIC)).stdout + run("plan", str(READS)).stdout


def test_standard_input_twice_is_refused():
    proc = run("plan", "-", "-", stdin="")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "tracefence plan: -: standard input given more than once: it can be read once; nothing was planned\n"


def test_a_table_of_several_files_is_one_table():
    proc = run("plan", str(STATIC), str(READS), "--format", "table")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n\nreasons\n")[0].splitlines()  # the rows, then one key of the reasons in words
    assert lines[0].split()[:3] == ["trace", "class", "call_id"]
    assert sum(line.startswith("trace ") for line in lines) == 1  # one header
    assert proc.stdout.count("\nreasons\n") == 1  # one key
    rows = [len(run("plan", str(path), "--format", "table").stdout.split("\n\nreasons\n")[0].splitlines()) - 1 for path in (STATIC, READS)]
    assert len(lines) - 1 == sum(rows)


def test_fail_on_names_the_file_of_each_trace(tmp_path):
    held = ndjson(tmp_path, [{"trace_id": "t9", "call_id": "c1", "tool": "invoice.create", "status": "timeout"}], "held.ndjson")
    proc = run("plan", str(READS), str(held), "--fail-on", "review")
    assert proc.returncode == 1
    assert proc.stderr == f"tracefence plan: {held}: fail-on review: trace t9: class review: effect_unknown (call c1)\n"


def test_a_rejected_file_rejects_the_run_naming_file_line_and_field(tmp_path):
    bad = ndjson(tmp_path, [{"trace_id": "t1", "call_id": "c1", "tool": "crm.lookup", "effect": "reed"}], "bad.ndjson")
    proc = run("plan", str(STATIC), str(bad))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [
        f"tracefence plan: {bad}: line 1: effect: effect (a string of 4 characters) is not one of read, write, unknown; did you mean 'read'?",
        f"tracefence plan: {bad}: rejected, 1 error(s); nothing was planned",
        "tracefence plan: a file was rejected: nothing was printed",
    ]


def test_a_missing_file_among_several_is_named(tmp_path):
    missing = tmp_path / "nope.json"
    proc = run("plan", str(STATIC), str(missing))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [
        f"tracefence plan: {missing}: No such file or directory; nothing was planned",
        "tracefence plan: a file was rejected: nothing was printed",
    ]


def test_a_retry_in_a_later_file_meets_its_first_try_as_in_one_input(tmp_path):
    """DECISIONS 996: the files of one run share one write index, as the traces of one input do: a timed-out charge in
    the first file and its retry under the same key in the second hold the retry (``retry_of_held_write``), as
    ``cat a b | tracefence plan -`` does. Before, each file met a write index of its own and the retry passed as skip."""
    first = ndjson(tmp_path, [{"trace_id": "t1", "call_id": "c1", "tool": "charge", "effect": "write", "status": "timeout",
                               "idempotency_key": "k12", "arguments": {"amount": 5}, "start_time": "2026-12-07T10:00:00Z"}], "a.ndjson")
    retry = ndjson(tmp_path, [{"trace_id": "t2", "call_id": "c1", "tool": "charge", "effect": "write", "status": "ok",
                               "idempotency_key": "k12", "arguments": {"amount": 5}, "result": {"id": "ch_1"}, "start_time": "2026-12-07T10:05:00Z"}], "b.ndjson")
    proc = run("plan", str(first), str(retry))
    assert proc.returncode == 0, proc.stderr
    import json

    plans = {p["traceId"]: p for p in map(json.loads, proc.stdout.splitlines())}
    assert (plans["t2"]["replayClass"], plans["t2"]["steps"][0]["decision"], plans["t2"]["steps"][0]["reasons"]) == ("review", "review", ["retry_of_held_write"])
    together = run("plan", "-", stdin=first.read_text() + retry.read_text())
    assert {p["traceId"]: p["steps"][0]["reasons"] for p in map(json.loads, together.stdout.splitlines())}["t2"] == ["retry_of_held_write"]
