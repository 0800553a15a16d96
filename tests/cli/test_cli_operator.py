"""Issue 13 on the command line: camelCase rows, unknown columns named, --fail-on says why,
messages that name the problem and the fix, --version, ``tracefence tools``. The real CLI as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import decisions, plan, plans_of


def ndjson(tmp_path: Path, rows: list[dict], name: str = "rows.ndjson") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- Row columns ---


def test_camel_case_idempotency_key_finds_the_conflict(tmp_path: Path):
    path = ndjson(
        tmp_path,
        [
            {"traceId": "t1", "callId": "c1", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotencyKey": "k", "arguments": {"a": 1}, "startTime": 1},
            {"traceId": "t1", "callId": "c2", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotencyKey": "k", "arguments": {"a": 2}, "startTime": 2},
        ],
    )
    proc = plan(path)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert decisions(plans_of(proc)["t1"]) == [
        ("c1", "conflict", ["idempotency_key_conflict", "result_not_recorded"], ["c2"]),
        ("c2", "conflict", ["idempotency_key_conflict", "result_not_recorded"], ["c1"]),
    ]


def test_camel_case_csv_header(tmp_path: Path):
    path = tmp_path / "rows.csv"
    path.write_text('traceId,callId,tool,effect,status,idempotencyKey,startTime\nt1,c1,invoice.create,write,ok,inv-1,2026-01-01T00:00:00Z\n', encoding="utf-8")
    proc = plan(path)
    assert (proc.returncode, proc.stderr) == (0, "")
    (step,) = plans_of(proc)["t1"]["steps"]
    assert (step["step"]["callId"], step["step"]["idempotencyKey"], step["step"]["startTimeUnixNano"]) == ("c1", "inv-1", "1767225600000000000")


def test_both_spellings_in_one_row_are_malformed(tmp_path: Path):
    path = ndjson(
        tmp_path,
        [
            {"trace_id": "t1", "call_id": "c1", "tool": "x", "effect": "read"},
            {"trace_id": "t1", "call_id": "c2", "callId": "c2", "tool": "x", "effect": "read"},
            {"trace_id": "t1", "traceId": "t2", "call_id": "c3", "tool": "x", "effect": "read"},
        ],
    )
    proc = plan(path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"tracefence plan: {path}: line 2: call_id: both call_id and callId given: give one\n"
        f"tracefence plan: {path}: line 3: trace_id: both trace_id and traceId given: give one\n"
        f"tracefence plan: {path}: rejected, 2 error(s); nothing was planned\n"
    )
    reviewed = plan(path, "--on-malformed", "review")
    assert reviewed.returncode == 0
    assert decisions(plans_of(reviewed)["t1"])[1] == ("c2", "review", ["malformed_call_id", "arguments_not_recorded"], [])


def test_unknown_columns_are_named_once_each_with_the_closest_field(tmp_path: Path):
    path = ndjson(
        tmp_path,
        [
            {"trace_id": "t1", "call_id": "c1", "tool": "x", "effect": "read", "idempotency-key": "k"},
            {"trace_id": "t1", "call_id": "c2", "tool": "x", "effect": "read", "idempotency-key": "k", "colour": "red"},
        ],
    )
    proc = plan(path)
    assert proc.returncode == 0
    assert proc.stderr == (
        f"tracefence plan: {path}: warning: line 1: idempotency-key: not a row field, ignored; did you mean 'idempotency_key'?\n"
        f"tracefence plan: {path}: warning: line 2: colour: not a row field, ignored; the fields are trace_id, call_id, id, tool, effect, status, idempotency_key, arguments, result, result_stable, start_time\n"
    )


def test_unknown_csv_column_is_named_at_the_header(tmp_path: Path):
    path = tmp_path / "rows.csv"
    path.write_text("call_id,tool,effect,Idempotency-Key\nc1,x,read,k\nc2,x,read,k\n", encoding="utf-8")
    proc = plan(path)
    assert proc.returncode == 0
    assert proc.stderr == f"tracefence plan: {path}: warning: line 1: Idempotency-Key: not a row field, ignored; did you mean 'idempotency_key'?\n"


# --- --fail-on says which traces met it and why ---


def test_fail_on_prints_one_line_per_trace_that_met_it(tmp_path: Path):
    path = ndjson(
        tmp_path,
        [
            {"trace_id": "t1", "call_id": "c1", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotency_key": "k", "arguments": {"a": 1}},
            {"trace_id": "t1", "call_id": "c2", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotency_key": "k", "arguments": {"a": 2}},
            {"trace_id": "t1", "call_id": "c3", "tool": "invoice.create", "effect": "write", "status": "timeout"},
            {"trace_id": "t1", "call_id": "c4", "tool": "mystery", "status": "ok"},
            {"trace_id": "t1", "call_id": "c5", "tool": "invoice.void", "effect": "write", "status": "error"},
            {"trace_id": "t2", "call_id": "d1", "tool": "invoice.create", "effect": "write", "status": "ok"},
            {"trace_id": "t3", "call_id": "e1", "tool": "crm.lookup", "effect": "read", "status": "ok"},
        ],
    )
    proc = plan(path, "--fail-on", "static")
    assert proc.returncode == 1
    assert proc.stderr == (
        f"tracefence plan: {path}: fail-on static: trace t1: class review: idempotency_key_conflict (call c1), write_timeout (call c3), effect_unknown (call c4), +1 more\n"
        f"tracefence plan: {path}: fail-on static: trace t2: class static: result_not_recorded (call d1)\n"
    )
    proc = plan(path, "--fail-on", "review", "--format", "table")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"tracefence plan: {path}: fail-on review: trace t1: class review: idempotency_key_conflict (call c1), write_timeout (call c3), effect_unknown (call c4), +1 more"
    ]


def test_fail_on_not_met_prints_nothing(tmp_path: Path):
    path = ndjson(tmp_path, [{"trace_id": "t3", "call_id": "e1", "tool": "crm.lookup", "effect": "read", "status": "ok"}])
    proc = plan(path, "--fail-on", "injected")
    assert (proc.returncode, proc.stderr) == (0, "")


# --- Messages that name the problem and the fix ---


def test_a_json_number_is_not_called_a_csv_header_problem(tmp_path: Path):
    path = tmp_path / "n.json"
    path.write_text("42\n", encoding="utf-8")
    proc = plan(path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"tracefence plan: {path}: line 1: the input is a JSON number, not a trace file: give OTLP/JSON (an object with resourceSpans), "
        "JSON rows (an array of objects), NDJSON rows (one object per line) or CSV rows with a header; nothing was planned\n"
    )


def test_a_text_that_is_not_json_keeps_the_csv_header_message(tmp_path: Path):
    path = tmp_path / "n.csv"
    path.write_text("name,value\na,1\n", encoding="utf-8")
    proc = plan(path)
    assert proc.returncode == 2
    assert proc.stderr == f"tracefence plan: {path}: line 1: the CSV header must name at least tool and call_id (or id); nothing was planned\n"


def _otlp_span(trace_id: str, span_id: str) -> str:
    span = {"traceId": trace_id, "spanId": span_id, "name": "execute_tool x", "attributes": [{"key": "gen_ai.tool.name", "value": {"stringValue": "x"}}]}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n"


def test_base64_ids_are_named_as_base64_with_the_hex_fix(tmp_path: Path):
    path = tmp_path / "b64.otlp.json"
    path.write_text(_otlp_span("W47/95gDgQPSabYzgT/GDA==", "ERERERERERE="), encoding="utf-8")
    proc = plan(path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"tracefence plan: {path}: line 1, span ERERERERERE=: traceId: the span's traceId 'W47/95gDgQPSabYzgT/GDA==' is base64 "
        "(protobuf's plain JSON mapping); OTLP/JSON writes ids as 32 hex characters: convert each id (in Python: base64.b64decode(id).hex())\n"
        f"tracefence plan: {path}: rejected, 1 error(s); nothing was planned\n"
    )
    path.write_text(_otlp_span("5b8efff798038103d269b633813fc60c", "ERERERERERE="), encoding="utf-8")
    proc = plan(path)
    assert proc.returncode == 0
    assert proc.stderr == (
        f"tracefence plan: {path}: warning: line 1, span ERERERERERE=: spanId: the span's spanId 'ERERERERERE=' is base64 "
        "(protobuf's plain JSON mapping); OTLP/JSON writes ids as 16 hex characters: convert each id (in Python: base64.b64decode(id).hex())\n"
    )


# --- Progress on a terminal only ---


def _plan_with_stderr_on_a_terminal(path: Path) -> tuple[int, str, str]:
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    from conftest import ROOT

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal 120 columns wide
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_TRACEFENCE_", "TQDM_"))}
    out = path.with_suffix(".out")
    with out.open("wb") as stdout_file:  # a file, not a pipe: nobody reads a pipe while the terminal is read
        proc = subprocess.Popen([sys.executable, "-m", "otel_tracefence", "plan", str(path)], stdout=stdout_file, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    stdout = out.read_text(encoding="utf-8")
    os.close(master)
    return proc.returncode, stdout, b"".join(chunks).decode(errors="replace")


def test_progress_is_shown_when_stderr_is_a_terminal_and_never_in_a_pipe(tmp_path: Path):
    rows = [{"trace_id": f"t{i:04d}", "call_id": "c", "tool": "crm.lookup", "effect": "read", "status": "ok"} for i in range(300)]
    path = ndjson(tmp_path, rows)
    code, stdout, terminal = _plan_with_stderr_on_a_terminal(path)
    assert code == 0
    assert len(stdout.splitlines()) == 300
    assert "\rtracefence plan:   0%|" in terminal and "| 0/300 [00:00<?, ?trace/s]" in terminal  # tqdm's bar, cleared at the end
    piped = plan(path)
    assert (piped.returncode, piped.stderr, piped.stdout) == (0, "", stdout)


def test_a_lone_surrogate_in_a_span_is_a_malformed_span_not_a_crash(tmp_path: Path):
    # Found by tests/faults/test_fuzz.py: protobuf's C parser raised SystemError on it.
    path = tmp_path / "surrogate.otlp.json"
    path.write_text(
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01010101010101010101010101010101", "spanId": "0101010101010101", "attributes": ["\\ud800"]}]}]}]}\n',
        encoding="utf-8",
    )
    proc = plan(path)
    assert proc.returncode == 0
    assert proc.stderr == f"tracefence plan: {path}: warning: line 1, span 0101010101010101: span: a name or value holds a lone surrogate: not Unicode text\n"
    assert decisions(plans_of(proc)["01010101010101010101010101010101"]) == [
        ("0101010101010101", "review", ["malformed_span", "effect_unknown", "arguments_not_recorded"], [])
    ]


def test_result_stable_in_camel_case_and_both_spellings(tmp_path: Path):
    path = ndjson(
        tmp_path,
        [
            {"traceId": "t1", "callId": "c1", "tool": "pages.get", "effect": "read", "status": "ok", "resultStable": False, "result": {"id": "p1"}},
            {"traceId": "t1", "callId": "c2", "tool": "pages.get", "effect": "read", "status": "ok", "result_stable": False, "resultStable": True},
        ],
    )
    proc = plan(path, "--on-malformed", "review")
    assert proc.returncode == 0
    assert proc.stderr == f"tracefence plan: {path}: warning: line 2: result_stable: both result_stable and resultStable given: give one\n"
    assert decisions(plans_of(proc)["t1"]) == [
        ("c1", "skip", ["unstable_result", "arguments_not_recorded"], []),
        ("c2", "review", ["malformed_result_stable", "result_not_recorded", "arguments_not_recorded"], []),
    ]
