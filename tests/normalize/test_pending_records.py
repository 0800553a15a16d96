"""Pending records and pause records (docs/DECISIONS.md 600-601; the conformance matrix's approval cells run the real
frameworks): a tool span recording a call held for human approval, superseded by the call's run after the resume,
and an agent span's record of its pause for human input, which requests nothing. Each with the variants that must
still be held (fail closed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from door_agreement import class_of, cli_plans, decisions, otlp_file, processor_disagreements, service_disagreements
from otlp_json_helpers import json_span, json_value

TRACE = "c4" * 16
SESSION, RUN1, MODEL1, PENDING, RUN2, RESUMED, MODEL2, EXTRA = ("d1" * 8, "d2" * 8, "d3" * 8, "d4" * 8, "d5" * 8, "d6" * 8, "d7" * 8, "d8" * 8)
INVOICE = {"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}
ADK_PENDING = {"error": "This tool call requires confirmation, please approve or reject."}
MS = 1_000_000


def _at(span: dict, start_ms: int, end_ms: int, error: bool = False) -> dict:
    span["startTimeUnixNano"] = str(1_700_000_000_000 * MS + start_ms * MS)
    span["endTimeUnixNano"] = str(1_700_000_000_000 * MS + end_ms * MS)
    if error:
        span["status"] = {"code": 2, "message": "RuntimeError"}
    return span


def _agent(span_id: str, start: int, end: int) -> dict:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}
    return _at(json_span(TRACE, span_id, "billing.agent", SESSION, **attributes), start, end)


def _model(span_id: str, parent: str, start: int, end: int, *calls: tuple[str, str, dict]) -> dict:
    parts = [{"type": "tool_call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls] or [{"type": "text", "content": "done"}]
    output = json.dumps([{"role": "assistant", "parts": parts, "finish_reason": "tool_call" if calls else "stop"}])
    return _at(json_span(TRACE, span_id, "openai.response", parent, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": output}), start, end)


def _tool(span_id: str, parent: str, start: int, end: int, result: Any = None, call_id: str | None = None, error: bool = False, **extra: Any) -> dict:
    """A tool span as OpenLLMetry's OpenAI Agents instrumentation writes it (no call id), or ADK's (``call_id``)."""
    attributes: dict[str, Any] = {"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_invoice",
                                  "gen_ai.tool.call.arguments": json.dumps(INVOICE), **extra}  # fmt: skip
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result if isinstance(result, str) else json.dumps(result)
    return _at(json_span(TRACE, span_id, "create_invoice.tool", parent, **attributes), start, end, error)


def _ran(start: int = 160) -> dict:
    """The call's run after the resume: labelled by its body, a result."""
    return _tool(RESUMED, RUN2, start, start + 10, "invoice inv_8812", **{"tracefence.effect": "write", "tracefence.idempotency_key": "inv-17"})


def _session(end: int = 300) -> dict:
    return _at(json_span(TRACE, SESSION, "billing session"), 0, end)


def _interrupted_and_resumed(pending: dict | None = None, *more: dict, resumed: dict | None = None) -> tuple:
    return (
        _session(), _agent(RUN1, 0, 100), _model(MODEL1, RUN1, 1, 9, ("call_w1", "create_invoice", INVOICE)),
        pending if pending is not None else _tool(PENDING, RUN1, 10, 20),
        _agent(RUN2, 150, 300), resumed if resumed is not None else _ran(), _model(MODEL2, RUN2, 180, 190), *more,
    )


def _plan(tmp_path: Path, *spans: dict) -> tuple[str, list]:
    (plan,) = cli_plans(otlp_file(tmp_path / "pending.json", *spans)).values()
    return class_of(plan), decisions(plan)


COMMITTED_AFTER_RESUME = ("injected", [("create_invoice", "skip", ["write_committed", "resumes_pending_call"])])


# --- 600: a pending record is superseded by the call's run after the resume -----------------------------------


def test_an_approval_pending_span_and_the_resumed_run_are_one_committed_write(tmp_path: Path, upstream: Any) -> None:
    path = otlp_file(tmp_path / "pending.json", *_interrupted_and_resumed())
    plans = cli_plans(path)
    (plan,) = plans.values()
    assert (class_of(plan), decisions(plan)) == COMMITTED_AFTER_RESUME
    assert processor_disagreements(path, plans) == []
    assert service_disagreements(path, plans, upstream, tmp_path) == []


def test_a_framework_pending_answer_sharing_the_call_id_is_superseded_too(tmp_path: Path) -> None:
    spans = _interrupted_and_resumed(
        _tool(PENDING, RUN1, 10, 20, ADK_PENDING, call_id="call_w1"),
        resumed=_tool(RESUMED, RUN2, 160, 170, {"result": "invoice inv_8812"}, call_id="call_w1", **{"tracefence.effect": "write"}),
    )
    assert _plan(tmp_path, *spans) == COMMITTED_AFTER_RESUME


def test_a_pending_span_that_never_resumed_is_held(tmp_path: Path) -> None:
    spans = (_session(), _agent(RUN1, 0, 100), _model(MODEL1, RUN1, 1, 9, ("call_w1", "create_invoice", INVOICE)), _tool(PENDING, RUN1, 10, 20))
    assert _plan(tmp_path, *spans) == ("review", [("create_invoice", "review", ["effect_unknown"])])


