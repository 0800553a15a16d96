"""LangSmith's OpenTelemetry export (langsmith >= 0.3, ``LANGSMITH_TRACING_MODE=otel``; docs/DECISIONS.md 803).

LangSmith writes a run's inputs and outputs as JSON text in ``gen_ai.prompt`` / ``gen_ai.completion`` on every span
(langsmith/_internal/otel/_otel_exporter.py, ``_set_io_attributes``): a tool run's arguments and its ToolMessage
under ``output``; a model run's ``LLMResult``, whose generations' AIMessage holds LangChain ``tool_calls``. The
shapes here are the ones langsmith 0.14.17 wrote for the matrix's ``langgraph_langsmith`` row (its spans are
checked there, through the three doors)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "5a" * 16
ROOT, MODEL, TOOL = "b0" * 8, "b1" * 8, "b2" * 8
CONFIG = TraceFenceConfig(tool_rules=[ToolRule(match="create_invoice", effect="write")])
ARGS = {"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}
COMMON = {"langsmith.trace.session_name": "default", "gen_ai.system": "langchain", "langsmith.metadata.ls_integration": "langgraph"}


def ai_message(tool_calls: Any, serialized: bool = True) -> dict:
    fields = {"content": "", "tool_calls": tool_calls, "invalid_tool_calls": [], "type": "ai"}
    if serialized:  # langchain_core.load.dumpd, as LangSmith writes a chat model's generation
        return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], "kwargs": fields}
    return fields


def model_span(message: Any) -> dict:
    output = message if isinstance(message, str) else json.dumps({"generations": [[{"text": "", "type": "ChatGeneration", "message": message}]]})
    attributes = {"langsmith.span.kind": "llm", "gen_ai.operation.name": "chat", **COMMON, "gen_ai.prompt": '{"messages": [[]]}', "gen_ai.completion": output}
    return json_span(TRACE, MODEL, "ScriptedChatModel", ROOT, **attributes)


def tool_span(status: str = "success", completion: Any = None) -> dict:
    message = {"content": "invoice inv_8812", "type": "tool", "name": "create_invoice", "tool_call_id": "call_w1", "status": status}
    attributes = {
        "langsmith.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_invoice",
        "gen_ai.tool.call.id": "call_w1", **COMMON, "gen_ai.prompt": json.dumps(ARGS),
        "gen_ai.completion": completion if completion is not None else json.dumps({"output": message}),
    }  # fmt: skip
    return json_span(TRACE, TOOL, "create_invoice", ROOT, **attributes)


def plan(*spans: dict) -> tuple[str | None, list[tuple[str, str, tuple[str, ...]]]]:
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "langsmith"}, "spans": [
        json_span(TRACE, ROOT, "LangGraph", **{"langsmith.span.kind": "chain", "gen_ai.operation.name": "chain"}), *spans]}]}]})  # fmt: skip
    (trace,), _ = plan_text(document, "otlp-json", CONFIG)
    replay_class = trace.replay_class.value if trace.replay_class is not None else None
    return replay_class, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


CALL = {"name": "create_invoice", "args": ARGS, "id": "call_w1", "type": "tool_call"}


def test_a_committed_tool_run_reads_its_arguments_and_toolmessage() -> None:
    assert plan(model_span(ai_message([CALL])), tool_span()) == ("injected", [("create_invoice", "skip", ("write_committed",))])


def test_a_toolmessage_with_status_error_in_gen_ai_completion_fails_the_write() -> None:
    # the span is OK; only the recorded ToolMessage says the call failed (kind A)
    assert plan(model_span(ai_message([CALL])), tool_span(status="error")) == ("review", [("create_invoice", "review", ("write_error", "error_in_result"))])


@pytest.mark.parametrize("serialized", [True, False], ids=["dumpd", "fields"])
def test_a_call_the_model_requested_that_never_ran_is_a_step(serialized: bool) -> None:
    assert plan(model_span(ai_message([CALL], serialized=serialized))) == (
        "review", [("create_invoice", "review", ("write_status_unknown", "requested_not_recorded"))])


def test_a_model_answer_without_calls_requests_nothing() -> None:
    assert plan(model_span(ai_message([]))) == (None, [])


@pytest.mark.parametrize(
    "output",
    [
        ai_message([{"name": "create_invoice", "id": "call_w1"}]),  # an entry with no args
        ai_message([{"args": ARGS, "id": "call_w1"}]),  # an entry with no name
        "{not json, but it names a tool_call",
    ],
    ids=["no_args", "no_name", "not_json_mentions_tools"],
)
def test_a_model_output_that_cannot_be_read_holds_the_trace(output: Any) -> None:
    # the model span becomes the held step (DECISIONS 188): the call it may hold is named nowhere else
    assert plan(model_span(output)) == ("review", [("ScriptedChatModel", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))])
