"""Requested calls in indexed attribute keys, read on whatever span carries them (issue 24, kind C; docs/DECISIONS.md 440).

LiteLLM's OpenTelemetry callback writes a response's tool calls as ``gen_ai.completion.<i>.function_call.{name,arguments}``
(the i-th call in completion slot i, no call id) onto whatever span is current (an ASGI server span), and a later
completion overwrites ``gen_ai.output.messages`` and the finish reasons: the indexed keys are all that is left of the
call. Their siblings (OpenLLMetry's ``tool_calls.<j>``, the Traceloop SDK's ``llm.completions.<i>``, OpenInference's
``llm.output_messages.*``) are read on any span too, so a requested call is never lost for the span it sits on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from otlp_json_helpers import json_span
from door_agreement import class_of, cli_plans, decisions, otlp_file, processor_disagreements, service_disagreements

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize import SpanView
from otel_tracefence.normalize.requested import has_indexed_call_keys
from otel_tracefence.normalize.trace import normalize_trace, quiet

TRACE = "c4" * 16
SERVER, RAW, TOOL = "a1" * 8, "a2" * 8, "a3" * 8
VOID_ARGS = '{"invoice_id": "INV-20931", "reason": "duplicate charge"}'
OVERWRITTEN = {  # the later completion's answer and finish reason, written over the first's
    "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "Voided."}], "finish_reason": "stop"}]',
    "gen_ai.response.finish_reasons": '["stop"]',
}
SERVER_KEYS = {"http.request.method": "POST", "http.route": "/v1/disputes/{dispute_id}/resolve", "url.path": "/v1/disputes/D-1/resolve",
               "http.response.status_code": 200}  # fmt: skip

CARRIERS = {
    "litellm function_call on an ASGI server span": {
        **SERVER_KEYS, "gen_ai.completion.0.function_call.name": "void_invoice", "gen_ai.completion.0.function_call.arguments": VOID_ARGS,
        "gen_ai.request.model": "gpt-4o-mini", **OVERWRITTEN,
    },
    "litellm function_call on a plain span of no kind, no llm.request.type": {
        "gen_ai.completion.0.function_call.arguments": VOID_ARGS, "gen_ai.completion.0.function_call.name": "void_invoice",
    },
    "traceloop llm.completions function_call on a plain span": {
        "llm.completions.0.function_call.name": "void_invoice", "llm.completions.0.function_call.arguments": VOID_ARGS,
        "llm.completions.0.finish_reason": "stop",
    },
    "openllmetry tool_calls on a span with no model kind": {
        **SERVER_KEYS, "gen_ai.completion.0.tool_calls.0.id": "call_V1", "gen_ai.completion.0.tool_calls.0.name": "void_invoice",
        "gen_ai.completion.0.tool_calls.0.arguments": VOID_ARGS, **OVERWRITTEN,
    },
    "openinference output messages on a CHAIN span": {
        "openinference.span.kind": "CHAIN", "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "void_invoice",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": VOID_ARGS,
    },
    "openinference output messages on a span of no kind": {
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "void_invoice",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": VOID_ARGS,
    },
}


def _view(span_id: str, name: str, parent: str = "", **attributes: Any) -> SpanView:
    return SpanView(trace_id=TRACE, span_id=span_id, parent_span_id=parent or None, name=name, attributes=attributes,
                    start_time_unix_nano=1, end_time_unix_nano=2)  # fmt: skip


def _steps(*views: SpanView) -> list[tuple[str, bool, tuple[str, ...]]]:
    steps = normalize_trace(list(views), TraceFenceConfig()).steps
    return [(s.tool, s.requested_only, tuple(m.reason for m in s.malformed)) for s in steps]


@pytest.mark.parametrize("attributes", list(CARRIERS.values()), ids=list(CARRIERS))
def test_a_requested_call_in_indexed_keys_on_any_span_is_a_step(attributes: dict, tmp_path: Path) -> None:
    path = otlp_file(tmp_path / "t.json", json_span(TRACE, SERVER, "POST /v1/disputes/{dispute_id}/resolve", **attributes),
                     json_span(TRACE, RAW, "raw_gen_ai_request", SERVER))  # fmt: skip
    (plan,) = cli_plans(path).values()
    assert class_of(plan) == "review"
    assert decisions(plan) == [("void_invoice", "review", ["effect_unknown", "requested_not_recorded"])]
    assert plan["steps"][0]["step"]["requestedOnly"] is True


def test_a_write_the_model_asked_for_holds_the_trace_through_every_door(tmp_path: Path, upstream: Any) -> None:
    path = otlp_file(tmp_path / "t.json", json_span(TRACE, SERVER, "POST /resolve", **CARRIERS["litellm function_call on an ASGI server span"]),
                     json_span(TRACE, RAW, "raw_gen_ai_request", SERVER))  # fmt: skip
    plans = cli_plans(path)
    assert [class_of(p) for p in plans.values()] == ["review"]
    assert processor_disagreements(path, plans) == []
    assert service_disagreements(path, plans, upstream, tmp_path) == []


def _parallel(tmp_path: Path) -> Path:
    """Two calls of one response (slots 0 and 1, LiteLLM's layout); the app ran the first under a tool span with no call id."""
    server = json_span(TRACE, SERVER, "POST /resolve", **SERVER_KEYS, **OVERWRITTEN, **{
        "gen_ai.completion.0.function_call.name": "get_dispute", "gen_ai.completion.0.function_call.arguments": '{"dispute_id": "D-1"}',
        "gen_ai.completion.1.function_call.name": "void_invoice", "gen_ai.completion.1.function_call.arguments": VOID_ARGS,
    })  # fmt: skip
    tool = json_span(TRACE, TOOL, "execute_tool get_dispute", SERVER, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_dispute",
                     "gen_ai.tool.call.arguments": '{"dispute_id": "D-1"}', "gen_ai.tool.call.result": '{"status": "open"}', "tracefence.effect": "read"})  # fmt: skip
    return otlp_file(tmp_path / "p.json", server, tool)


