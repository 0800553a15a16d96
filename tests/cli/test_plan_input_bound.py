"""``tracefence plan`` and ``tracefence tools`` read at most ``limits.max_input_bytes`` of their input (docs/DECISIONS.md
504): a larger or endless input (``/dev/zero``, an endless pipe) is refused with one line naming the limit and exit 2,
after reading one byte past the limit. Before, ``tracefence plan /dev/zero`` read until memory ran out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli_helpers import run

ROWS = [{"trace_id": "t1", "call_id": "c1", "tool": "invoice.get", "effect": "read", "arguments": {"id": "in_1"}}]
LIMIT = 4096


def _config(tmp_path: Path, limit: int = LIMIT) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"limits:\n  max_input_bytes: {limit}\n")
    return str(path)


def _refusal(path: str, limit: int = LIMIT) -> str:
    return f"tracefence plan: {path}: the input is larger than limits.max_input_bytes ({limit} bytes): not read; raise the limit or split the input; nothing was planned\n"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this system")
def test_plan_of_dev_zero_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run("plan", "/dev/zero", "--config", _config(tmp_path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", _refusal("/dev/zero"))


def test_plan_of_dev_zero_with_the_default_limit_is_refused(tmp_path: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero on this system")
    proc = run("plan", "/dev/zero")
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", _refusal("/dev/zero", 256 * 1024 * 1024))


def test_a_file_one_byte_past_the_limit_is_refused_and_one_at_it_is_planned(tmp_path: Path) -> None:
    text = json.dumps(ROWS)
    at_limit = tmp_path / "at.json"
    at_limit.write_text(text + " " * (LIMIT - len(text)))
    over = tmp_path / "over.json"
    over.write_text(text + " " * (LIMIT + 1 - len(text)))
    proc = run("plan", str(at_limit), "--config", _config(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (plan,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert plan["replayClass"] == "dynamic"
    proc = run("plan", str(over), "--config", _config(tmp_path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", _refusal(str(over)))


def test_standard_input_past_the_limit_is_refused(tmp_path: Path) -> None:
    proc = run("plan", "-", "--config", _config(tmp_path), stdin=json.dumps(ROWS) + " " * LIMIT)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", _refusal("-"))


def test_tools_is_bounded_too(tmp_path: Path) -> None:
    over = tmp_path / "over.json"
    over.write_text(json.dumps(ROWS) + " " * LIMIT)
    proc = run("tools", str(over), "--config", _config(tmp_path))
    assert proc.returncode == 2
    assert f"larger than limits.max_input_bytes ({LIMIT} bytes)" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
