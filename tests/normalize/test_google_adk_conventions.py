"""Google ADK's own telemetry, as ADK 2.x writes it (docs/DECISIONS.md 550-552; the conformance matrix's
``google_adk`` row runs the real framework): the ``<not specified>`` call id of a tool span whose tool raised,
ReflectAndRetryToolPlugin's failure response on a span left unset, and the ``execute_tool (merged)`` summary span
of parallel calls that records no result under the default schema (v2). Each with the variants that must still
be held (fail closed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from door_agreement import class_of, cli_plans, decisions, otlp_file, processor_disagreements, service_disagreements
from otlp_json_helpers import json_span

from otel_tracefence.normalize.span_kinds import call_id

TRACE = "a7" * 16
AGENT, MODEL, TOOL, TOOL2, MERGED = "b1" * 8, "b2" * 8, "b3" * 8, "b4" * 8, "b5" * 8
INVOICE = {"customer": "a", "amount_cents": 1200}
MS = 1_000_000


def _at(span: dict, start_ms: int, end_ms: int, error: bool = False) -> dict:
    span["startTimeUnixNano"] = str(1_700_000_000_000 * MS + start_ms * MS)
    span["endTimeUnixNano"] = str(1_700_000_000_000 * MS + end_ms * MS)
    if error:
        span["status"] = {"code": 2, "message": "RuntimeError"}
    return span


def _agent() -> dict:
    return _at(json_span(TRACE, AGENT, "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}), 0, 100)


def _model(*calls: tuple[str, str, dict]) -> dict:
    """ADK's v2 ``generate_content`` span: the requested calls as tool_call parts of gen_ai.output.messages."""
    parts = [{"id": cid, "name": name, "arguments": args, "type": "tool_call"} for cid, name, args in calls]
    output = json.dumps([{"role": "assistant", "parts": parts, "finish_reason": ""}])
    attributes = {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "m", "gen_ai.output.messages": output}
    return _at(json_span(TRACE, MODEL, "generate_content m", AGENT, **attributes), 1, 9)


def _tool(span_id: str, name: str, cid: str, args: dict, result: Any | None, effect: str, start: int, end: int, error: bool = False) -> dict:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "FunctionTool",
                                  "gen_ai.tool.call.id": cid, "gen_ai.tool.call.arguments": json.dumps(args), "tracefence.effect": effect}  # fmt: skip
    if result is not None:
        attributes["gen_ai.tool.call.result"] = json.dumps(result)
    if error:
        attributes["error.type"] = "RuntimeError"
    return _at(json_span(TRACE, span_id, f"execute_tool {name}", AGENT, **attributes), start, end, error)


