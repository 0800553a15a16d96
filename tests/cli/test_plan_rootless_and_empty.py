"""``tracefence plan`` on the third trial's inputs (s21): a file's root-less trace stays partial, and a gate
given no span does not pass (docs/DECISIONS.md 205-206). A subprocess, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT
from test_cli import run

TRIAL = ROOT / "tests" / "fixtures" / "trial"


def _one_plan(path: Path) -> dict:
    proc = run("plan", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


@pytest.mark.parametrize(
    "name",
    [
        "service_output_partial.json",  # the service's output: tracefence.trace.partial=true, its root absent
        "rootless.json",  # no annotation: the span's parent is not in the file
    ],
)
def test_a_trace_whose_parent_span_is_not_in_the_file_is_planned_partial(name):
    plan = _one_plan(TRIAL / name)
    assert (plan["replayClass"], plan["partial"]) == ("dynamic", True)  # the class stays (DECISIONS 193)


def test_the_service_partial_flag_is_kept_when_the_file_holds_the_root(tmp_path):
    document = json.loads((TRIAL / "service_output_partial.json").read_text())
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    del span["parentSpanId"]
    (tmp_path / "kept.json").write_text(json.dumps(document))
    assert _one_plan(tmp_path / "kept.json")["partial"] is True
    span["attributes"] = [a for a in span["attributes"] if a["key"] != "tracefence.trace.partial"]
    (tmp_path / "whole.json").write_text(json.dumps(document))
    assert _one_plan(tmp_path / "whole.json")["partial"] is False


@pytest.mark.parametrize("text", ["[]", '{"resourceSpans":[]}', '{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}'])
def test_an_input_with_no_span_fails_a_gate_and_warns_without_one(tmp_path, text):
    path = tmp_path / "empty.json"
    path.write_text(text)
    gated = run("plan", str(path), "--fail-on", "review")
    assert gated.returncode == 2
    assert gated.stderr.splitlines() == [
        f"tracefence plan: {path}: warning: no spans read: the input holds no span or row",
        f"tracefence plan: {path}: --fail-on review: nothing to check, so the gate does not pass; nothing was planned",
    ]
    plain = run("plan", str(path))
    assert plain.returncode == 0
    assert plain.stderr.splitlines() == [f"tracefence plan: {path}: warning: no spans read: the input holds no span or row"]


@pytest.mark.parametrize(
    "data, where",
    [
        (b"\0" * 64, "line 1: a NUL byte at byte 0"),  # a file of zeros (a truncated disk image, a sparse file)
        (b"tool,call_id\ninvoice.create,c\0\n", "line 2: a NUL byte at byte 29"),  # a CSV with binary in it
        (b'\n\n{"resourceSpans": [\0]}', "line 3: a NUL byte at byte 21"),
        (b"\x7fELF\x02\x01\x01\x00\x00\xfe\xff", "line 1: a NUL byte at byte 7"),  # a program: NUL before bad UTF-8
    ],
)
def test_binary_data_is_refused_naming_its_nul_byte_not_read_as_csv(tmp_path, data, where):
    path = tmp_path / "spans.bin"
    path.write_bytes(data)
    proc = run("plan", str(path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"tracefence plan: {path}: {where}: binary data, not OTLP/JSON, JSON, NDJSON or CSV text "
        "(binary OTLP protobuf goes to tracefence serve); nothing was planned\n"
    )


def test_invalid_utf8_before_a_nul_byte_is_named_as_invalid_utf8(tmp_path):
    path = tmp_path / "spans.json"
    path.write_bytes(b'{"a": "\xe9t\xe9"}\n\0')
    proc = run("plan", str(path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"tracefence plan: {path}: line 1: invalid UTF-8 at byte 7; nothing was planned\n"
