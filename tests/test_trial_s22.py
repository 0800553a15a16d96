"""The fail-open defects left by the fifth trials (s22, docs/DECISIONS.md 300-319): exact decisions, reasons and
classes through the doors a user runs (``tracefence plan`` as a subprocess, the service, the processor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from test_cli import run

TRACE = "5a" * 16
ROOT_SPAN, MIDDLE, TOOL = "aa" * 8, "cc" * 8, "bb" * 8


def _value(value: Any) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": value}


def _span(span_id: str, name: str, parent: str = "", **attributes: Any) -> dict:
    span = {"traceId": TRACE, "spanId": span_id, "name": name, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000100000000",
            "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()]}  # fmt: skip
    if parent:
        span["parentSpanId"] = parent
    return span


def _file(path: Path, *spans: dict) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]}))
    return path


def _tool(tool: str, effect: str, parent: str = ROOT_SPAN, span_id: str = TOOL, **extra: Any) -> dict:
    """A tool step that ended ok with its arguments and result recorded."""
    return _span(span_id, f"execute_tool {tool}", parent, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": "call-1",
                 "tracefence.effect": effect, "gen_ai.tool.call.arguments": '{"amount": 5}', "gen_ai.tool.call.result": '{"id": "ch_1"}', **extra})  # fmt: skip


def _gate(path: Path, fail_on: str) -> tuple[int, dict, list[str]]:
    proc = run("plan", str(path), "--fail-on", fail_on)
    (line,) = proc.stdout.splitlines()
    return proc.returncode, json.loads(line), proc.stderr.splitlines()


# --- 1. --fail-on fails a partial trace, whatever its class (DECISIONS 300) ---------------------------------


PARTIAL_CAUSE = "partial (decided before it was complete, or not whole in this file: steps may be missing)"


def test_fail_on_fails_a_partial_injected_trace(tmp_path: Path) -> None:
    # The root is here, the span between it and the write is not: an `injected` trace, partial. `--fail-on static` passed it.
    path = _file(tmp_path / "t.json", _span(ROOT_SPAN, "invoke_agent a"), _tool("payments.charge", "write", parent=MIDDLE))
    for fail_on in ("injected", "static", "review"):
        code, plan, stderr = _gate(path, fail_on)
        assert (plan["replayClass"], plan["partial"]) == ("REPLAY_CLASS_INJECTED", True)
        assert code == 1
        cause = "write_committed (call call-1)" if fail_on == "injected" else PARTIAL_CAUSE
        assert stderr == [f"tracefence plan: {path}: fail-on {fail_on}: trace {TRACE}: class injected (partial): {cause}"]


@pytest.mark.parametrize("flag", [("tracefence.trace.late", True), ("tracefence.trace.partial", "true"), ("tracefence.trace.reasons", "evicted")])
def test_fail_on_fails_a_trace_a_door_flagged_partial_or_late_even_dynamic_or_tool_free(tmp_path: Path, flag: tuple[str, Any]) -> None:
    key, value = flag
    dynamic = _file(tmp_path / "d.json", _span(ROOT_SPAN, "invoke_agent a"), _tool("accounts.get", "read", **{key: value}))
    code, plan, stderr = _gate(dynamic, "review")
    assert (code, plan["replayClass"], plan["partial"]) == (1, "REPLAY_CLASS_DYNAMIC", True)
    assert stderr == [f"tracefence plan: {dynamic}: fail-on review: trace {TRACE}: class dynamic (partial): {PARTIAL_CAUSE}"]
    tool_free = _file(tmp_path / "n.json", _span(ROOT_SPAN, "invoke_agent a", **{key: value}))
    code, plan, stderr = _gate(tool_free, "review")
    assert (code, plan["replayClass"], plan["partial"]) == (1, "REPLAY_CLASS_UNSPECIFIED", True)
    assert stderr == [f"tracefence plan: {tool_free}: fail-on review: trace {TRACE}: class none (partial): {PARTIAL_CAUSE}"]
    whole = _file(tmp_path / "w.json", _span(ROOT_SPAN, "invoke_agent a"), _tool("accounts.get", "read", **{key: False}))
    code, plan, stderr = _gate(whole, "injected")
    assert (code, plan["replayClass"], plan["partial"], stderr) == (0, "REPLAY_CLASS_DYNAMIC", False, [])
