"""Retries across traces through ``tracefence plan`` (issue 25, docs/DECISIONS.md 590-594): one file, the
traces planned in the order they ended, one write index shared by them.

The issue's three traces: t-1 ``invoice.create`` timed out (key ``inv-9``); t-2 the same call (same key
and arguments) committed; t-3 key ``inv-9`` with another amount.
"""

from __future__ import annotations

import json

from cli_helpers import run
from otlp_json_helpers import json_value

T1, T2, T3 = ("a1" * 16), ("b2" * 16), ("c3" * 16)
SECOND = 1_000_000_000
BASE = 1_700_000_000 * SECOND


def _write(trace_id: str, span_id: str, at_s: int, amount: int, *, timed_out: bool = False, key: str | None = "inv-9") -> dict:
    arguments = {"customer": "c-1", "amount_cents": amount}
    if key is not None:
        arguments["idempotency_key"] = key
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "invoice.create",
        "gen_ai.tool.call.id": f"call-{span_id[:4]}",
        "gen_ai.tool.call.arguments": json.dumps(arguments),
        "tracefence.effect": "write",
    }
    if timed_out:
        attributes["error.type"] = "TimeoutError"
    else:
        attributes["gen_ai.tool.call.result"] = json.dumps({"invoice": "in_1"})
    return {
        "traceId": trace_id, "spanId": span_id, "name": "execute_tool invoice.create",
        "startTimeUnixNano": str(BASE + at_s * SECOND), "endTimeUnixNano": str(BASE + at_s * SECOND + SECOND // 2),
        "status": {"code": 2, "message": "timed out"} if timed_out else {"code": 1},
        "attributes": [{"key": k, "value": json_value(v)} for k, v in attributes.items()],
    }  # fmt: skip


def _file(tmp_path, *spans: dict):
    path = tmp_path / "traces.otlp.json"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "agent"}, "spans": list(spans)}]}]}))
    return path


def _plans(path, *extra: str) -> dict:
    done = run("plan", str(path), "--format", "json", *extra)
    assert done.returncode in (0, 1), done.stderr
    plans = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {p["traceId"]: p for p in plans}


def _step(plan: dict) -> tuple:
    (step,) = plan["steps"]
    return (step["decision"], step["reasons"], [(r["traceId"], r["callId"], r["reason"]) for r in step.get("relatedTraces", [])])


def test_a_retry_of_a_timed_out_write_and_a_reused_key_name_the_earlier_trace(tmp_path):
    # Written out of order: the file's order is not the order the traces ended in.
    path = _file(tmp_path, _write(T3, "3333333333333333", 20, 990), _write(T1, "1111111111111111", 0, 1200, timed_out=True), _write(T2, "2222222222222222", 10, 1200))
    plans = _plans(path)
    assert [plans[t]["replayClass"] for t in (T1, T2, T3)] == ["review"] * 3
    assert _step(plans[T1]) == ("review", ["write_timeout"], [])
    assert _step(plans[T2]) == ("review", ["retry_of_held_write"], [(T1, "call-1111", "retry_of_held_write")])
    assert _step(plans[T3]) == (
        "conflict",
        ["idempotency_key_reused_across_traces"],
        [(T1, "call-1111", "idempotency_key_reused_across_traces"), (T2, "call-2222", "idempotency_key_reused_across_traces")],
    )


def test_a_repeat_of_a_committed_write_with_its_key_stays_skip_with_a_note(tmp_path):
    plans = _plans(_file(tmp_path, _write(T1, "1111111111111111", 0, 1200), _write(T2, "2222222222222222", 10, 1200)))
    assert _step(plans[T1]) == ("skip", ["write_committed"], [])
    assert _step(plans[T2]) == ("skip", ["write_committed", "repeats_committed_write"], [(T1, "call-1111", "repeats_committed_write")])
    assert plans[T2]["replayClass"] == "injected"


def test_without_a_key_the_same_arguments_retrying_a_held_write_are_held(tmp_path):
    plans = _plans(_file(tmp_path, _write(T1, "1111111111111111", 0, 1200, timed_out=True, key=None), _write(T2, "2222222222222222", 10, 1200, key=None), _write(T3, "3333333333333333", 20, 990, key=None)))
    assert _step(plans[T2]) == ("review", ["retry_of_held_write"], [(T1, "call-1111", "retry_of_held_write")])
    assert _step(plans[T3]) == ("skip", ["write_committed"], [])  # other arguments, no key: another write


def test_reads_never_match_and_the_index_can_be_turned_off(tmp_path):
    read = _write(T2, "2222222222222222", 10, 1200)
    read["attributes"] = [a if a["key"] != "tracefence.effect" else {"key": "tracefence.effect", "value": {"stringValue": "read"}} for a in read["attributes"]]
    plans = _plans(_file(tmp_path, _write(T1, "1111111111111111", 0, 1200, timed_out=True), read))
    assert _step(plans[T2]) == ("replay", ["declared_read"], [])
    config = tmp_path / "tracefence.yaml"
    config.write_text("write_index_max_entries: 0\n")
    plans = _plans(_file(tmp_path, _write(T1, "1111111111111111", 0, 1200, timed_out=True), _write(T2, "2222222222222222", 10, 1200)), "--config", str(config))
    assert _step(plans[T2]) == ("skip", ["write_committed"], [])


def test_the_table_names_the_earlier_call(tmp_path):
    path = _file(tmp_path, _write(T1, "1111111111111111", 0, 1200, timed_out=True), _write(T2, "2222222222222222", 10, 1200))
    done = run("plan", str(path), "--format", "table")
    rows = [line.split() for line in done.stdout.splitlines()]
    assert rows[0] == ["trace", "class", "call_id", "tool", "effect", "status", "decision", "reasons", "related"]
    assert rows[2] == [T2, "review", "call-2222", "invoice.create", "write", "ok", "review", "retry_of_held_write", f"{T1}/call-1111"]


def test_a_span_flagged_retries_unchecked_by_a_serve_is_understood(tmp_path):
    span = _write(T1, "1111111111111111", 0, 1200)
    span["attributes"].append({"key": "tracefence.trace.retries_unchecked", "value": json_value(True)})
    assert _step(_plans(_file(tmp_path, span))[T1]) == ("skip", ["write_committed"], [])