def test_parallel_calls_each_slot_one_call_the_executed_one_matched_by_content(tmp_path: Path, upstream: Any) -> None:
    path = _parallel(tmp_path)
    plans = cli_plans(path)
    (plan,) = plans.values()
    assert class_of(plan) == "review"
    assert decisions(plan) == [("get_dispute", "replay", ["declared_read"]), ("void_invoice", "review", ["effect_unknown", "requested_not_recorded"])]
    assert processor_disagreements(path, plans) == []
    assert service_disagreements(path, plans, upstream, tmp_path) == []


def test_a_function_call_repeating_the_slots_indexed_call_is_read_once() -> None:
    # OpenLLMetry's legacy path wrote function_call beside tool_calls.0 of the same slot: one call, not two.
    server = _view(SERVER, "POST /resolve", **{
        "gen_ai.completion.0.tool_calls.0.name": "void_invoice", "gen_ai.completion.0.tool_calls.0.arguments": VOID_ARGS,
        "gen_ai.completion.0.function_call.name": "void_invoice", "gen_ai.completion.0.function_call.arguments": VOID_ARGS,
    })  # fmt: skip
    assert _steps(server) == [("void_invoice", True, ())]


def test_a_function_call_with_no_name_is_unread_not_dropped() -> None:
    server = _view(SERVER, "POST /resolve", **SERVER_KEYS, **{"gen_ai.completion.0.function_call.arguments": VOID_ARGS})
    assert _steps(server) == [("POST /resolve", False, ("requested_call_unread",))]


@pytest.mark.parametrize("attributes", [
    {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "No invoice needs voiding.", "gen_ai.completion.0.finish_reason": "stop"},
    {"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Nothing to do."},
    {**SERVER_KEYS, "llm.completions.count": 1},  # no slot index: not a completion's call key
], ids=["litellm text answer", "openinference text answer", "key with no slot index"])
def test_a_text_answer_in_indexed_keys_requests_nothing(attributes: dict) -> None:
    assert _steps(_view(SERVER, "POST /resolve", **attributes)) == []


def test_quiet_asks_for_the_slot_index_after_the_prefix() -> None:
    assert has_indexed_call_keys({"gen_ai.completion.0.function_call.name": "x"})
    assert has_indexed_call_keys({"a": 1, "llm.completions.12.content": "x"})
    assert has_indexed_call_keys({"llm.output_messages.0.message.role": "assistant"})
    assert not has_indexed_call_keys({"gen_ai.completion.tool.name": "x", "xgen_ai.completion.0": 1, "gen_ai.completion": 1})
    assert not has_indexed_call_keys({})
    assert not quiet(_view(SERVER, "plain", **{"gen_ai.completion.0.function_call.name": "void_invoice"}))
    assert quiet(_view(SERVER, "plain", **{"llm.completions.count": 1}))
    assert not quiet(_view(SERVER, "plain", **{"gen_ai.completion": "x"}))  # a whole completion as JSON is read (DECISIONS 978)
