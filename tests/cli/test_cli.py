"""``python -m otel_tracefence plan`` as a user runs it: a subprocess on files in tmp_path.

Bad input always ends in a clear message naming the line (or span) and field, with
exit 2, or in a malformed review decision; never a traceback or a hang.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from otel_tracefence.core.reason_text import legend_lines
from otel_tracefence.core.schema import plan_from_json

from cli_helpers import run
from conftest import ROOT

TRACE = "5b8efff798038103d269b633813fc60c"




def plan(path: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run("plan", str(path), *args, **kwargs)


def plans_of(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    assert proc.returncode in (0, 1), proc.stderr
    return {p["traceId"]: p for p in map(json.loads, proc.stdout.splitlines())}


def decisions(plan_json: dict) -> list[tuple[str, str, list[str], list[str]]]:
    return [
        (s["step"]["callId"], s["decision"], s["reasons"], s["relatedCallIds"])
        for s in plan_json["steps"]
    ]


def write_rows(tmp_path: Path, rows: list[dict], name: str = "rows.ndjson") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def row(call_id: str, tool: str = "invoice.create", effect: str = "write", status: str = "ok", **extra) -> dict:
    return {"trace_id": "t1", "call_id": call_id, "tool": tool, "effect": effect, "status": status, **extra}


def assert_rejected(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr
    assert "nothing was planned" in proc.stderr


# --- bad input -------------------------------------------------------------------------------------


def test_invalid_effect_is_rejected_naming_line_and_field(tmp_path):
    path = write_rows(tmp_path, [row("a", effect="read"), row("b", effect="delete")])
    assert_rejected(plan(path), "line 2: effect: effect (a string of 6 characters) is not one of read, write, unknown")


def test_invalid_status_is_rejected_naming_line_and_field(tmp_path):
    path = write_rows(tmp_path, [row("a", status="done")])
    assert_rejected(plan(path), "line 1: status: status (a string of 4 characters) is not one of ok, error, timeout, unknown")


def test_malformed_rows_become_review_steps_with_on_malformed_review(tmp_path):
    path = write_rows(tmp_path, [row("a", effect="read", arguments={"p": 1}), row("b", effect="delete", arguments={"p": 2})])
    proc = plan(path, "--on-malformed", "review")
    assert proc.returncode == 0, proc.stderr
    assert "line 2: effect: effect (a string of 6 characters) is not one of read, write, unknown" in proc.stderr  # still said
    (plan_json,) = plans_of(proc).values()
    assert plan_json["replayClass"] == "review"
    assert decisions(plan_json) == [("a", "replay", ["declared_read"], []), ("b", "review", ["malformed_effect", "effect_unknown"], [])]
    assert plan_json["steps"][1]["step"]["malformed"] == [{"field": "effect", "message": "effect (a string of 6 characters) is not one of read, write, unknown"}]


def test_csv_arguments_that_are_not_json_are_rejected(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text('trace_id,call_id,tool,effect,status,arguments\nt1,a,read_file,read,ok,"{""p"": 1}"\nt1,b,invoice.create,write,ok,{not json\n')
    assert_rejected(plan(path), "line 3: arguments: arguments are cut off: the JSON text does not parse to its end")  # starts as an object (DECISIONS 340)


def test_missing_tool_names_are_rejected(tmp_path):
    path = write_rows(tmp_path, [row("a"), {"trace_id": "t1", "call_id": "b", "effect": "read", "status": "ok"}, row("c", tool="")])
    proc = plan(path)
    assert_rejected(proc, "line 2: tool: no tool name", "line 3: tool: no tool name", "rejected, 2 error(s)")
    assert "line 1:" not in proc.stderr


def test_missing_call_id_is_rejected(tmp_path):
    path = write_rows(tmp_path, [{"trace_id": "t1", "tool": "x", "effect": "read", "status": "ok"}])
    assert_rejected(plan(path), "line 1: call_id: no call_id or id")


DEEP = "[" * 10_000 + "]" * 10_000


def test_arguments_nested_ten_thousand_deep_in_an_ndjson_row(tmp_path):
    path = tmp_path / "deep.ndjson"
    path.write_text('{"trace_id": "t1", "call_id": "a", "tool": "x", "effect": "read", "status": "ok", "arguments": ' + DEEP + "}\n")
    assert_rejected(plan(path), "line 1: row: JSON nested too deep")


def test_arguments_nested_ten_thousand_deep_in_a_csv_cell_are_too_deep(tmp_path):
    path = tmp_path / "deep.csv"
    path.write_text(f"trace_id,call_id,tool,effect,status,arguments\nt1,a,read_file,read,ok,{DEEP}\n")
    proc = plan(path)
    assert decisions(plans_of(proc)["t1"]) == [("a", "replay", ["declared_read", "arguments_too_deep"], [])]


@pytest.mark.parametrize(
    "text,message",
    [
        (DEEP, "line 1: nesting too deep"),
        ("{" + '"a": {' * 10_000 + "}" * 10_001, "line 1: row: JSON nested too deep"),
        ('{"resourceSpans": ' + DEEP + "}", "line 1: JSON nested too deep"),
    ],
    ids=["json-array", "ndjson-object", "otlp"],
)
def test_a_whole_file_nested_ten_thousand_deep(tmp_path, text, message):
    path = tmp_path / "deep.json"
    path.write_text(text)
    assert_rejected(plan(path), message)


@pytest.mark.parametrize("suffix", ["ndjson", "csv"])
def test_a_50_mb_argument_string_plans_as_arguments_too_large_fast(tmp_path, suffix):
    blob = json.dumps({"blob": "x" * (50 * 1024 * 1024)})
    path = tmp_path / f"big.{suffix}"
    if suffix == "ndjson":
        path.write_text(json.dumps(row("a", arguments=json.loads(blob))) + "\n")
    else:
        path.write_text("trace_id,call_id,tool,effect,status,arguments\nt1,a,invoice.create,write,ok," + '"' + blob.replace('"', '""') + '"\n')
    started = time.monotonic()
    proc = plan(path)
    elapsed = time.monotonic() - started
    assert decisions(plans_of(proc)["t1"]) == [("a", "skip", ["write_committed", "result_not_recorded", "arguments_too_large"], [])]
    assert elapsed < 20, elapsed


def test_duplicate_call_ids_are_a_conflict(tmp_path):
    path = write_rows(tmp_path, [row("a", arguments={"n": 1}, result="r"), row("a", arguments={"n": 1}, result="r")])
    (plan_json,) = plans_of(plan(path)).values()
    assert plan_json["replayClass"] == "review"
    assert decisions(plan_json) == [
        ("a", "conflict", ["call_id_executed_more_than_once", "repeated_later"], ["a"]),
        ("a", "conflict", ["call_id_executed_more_than_once", "repeats_earlier_write"], ["a"]),
    ]


def _span(span_id: str, tool: str, *, trace_id: str = TRACE, start: int = 1, parent: str | None = None, **attributes) -> dict:
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}, {"key": "gen_ai.tool.name", "value": {"stringValue": tool}}]
    for key, value in attributes.items():
        attrs.append({"key": key.replace("__", "."), "value": {"stringValue": value}})
    span = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": f"execute_tool {tool}",
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 10),
        "attributes": attrs,
        "status": {},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _request(*spans: dict) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}, "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]}


def test_wrong_length_trace_id_in_otlp_json_names_span_and_field(tmp_path):
    path = tmp_path / "trace.otlp.json"
    path.write_text(json.dumps(_request(_span("1111111111111111", "read_file", trace_id="abc", tracefence__effect="read"))))
    assert_rejected(plan(path), "line 1, span 1111111111111111: traceId: ", "must be 32 hex characters, got 'abc'")


def test_an_unreadable_span_whose_trace_is_known_is_a_review_step_never_dropped(tmp_path):
    # The timed-out write's parent id is bad: planning the rest without it would class the trace "dynamic".
    read = _span("1111111111111111", "lookup", tracefence__effect="read")
    write = _span("2222222222222222", "charge", start=20, parent="12", tracefence__effect="write", tracefence__status="timeout")
    path = tmp_path / "trace.otlp.json"
    path.write_text(json.dumps(_request(read, write)))
    proc = plan(path, "--fail-on", "review")
    assert proc.returncode == 1, proc.stderr
    plan_json = plans_of(proc)[TRACE]
    assert plan_json["replayClass"] == "review"
    assert decisions(plan_json) == [
        ("2222222222222222", "review", ["malformed_parentSpanId", "effect_unknown", "arguments_not_recorded"], []),
        ("1111111111111111", "replay", ["declared_read", "arguments_not_recorded"], []),
    ]
    assert "warning: line 1, span 2222222222222222: parentSpanId: the span's parentSpanId must be 16 hex characters, got '12'" in proc.stderr
    assert_rejected(plan(path, "--on-malformed", "reject"), "span 2222222222222222: parentSpanId: ")


def test_an_unreadable_span_whose_trace_is_unknown_rejects_the_file(tmp_path):
    read = _span("1111111111111111", "lookup", tracefence__effect="read")
    write = _span("2222222222222222", "charge", trace_id="not-hex", tracefence__effect="write")
    path = tmp_path / "trace.otlp.json"
    path.write_text(json.dumps(_request(read, write)))
    assert_rejected(plan(path), "span 2222222222222222: traceId: ")


def test_a_malformed_span_is_a_review_step_by_default_for_otlp_json(tmp_path):
    path = tmp_path / "trace.otlp.json"
    path.write_text(json.dumps(_request(_span("1111111111111111", "lookup", tracefence__effect="read"), _span("2222222222222222", "charge", start=20, tracefence__effect="reed"))))
    assert_rejected(plan(path, "--on-malformed", "reject"), "line 1, span 2222222222222222: effect: effect (a string of 4 characters) is not one of read, write, unknown; did you mean 'read'?")
    for proc in (plan(path), plan(path, "--on-malformed", "review")):
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == (
            f"tracefence plan: {path}: warning: line 1, span 2222222222222222: effect: effect (a string of 4 characters) is not one of read, write, unknown; did you mean 'read'?\n"
        )
        assert decisions(plans_of(proc)[TRACE]) == [
            ("1111111111111111", "replay", ["declared_read", "arguments_not_recorded"], []),
            ("2222222222222222", "review", ["malformed_effect", "effect_unknown", "arguments_not_recorded"], []),
        ]


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"call_id,tool,effect,status\na,read_file,read,ok\nb,caf\xe9,read,ok\n")
    assert_rejected(plan(path), "line 3: invalid UTF-8")


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_empty_file_is_rejected(tmp_path, content):
    path = tmp_path / "empty.json"
    path.write_text(content)
    assert_rejected(plan(path), "the input is empty")


@pytest.mark.parametrize(
    "line,message",
    [("b,y,read,ok,extra", "line 3: row: 5 fields where the header has 4"), ("b,y", "line 3: row: 2 fields where the header has 4")],
    ids=["long", "short"],
)
def test_csv_with_a_ragged_row_is_rejected(tmp_path, line, message):
    path = tmp_path / "rows.csv"
    path.write_text(f"call_id,tool,effect,status\na,x,read,ok\n{line}\nc,z,read,ok\n")
    assert_rejected(plan(path), message)
    assert_rejected(plan(path, "--on-malformed", "review"), message)


def test_csv_header_without_tool_is_rejected(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("call_id,name\na,x\n")
    assert_rejected(plan(path), "line 1: the CSV header must name at least tool and call_id (or id)")


def test_missing_file_is_exit_2(tmp_path):
    proc = plan(tmp_path / "nope.json")
    assert proc.returncode == 2
    assert "nope.json" in proc.stderr


# --- options ---------------------------------------------------------------------------------------


def test_table_output(tmp_path):
    proc = plan(ROOT / "examples" / "invoice_timeout.json", "--format", "table")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["trace", "class", "call_id", "tool", "effect", "status", "decision", "reasons", "related"]
    assert [line.split() for line in lines[1:3]] == [
        ["t-invoice", "review", "call-16", "customer.lookup", "read", "ok", "replay", "declared_read", "-"],
        ["t-invoice", "review", "call-17", "invoice.create", "write", "timeout", "review", "write_timeout", "-"],
    ]
    # then each reason in words, from the one table the review page and `review show` use too
    assert lines[3:] == ["", "reasons", *legend_lines(["declared_read", "write_timeout"])]
    assert lines[-1].startswith("write_timeout: a write timed out") and "; check: look the call up in the owning system" in lines[-1]


@pytest.mark.parametrize(
    "example,fail_on,code",
    [
        ("pager_static.otlp.json", "injected", 1),
        ("pager_static.otlp.json", "static", 1),
        ("pager_static.otlp.json", "review", 0),
        ("reads_only.csv", "injected", 0),
        ("invoice_timeout.json", "review", 1),
    ],
)
def test_fail_on(example, fail_on, code):
    proc = plan(ROOT / "examples" / example, "--fail-on", fail_on)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.count("\n") == 1  # the plan is still printed


def test_input_format_override(tmp_path):
    path = tmp_path / "rows.txt"
    path.write_text(json.dumps([row("a", effect="read")]))
    assert decisions(plans_of(plan(path, "--input-format", "json"))["t1"]) == [("a", "replay", ["declared_read", "arguments_not_recorded"], [])]
    assert_rejected(plan(path, "--input-format", "csv"), "line 1: the CSV header must name at least tool and call_id (or id)")
    assert_rejected(plan(path, "--input-format", "ndjson"), "line 1: row: a row must be an object, not list")
    assert_rejected(plan(path, "--input-format", "otlp-json"), "line 1: not an ExportTraceServiceRequest object")


def test_reading_from_stdin():
    text = (ROOT / "examples" / "reads_only.csv").read_text()
    proc = run("plan", "-", stdin=text)
    plan_json = plans_of(proc)["t-reads"]
    assert plan_json["replayClass"] == "dynamic"
    assert [d[:3] for d in decisions(plan_json)] == [
        ("r1", "replay", ["declared_read"]),
        ("r2", "replay", ["declared_read"]),
        ("r3", "replay", ["declared_read"]),
    ]


def test_config_tool_rules_change_an_unknown_effect_to_read(tmp_path):
    path = write_rows(tmp_path, [{"trace_id": "t1", "call_id": "a", "tool": "read_file", "status": "ok", "arguments": {"p": "x"}}])
    before = plans_of(plan(path))["t1"]
    assert decisions(before) == [("a", "review", ["effect_unknown"], [])]
    config = tmp_path / "tracefence.yaml"
    config.write_text('tool_rules:\n  - match: "read_*"\n    effect: read\n')
    after = plans_of(run("--config", str(config), "plan", str(path)))["t1"]
    assert decisions(after) == [("a", "replay", ["declared_read"], [])]
    assert after["replayClass"] == "dynamic"
    assert after["steps"][0]["step"]["effectSource"] == "config"


def test_bad_config_file_is_exit_2(tmp_path):
    config = tmp_path / "tracefence.yaml"
    config.write_text("tool_rules:\n  - match: x\n    effect: delete\n")
    proc = run("--config", str(config), "plan", str(ROOT / "examples" / "reads_only.csv"))
    assert proc.returncode == 2
    assert "tool_rules.0.effect" in proc.stderr and str(config) in proc.stderr


def _pager_request() -> dict:
    return json.loads((ROOT / "examples" / "pager_static.otlp.json").read_text())


def test_otlp_json_one_request_per_line_like_the_collector_file_exporter(tmp_path):
    request = _pager_request()
    resource = request["resourceSpans"][0]
    lines = []
    for span in resource["scopeSpans"][0]["spans"]:
        lines.append(json.dumps({"resourceSpans": [{"resource": resource["resource"], "scopeSpans": [{"scope": {"name": "x"}, "spans": [span]}]}]}))
    per_line = tmp_path / "spans.jsonl"
    per_line.write_text("\n".join(reversed(lines)) + "\n")
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(request, indent=2))
    a, b = plan(per_line), plan(pretty)
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout == b.stdout  # byte for byte, whatever the layout and order
    plan_json = plans_of(a)["7402c1c0f94fb996cf55186a7131194f"]
    assert plan_json["replayClass"] == "static"
    assert [d[:3] for d in decisions(plan_json)] == [
        ("c1", "replay", ["declared_read"]),
        ("c2", "replay", ["declared_read"]),
        ("c3", "skip", ["write_committed", "result_not_recorded", "unrecorded_result_may_be_consumed"]),
        ("c4", "skip", ["write_committed", "may_consume_unrecorded_result"]),
    ]


def test_otlp_json_bad_line_names_the_line(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(_request(_span("1111111111111111", "x"))) + "\n{not json\n")
    assert_rejected(plan(path), "line 2: not JSON")


def test_json_output_parses_into_the_trace_plan_message(tmp_path):
    path = write_rows(
        tmp_path,
        [row("a", "ticket.update", arguments={"t": 1}, idempotency_key="k"), row("b", "ticket.update", arguments={"t": 2}, idempotency_key="k"), dict(row("c", "read_file", "read"), trace_id="t2")],
    )
    proc = plan(path)
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    parsed = [plan_from_json(line) for line in lines]
    assert [(p.trace_id, p.schema_version, p.replay_class) for p in parsed] == [("t1", "1", 4), ("t2", "1", 1)]
    assert [(s.step.call_id, s.decision, list(s.reasons), list(s.related_call_ids), s.step.idempotency_key) for s in parsed[0].steps] == [
        ("a", 4, ["idempotency_key_conflict", "result_not_recorded"], ["b"], "k"),
        ("b", 4, ["idempotency_key_conflict", "result_not_recorded"], ["a"], "k"),
    ]
    assert not parsed[1].steps[0].step.HasField("idempotency_key")


def test_every_example_output_parses_into_the_trace_plan_message():
    for example in sorted((ROOT / "examples").glob("*.*")):
        if example.suffix in (".yaml",):
            continue
        proc = plan(example)
        assert proc.returncode == 0, (example, proc.stderr)
        for line in proc.stdout.splitlines():
            message = plan_from_json(line)
            assert message.schema_version == "1"
            assert len(message.steps) >= 1


def test_a_status_otlp_does_not_define_holds_the_span(tmp_path):
    # A status written another way cannot be read: the span stands in as unreadable. An integer code OTLP does not
    # define is read with the rest of the span, its step held at status (its effect read: DECISIONS 305).
    for status, message, reasons in (
        ("ERROR", "status: must be an object with a code, got 'ERROR'", ["malformed_status", "effect_unknown", "arguments_not_recorded"]),
        ({"code": 7}, "status: status code 7 is not one of 0 (unset), 1 (ok), 2 (error): not understood",
         ["malformed_status", "write_status_unknown", "arguments_not_recorded"]),
        # a code that is a list or an object is no code (found by a fresh user: it was a TypeError in every door)
        ({"code": [2]}, "status: code [2] is not one of 0 (unset), 1 (ok), 2 (error)", ["malformed_status", "effect_unknown", "arguments_not_recorded"]),
        ({"code": {"v": 2}}, "status: code {'v': 2} is not one of 0 (unset), 1 (ok), 2 (error)",
         ["malformed_status", "effect_unknown", "arguments_not_recorded"]),
    ):  # fmt: skip
        write = _span("2222222222222222", "charge", tracefence__effect="write")
        write["status"] = status
        path = tmp_path / "trace.otlp.json"
        path.write_text(json.dumps(_request(write)))
        proc = plan(path)
        assert f"warning: line 1, span 2222222222222222: {message}" in proc.stderr
        assert decisions(plans_of(proc)[TRACE]) == [("2222222222222222", "review", reasons, [])]


def test_a_json_key_given_twice_rejects_the_otlp_file(tmp_path):
    text = json.dumps(_request(_span("2222222222222222", "charge", tracefence__effect="write", tracefence__status="timeout")))
    path = tmp_path / "trace.otlp.json"
    path.write_text(text[:-1] + ', "resourceSpans": []}')
    assert_rejected(plan(path), "line 1: a JSON object gives the key 'resourceSpans' twice: which value was meant cannot be known")


def test_spans_under_the_pre_1_0_name_are_read_and_under_an_unknown_one_reject_the_file(tmp_path):
    request = _request(_span("2222222222222222", "charge", tracefence__effect="write", tracefence__status="timeout"))
    resource = request["resourceSpans"][0]
    resource["instrumentationLibrarySpans"] = resource.pop("scopeSpans")
    path = tmp_path / "trace.otlp.json"
    path.write_text(json.dumps(request))
    assert decisions(plans_of(plan(path))[TRACE]) == [("2222222222222222", "review", ["write_timeout", "arguments_not_recorded"], [])]
    resource["libSpans"] = resource.pop("instrumentationLibrarySpans")
    path.write_text(json.dumps(request))
    assert_rejected(plan(path), "line 1: libSpans: resourceSpans has a key OTLP/JSON does not define, holding an array: spans under it would be missed")


def test_an_unclosed_quote_in_csv_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "unclosed.csv"
    path.write_text('call_id,tool,effect,status\n"c1,t,write,ok\n')
    result = run("plan", str(path))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"tracefence plan: {path}: line 2: row: not CSV: unexpected end of data",
        f"tracefence plan: {path}: rejected, 1 error(s); nothing was planned",
    ]