def _merged(start: int, end: int, **extra: Any) -> dict:
    """ADK 2.x's summary under schema v2: a placeholder name, the merged event's id, no arguments, no result."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "(merged tools)", "gen_ai.tool.description": "(merged tools)",
                  "gen_ai.tool.call.id": "6d0c-merged-event", "gcp.vertex.agent.event_id": "6d0c-merged-event", **extra}  # fmt: skip
    return _at(json_span(TRACE, MERGED, "execute_tool (merged)", AGENT, **attributes), start, end)


def _plan(tmp_path: Path, *spans: dict) -> tuple[str, list]:
    (plan,) = cli_plans(otlp_file(tmp_path / "adk.json", *spans)).values()
    return class_of(plan), decisions(plan)


# --- 550: "<not specified>" is no call id ------------------------------------------------------------------


def test_adk_placeholder_call_id_reads_as_none() -> None:
    assert call_id({"gen_ai.tool.call.id": "<not specified>"}) is None
    assert call_id({"gen_ai.tool.call.id": "call_c1"}) == "call_c1"


def test_a_raised_tool_span_with_adks_placeholder_id_is_the_step_the_model_requested(tmp_path: Path) -> None:
    spans = (_agent(), _model(("call_c1", "charge_card", INVOICE)), _tool(TOOL, "charge_card", "<not specified>", INVOICE, None, "write", 10, 20, error=True))
    assert _plan(tmp_path, *spans) == ("review", [("charge_card", "review", ["write_error"])])


def test_a_placeholder_id_span_with_other_arguments_leaves_the_request_held(tmp_path: Path) -> None:
    spans = (_agent(), _model(("call_c1", "charge_card", INVOICE)), _tool(TOOL, "charge_card", "<not specified>", {"customer": "b"}, None, "write", 10, 20, error=True))
    assert _plan(tmp_path, *spans) == (
        "review", [("charge_card", "review", ["effect_unknown", "requested_not_recorded"]), ("charge_card", "review", ["write_error"])],
    )


# --- 551: ReflectAndRetryToolPlugin's failure response -----------------------------------------------------

REFLECT = {"response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN", "error_type": "ConnectionError",
           "error_details": "billing API reset the connection", "retry_count": 1, "reflection_guidance": "try again"}  # fmt: skip


def test_reflect_and_retry_failure_response_on_an_unset_span_holds_the_write(tmp_path: Path) -> None:
    spans = (_agent(), _model(("call_w1", "create_invoice", INVOICE)), _tool(TOOL, "create_invoice", "call_w1", INVOICE, REFLECT, "write", 10, 20))
    assert _plan(tmp_path, *spans) == ("review", [("create_invoice", "review", ["write_error", "error_in_result"])])


def test_a_read_answered_by_the_plugin_still_replays(tmp_path: Path) -> None:
    spans = (_agent(), _model(("call_r1", "lookup", {"q": "a"})), _tool(TOOL, "lookup", "call_r1", {"q": "a"}, REFLECT, "read", 10, 20))
    assert _plan(tmp_path, *spans) == ("dynamic", [("lookup", "replay", ["declared_read", "error_in_result"])])


# --- 552: the result-less summary span of parallel calls ---------------------------------------------------

CALLS = (("call_r1", "lookup", {"q": "a"}), ("call_r2", "lookup_order", {"order": "o-7"}))


def _parallel(merged: dict, second_end: int = 30) -> tuple:
    return (
        _agent(), _model(*CALLS),
        _tool(TOOL, "lookup", "call_r1", {"q": "a"}, {"result": "ok"}, "read", 10, 20),
        _tool(TOOL2, "lookup_order", "call_r2", {"order": "o-7"}, {"result": "ok"}, "read", 11, second_end),
        merged,
    )


READS = [("lookup", "replay", ["declared_read"]), ("lookup_order", "replay", ["declared_read"])]


def test_adks_result_less_merged_span_after_two_calls_is_no_step(tmp_path: Path, upstream: Any) -> None:
    path = otlp_file(tmp_path / "adk.json", *_parallel(_merged(31, 32)))
    plans = cli_plans(path)
    (plan,) = plans.values()
    assert (class_of(plan), decisions(plan)) == ("dynamic", READS)
    assert processor_disagreements(path, plans) == []
    assert service_disagreements(path, plans, upstream, tmp_path) == []


@pytest.mark.parametrize("merged,second_end", [
    (_merged(25, 32), 30),  # one call still ran when it started
    (_merged(31, 32, **{"gen_ai.tool.call.result": ""}), 30),  # an empty result is a result, naming nothing
    (_merged(31, 32, **{"tracefence.effect": "write"}), 30),  # labelled by its producer
    (_merged(31, 32, **{"gen_ai.tool.call.arguments": '{"invoice": "I-1"}'}), 30),  # arguments of a call
], ids=["a call ran past its start", "empty result", "labelled", "real arguments"])
def test_a_result_less_placeholder_span_not_surely_a_summary_stays_a_step(tmp_path: Path, merged: dict, second_end: int) -> None:
    _, steps = _plan(tmp_path, *_parallel(merged, second_end))
    assert sorted(s[0] for s in steps) == ["(merged tools)", "lookup", "lookup_order"]


def test_a_result_less_placeholder_span_after_one_call_stays_a_step(tmp_path: Path) -> None:
    spans = (_agent(), _model(CALLS[0]), _tool(TOOL, "lookup", "call_r1", {"q": "a"}, {"result": "ok"}, "read", 10, 20), _merged(31, 32))
    assert _plan(tmp_path, *spans) == ("review", [("lookup", "replay", ["declared_read"]), ("(merged tools)", "review", ["effect_unknown", "arguments_not_recorded"])])
