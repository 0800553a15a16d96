"""An idempotency-key header recorded on the tool span itself (``http.request.header.idempotency-key`` and its
spellings) is read whether or not the span also records an HTTP method (docs/DECISIONS.md 503): a producer that puts
the key it sends on the tool span, with no ``http.request.method``, gives the step its key, and two writes sharing it
with different arguments are a key conflict. Before, headers on a tool span were read only beside a method."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run
from otlp_json_helpers import json_span
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.step import span_to_step

TRACE = "7e" * 16
ROOT = "a0" * 8
KEY = "payout-V-3391-2026-05"


def _payout(span_id: str, call_id: str, amount: int, headers: dict) -> dict:
    return json_span(TRACE, span_id, "execute_tool payouts.send", ROOT, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payouts.send", "gen_ai.tool.call.id": call_id, "tracefence.effect": "write",
        "gen_ai.tool.call.arguments": json.dumps({"vendor": "V-3391", "amount": amount}), "gen_ai.tool.call.result": '{"payout": "po_1"}', **headers})  # fmt: skip


def _plan(path: Path, *spans: dict) -> dict:
    root = json_span(TRACE, ROOT, "invoke_agent payouts", **{"gen_ai.operation.name": "invoke_agent"})
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, *spans]}]}]}))
    proc = run("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    return json.loads(line)


def _steps(plan: dict) -> list[tuple]:
    return [(s["step"]["callId"], s["decision"], s["reasons"], s["step"].get("idempotencyKey")) for s in plan["steps"]]


SPELLINGS = {
    "semconv-array": {"http.request.header.idempotency-key": [KEY]},
    "plain-string": {"http.request.header.idempotency-key": KEY},
    "header-case": {"http.request.header.Idempotency-Key": [KEY]},
    "x-form": {"http.request.header.x-idempotency-key": [KEY]},
    "grpc-metadata": {"rpc.grpc.request.metadata.idempotency-key": [KEY]},
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_one_key_on_two_tool_spans_with_two_amounts_is_a_key_conflict(tmp_path: Path, spelling: str) -> None:
    headers = SPELLINGS[spelling]
    plan = _plan(tmp_path / "t.json", _payout("b1" * 8, "call-1", 12500, headers), _payout("b2" * 8, "call-2", 21500, headers))
    assert plan["replayClass"] == "review"
    assert _steps(plan) == [
        ("call-1", "conflict", ["idempotency_key_conflict"], KEY),
        ("call-2", "conflict", ["idempotency_key_conflict"], KEY),
    ]


def test_the_span_path_reads_the_key_and_a_disagreeing_declared_key_holds_the_step() -> None:
    config = TraceFenceConfig()
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payouts.send", "gen_ai.tool.call.id": "c1", "tracefence.effect": "write",
                  "gen_ai.tool.call.arguments": "{}", "http.request.header.idempotency-key": [KEY]}  # fmt: skip
    view = SpanView(TRACE, "b1" * 8, "execute_tool payouts.send", attributes, start_time_unix_nano=1, end_time_unix_nano=2)
    step = span_to_step(view, config)
    assert (step.idempotency_key, step.malformed) == (KEY, ())
    declared = SpanView(TRACE, "b1" * 8, "execute_tool payouts.send", {**attributes, "tracefence.idempotency_key": "other"}, start_time_unix_nano=1, end_time_unix_nano=2)
    step = span_to_step(declared, config)
    assert step.idempotency_key == "other"
    assert [(f.field, f.reason_code) for f in step.malformed] == [("idempotency_key", "malformed_idempotency_key")]


def test_a_replayed_response_header_on_the_tool_span_is_noted() -> None:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payouts.send", "gen_ai.tool.call.id": "c1", "tracefence.effect": "write",
                  "gen_ai.tool.call.arguments": "{}", "http.response.header.idempotent-replayed": ["true"]}  # fmt: skip
    step = span_to_step(SpanView(TRACE, "b1" * 8, "execute_tool payouts.send", attributes, start_time_unix_nano=1, end_time_unix_nano=2), TraceFenceConfig())
    assert step.notes == ("response_replayed",)
