"""Issue 28, part 4: the plan's JSON says the span attributes' words (plan JSON schema "2"), and plans saved in the
old spelling (schema "1", protobuf enum names) are still read back by ``tracefence plan``. The real CLI as a
subprocess, on the shared cases' inputs and on files it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.schema import PLAN_JSON_SCHEMA_VERSION, plan_from_json, plan_to_proto, plan_from_proto
from test_cli import run, write_rows, row

OLD_NAMES = ("REPLAY_CLASS_", "DECISION_", "EFFECT_", "TOOL_STATUS_")


def _rows(tmp_path: Path) -> Path:
    return write_rows(
        tmp_path,
        [
            row("a", "ticket.update", arguments={"t": 1}, idempotency_key="k"),
            row("b", "ticket.update", arguments={"t": 2}, idempotency_key="k"),
            dict(row("c", "read_file", "read"), trace_id="t2"),
        ],
    )


def _old_spelling(line: str) -> str:
    """A line as schema "1" printed it: json_format's canonical JSON of the same TracePlan."""
    return json_format.MessageToJson(plan_from_json(line), indent=None, always_print_fields_with_no_presence=True)


def test_plan_json_says_the_attribute_words(tmp_path):
    proc = run("plan", str(_rows(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    plans = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(p["schemaVersion"], p["traceId"], p["replayClass"], p["partial"]) for p in plans] == [("2", "t1", "review", False), ("2", "t2", "dynamic", False)]
    assert [(s["step"]["callId"], s["decision"], s["step"]["effect"], s["step"]["effectSource"], s["step"]["status"]) for p in plans for s in p["steps"]] == [
        ("a", "conflict", "write", "declared", "ok"),
        ("b", "conflict", "write", "declared", "ok"),
        ("c", "replay", "read", "declared", "ok"),
    ]
    assert not any(name in proc.stdout for name in OLD_NAMES)


def test_a_plan_with_no_tool_step_has_a_null_class():
    from otel_tracefence.core.model import TracePlan
    from otel_tracefence.core.schema import plan_to_json

    data = json.loads(plan_to_json(TracePlan(trace_id="t0", replay_class=None)))
    assert data == {"schemaVersion": PLAN_JSON_SCHEMA_VERSION, "traceId": "t0", "replayClass": None, "steps": [], "partial": False}
    assert plan_from_json(data).replay_class == pb.REPLAY_CLASS_UNSPECIFIED


def test_both_spellings_read_into_the_same_message(tmp_path):
    proc = run("plan", str(_rows(tmp_path)))
    for line in proc.stdout.splitlines():
        old = _old_spelling(line)
        assert '"schemaVersion": "1"' in old and "REPLAY_CLASS_" in old and "DECISION_" in old
        assert plan_from_json(old) == plan_from_json(line)
        message = plan_from_json(line)
        assert message.schema_version == "1"  # the plan's schema, which the spans carry, did not change
        assert plan_to_proto(plan_from_proto(message)) == message  # and back to the model without loss


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"schemaVersion": "3", "traceId": "t", "replayClass": "review", "steps": []}', "schemaVersion: '3' is not a plan JSON schema this version reads (1, 2)"),
        ('{"schemaVersion": "2", "traceId": "t", "replayClass": "maybe", "steps": []}', 'Failed to parse replayClass field: Invalid enum value maybe for enum type tracefence.v1.ReplayClass at TracePlan.replayClass.'),
        ("[1]", "a plan is a JSON object, not list"),
    ],
)
def test_what_is_no_plan_is_named(line, message):
    with pytest.raises(ValueError) as raised:
        plan_from_json(line)
    assert str(raised.value) == message


@pytest.mark.parametrize("spelling", ["new", "old"])
def test_tracefence_plan_reads_saved_plans_back(tmp_path, spelling):
    first = run("plan", str(_rows(tmp_path)))
    lines = first.stdout.splitlines()
    saved = tmp_path / "saved.jsonl"
    saved.write_text("".join((_old_spelling(line) if spelling == "old" else line) + "\n" for line in lines))
    again = run("plan", str(saved))
    assert again.returncode == 0
    assert again.stdout == first.stdout  # in today's spelling, whatever the file's
    version = "1" if spelling == "old" else "2"
    assert again.stderr == (
        f"tracefence plan: {saved}: warning: read 2 saved plan(s) back as written (plan JSON schema {version}; this version writes 2); nothing was planned again\n"
    )
    gate = run("plan", str(saved), "--format", "table", "--fail-on", "review")
    assert gate.returncode == 1
    assert gate.stdout.splitlines()[0].split() == ["trace", "class", "call_id", "tool", "effect", "status", "decision", "reasons", "related"]
    rows = gate.stdout.split("\n\n", 1)[0].splitlines()[1:]  # the table, before its reasons section
    assert [line.split()[:2] for line in rows] == [["t1", "review"], ["t1", "review"], ["t2", "dynamic"]]


def test_a_saved_plan_file_with_a_bad_line_is_rejected(tmp_path):
    first = run("plan", str(_rows(tmp_path)))
    saved = tmp_path / "saved.jsonl"
    saved.write_text(first.stdout + '{"schemaVersion": "9", "traceId": "t3", "replayClass": "dynamic", "steps": []}\n')
    proc = run("plan", str(saved))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [
        f"tracefence plan: {saved}: line 3: not a saved plan this version reads: schemaVersion: '9' is not a plan JSON schema this version reads (1, 2)",
        f"tracefence plan: {saved}: rejected, 1 error(s); nothing was planned",
    ]
