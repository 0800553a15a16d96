"""A saved plan file (``tracefence plan --format json`` output) read back by ``tracefence plan`` never passes as
safer than its own steps (DECISIONS 696): a new user edited the plan of a timed-out ``invoice.create`` to class
``dynamic`` and decision ``replay``, and ``--fail-on review`` passed it. The real CLI as a subprocess."""

from __future__ import annotations

import json

import pytest

from test_cli import run, row, write_rows


def _saved(tmp_path):
    rows = write_rows(tmp_path, [row("a", "invoice.create", status="timeout", arguments={"amount": 5})])
    first = run("plan", str(rows))
    assert first.returncode == 0, first.stderr
    plan = json.loads(first.stdout)
    assert (plan["replayClass"], [s["decision"] for s in plan["steps"]]) == ("review", ["review"])
    return plan


@pytest.mark.parametrize("steps_too", [False, True], ids=["class_edited", "class_and_decisions_edited"])
def test_an_edited_saved_plan_is_read_as_its_steps_plan(tmp_path, steps_too):
    plan = _saved(tmp_path)
    plan["replayClass"] = "dynamic"
    if steps_too:
        for step in plan["steps"]:
            step["decision"] = "replay"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(plan) + "\n")
    gate = run("plan", str(forged), "--fail-on", "review")
    assert gate.returncode == 1
    assert json.loads(gate.stdout)["replayClass"] == "review"
    why = "recorded by the door that wrote the file (tracefence.replay.class)" if steps_too else "write_timeout (call a)"
    assert gate.stderr.splitlines()[1:] == [
        f"tracefence plan: {forged}: warning: trace t1: the saved plan says dynamic, its steps plan as review; read as review",
        f"tracefence plan: {forged}: fail-on review: trace t1: class review: {why}",
    ]


def test_a_saved_plan_stricter_than_its_steps_is_kept(tmp_path):
    """A class more restrictive than the steps give stays (a cross-trace reason is not in the steps)."""
    rows = write_rows(tmp_path, [row("a", "read_file", "read")])
    plan = json.loads(run("plan", str(rows)).stdout)
    plan["replayClass"] = "review"
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(plan) + "\n")
    again = run("plan", str(saved))
    assert (again.returncode, json.loads(again.stdout)["replayClass"]) == (0, "review")
    assert len(again.stderr.splitlines()) == 1  # the read-back note alone
