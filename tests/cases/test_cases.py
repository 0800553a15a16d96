"""Every example trace in ../shared/cases (when present) and examples/ gives its expected plan through the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from case_spans import find_cases
from conftest import ROOT, SHARED_CASES


def _cases(folder: Path):
    return [pytest.param(path, expected, id=f"{folder.name}/{case_id.partition('/')[2]}") for case_id, path, expected in find_cases(folder, folder.name)]


ALL_CASES = _cases(SHARED_CASES) + _cases(ROOT / "tests" / "cases")


def test_shared_cases_present_when_shared_folder_is():
    if (ROOT.parent / "shared").is_dir():
        assert len(_cases(SHARED_CASES)) >= 8


def _run(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "otel_tracefence", "plan", str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("input_path,expected_path", ALL_CASES)
def test_case_gives_expected_plan(input_path: Path, expected_path: Path):
    expected = json.loads(expected_path.read_text())
    proc = _run(input_path)
    if "error" in expected:
        assert proc.returncode == expected["exit_code"], proc.stderr
        assert proc.stdout == ""
        for row in expected["rows_named"]:
            assert f"line {row}:" in proc.stderr
        for field in expected["fields_named"]:
            assert f": {field}:" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    plans = {p["traceId"]: p for p in map(json.loads, proc.stdout.splitlines())}
    assert sorted(plans) == sorted(expected)
    for trace_id, want in expected.items():
        plan = plans[trace_id]
        assert plan["replayClass"] == want["class"]
        got = {s["step"]["callId"]: s["decision"] for s in plan["steps"]}
        listed = {call: d for call, d in want.get("steps", {}).items()}
        if "n_steps" in want:  # the steps listed are checked, and how many there are in all
            assert {call: got.get(call) for call in listed} == listed
            assert len(plan["steps"]) == want["n_steps"]
        else:
            assert got == listed
        assert plan["schemaVersion"] == "2"  # the plan JSON layout (DECISIONS 532)