def test_a_framework_pending_answer_that_never_resumed_is_held_and_noted(tmp_path: Path) -> None:
    spans = (_session(), _agent(RUN1, 0, 100), _model(MODEL1, RUN1, 1, 9, ("call_w1", "create_invoice", INVOICE)),
             _tool(PENDING, RUN1, 10, 20, ADK_PENDING, call_id="call_w1", **{"tracefence.effect": "write"}))  # fmt: skip
    assert _plan(tmp_path, *spans) == ("review", [("create_invoice", "review", ["write_error", "error_in_result", "approval_pending"])])


def test_a_rejection_is_no_pending_answer(tmp_path: Path) -> None:
    spans = (_session(), _agent(RUN1, 0, 100), _model(MODEL1, RUN1, 1, 9, ("call_w1", "create_invoice", INVOICE)),
             _tool(PENDING, RUN1, 10, 20, {"error": "This tool call is rejected."}, call_id="call_w1"))  # fmt: skip
    assert _plan(tmp_path, *spans) == ("review", [("create_invoice", "review", ["effect_unknown", "error_in_result"])])


HTTP_BELOW = _at(json_span(TRACE, EXTRA, "POST", PENDING, **{"http.request.method": "POST", "url.full": "https://billing.example/invoices",
                                                           "http.response.status_code": 201}), 12, 18)  # fmt: skip


@pytest.mark.parametrize("spans", [
    _interrupted_and_resumed(None, _model(EXTRA, RUN1, 25, 30)),  # the run went on: a model call after it
    _interrupted_and_resumed(None, _model(EXTRA, RUN2, 151, 155, ("call_w2", "create_invoice", INVOICE))),  # asked again before the run
    _interrupted_and_resumed(_tool(PENDING, RUN1, 10, 20, **{"tracefence.effect": "write"})),  # its body labelled it: it ran
    _interrupted_and_resumed(_tool(PENDING, RUN1, 10, 20, error=True)),  # it failed
    _interrupted_and_resumed(_tool(PENDING, RUN1, 10, 20, ADK_PENDING, call_id="call_w1", error=True),
                             resumed=_tool(RESUMED, RUN2, 160, 170, "ok", call_id="call_w1")),  # a pending answer on a failed span
    _interrupted_and_resumed(_tool(PENDING, RUN1, 10, 20), HTTP_BELOW),  # a request below it
    _interrupted_and_resumed(_tool(PENDING, RUN1, 10, 20, call_id="call_w1"), resumed=_tool(RESUMED, RUN2, 160, 170, "ok", call_id="call_w9")),
    _interrupted_and_resumed(None, resumed=_tool(RESUMED, RUN2, 160, 170, "ok", **{"gen_ai.tool.call.arguments": '{"customer": "b"}'})),
    _interrupted_and_resumed(None, resumed=_tool(RESUMED, RUN1, 30, 40, "ok")),  # the same agent run
    (_session(), _model(MODEL1, SESSION, 1, 9, ("call_w1", "create_invoice", INVOICE)), _tool(PENDING, SESSION, 10, 20), _tool(RESUMED, SESSION, 160, 170, "ok")),
], ids=["run went on", "asked again", "labelled", "error", "pending answer, error", "request below", "other call id", "other arguments", "same run", "no agent span"])
def test_a_span_not_surely_a_pending_record_stays_a_step(tmp_path: Path, spans: tuple) -> None:
    _, steps = _plan(tmp_path, *spans)
    assert len([s for s in steps if s[0] == "create_invoice"]) >= 2
    assert all("resumes_pending_call" not in s[2] for s in steps)


# --- 601: an agent span's record of its pause for human input requests nothing ---------------------------------

STRANDS_PAUSE = "[{'id': 'v1:before_tool_call:call_w1:c0e8', 'name': 'approve_invoice', 'reason': 'APPROVAL', 'response': None}]"


def _event(name: str, **attributes: Any) -> dict:
    return {"name": name, "timeUnixNano": str(1_700_000_000_000 * MS), "attributes": [{"key": k, "value": json_value(v)} for k, v in attributes.items()]}


def _strands(operation: str, finish_reason: str) -> tuple:
    """Strands' agent span ending on an interrupt (its gen_ai.choice message is str(AgentResult)), the chat span
    whose model asked for the call, and no tool span (the hook paused before the call)."""
    use = json.dumps([{"toolUse": {"toolUseId": "call_w1", "name": "create_invoice", "input": INVOICE}}])
    agent = json_span(TRACE, RUN1, f"{operation} Strands Agents", SESSION, [_event("gen_ai.choice", message=STRANDS_PAUSE, finish_reason=finish_reason)],
                      **{"gen_ai.operation.name": operation, "gen_ai.agent.name": "Strands Agents"})  # fmt: skip
    chat = json_span(TRACE, MODEL1, "chat", RUN1, [_event("gen_ai.choice", message=use, finish_reason="tool_use")], **{"gen_ai.operation.name": "chat"})
    return _session(), _at(agent, 0, 100), _at(chat, 1, 9)


NEVER_RAN = [("create_invoice", "review", ["effect_unknown", "requested_not_recorded"])]


def test_an_agent_spans_interrupt_record_is_no_requested_call(tmp_path: Path) -> None:
    assert _plan(tmp_path, *_strands("invoke_agent", "interrupt")) == ("review", NEVER_RAN)


@pytest.mark.parametrize("operation,finish_reason", [("invoke_agent", "end_turn"), ("chat", "interrupt")], ids=["no pause", "not an agent span"])
def test_unparsable_output_naming_tools_elsewhere_is_still_unread(tmp_path: Path, operation: str, finish_reason: str) -> None:
    _, steps = _plan(tmp_path, *_strands(operation, finish_reason))
    assert [s for s in steps if s[1] == "review" and "requested_call_unread" in s[2]] != []
    assert NEVER_RAN[0] in steps
