"""A callback's envelope around a tool's arguments is taken off (``conventions.ARGUMENT_ENVELOPES``, docs/DECISIONS.md
962): OpenLLMetry's LangChain handler records ``{"input_str", "tags", "metadata", "inputs", "kwargs"}``; the arguments
are ``inputs`` (else ``input_str`` read as a JSON or Python literal), the call id ``kwargs.tool_call_id``, noted
``arguments_unwrapped``. Without it, the per-run metadata made a repeated write look like two different writes (a
fail-open) and a raised call that no ToolMessage names got a phantom requested step."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import Limits, TraceFenceConfig
from otel_tracefence.normalize.values import arguments_from_value
from otel_tracefence.pipeline.documents import plan_text

TRACE = "7d" * 16
ROOT = "e0" * 8
ARGS = {"customer": "a", "amount_cents": 500}


def envelope(step: int, call_id: str | None = "call_c1", inputs=ARGS, input_str: str = "{'customer': 'a', 'amount_cents': 500}", **extra) -> dict:
    metadata = {"langgraph_step": step, "langgraph_node": "tools", "langgraph_checkpoint_ns": f"tools:{step:04x}"}
    return {"input_str": input_str, "tags": ["seq:step:1"], "metadata": metadata, "inputs": inputs, "kwargs": {"color": "green", "name": None, "tool_call_id": call_id}, **extra}


def tool(span_id: str, arguments: dict, result: str | None = None, code: int = 0) -> dict:
    attributes = {"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card",
                  "tracefence.effect": "write", "gen_ai.tool.call.arguments": json.dumps(arguments)}  # fmt: skip
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result
    span = json_span(TRACE, span_id, "execute_tool charge_card", ROOT, **attributes)
    span["status"] = {"code": code}
    return span


def tool_message(call_id: str) -> str:
    message = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
               "kwargs": {"content": "charged ch_1", "type": "tool", "tool_call_id": call_id, "status": "success"}}  # fmt: skip
    return json.dumps({"output": message, "kwargs": {"name": "charge_card"}})


def chat(*call_ids: str) -> dict:
    parts = [{"type": "tool_call", "id": call_id, "name": "charge_card", "arguments": ARGS} for call_id in call_ids]
    return json_span(TRACE, "e1" * 8, "ScriptedChatModel.chat", ROOT, **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}])})


def plan_of(*spans: dict) -> tuple[str | None, list]:
    root = json_span(TRACE, ROOT, "LangGraph.workflow", **{"gen_ai.operation.name": "invoke_agent", "traceloop.span.kind": "workflow"})
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [root, *spans]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    return trace.replay_class.value, sorted((d.step.call_id, d.step.tool, d.decision.value, d.reasons) for d in trace.steps)


@pytest.mark.parametrize(("value", "arguments", "call_id"), [
    (envelope(2), ARGS, "call_c1"),
    (envelope(2, inputs=None), ARGS, "call_c1"),  # the input's Python repr
    (envelope(2, inputs=None, input_str='{"customer": "a", "amount_cents": 500}'), ARGS, "call_c1"),  # JSON text
    (envelope(2, inputs=None, input_str="('a', 500)"), ["a", 500], "call_c1"),  # a tuple reads as a list
    (envelope(2, inputs=None, input_str="{'a', 'b'}"), "{'a', 'b'}", "call_c1"),  # a set is no JSON value: the text
    (envelope(2, inputs="978-0"), "978-0", "call_c1"),  # a one-string tool input
    (envelope(2, call_id=None), ARGS, None),
    ({k: v for k, v in envelope(2).items() if k not in ("tags", "metadata")}, ARGS, "call_c1"),  # fewer keys: still one
])
def test_the_arguments_and_call_id_inside_an_envelope(value, arguments, call_id):
    read = arguments_from_value(json.dumps(value), Limits())
    assert (read.value, read.call_id, read.notes) == (arguments, call_id, ("arguments_unwrapped",))


@pytest.mark.parametrize("value", [
    envelope(2, extra="x"),  # a key no envelope holds: a tool's own arguments
    {k: v for k, v in envelope(2).items() if k != "inputs"},  # a mark missing
    {"input_str": "a", "inputs": {"b": 1}, "other": 1},
])
def test_an_object_that_is_no_envelope_is_the_arguments(value):
    read = arguments_from_value(json.dumps(value), Limits())
    assert (read.value, read.call_id, read.notes) == (value, None, ())


def test_a_repeated_keyless_write_is_held_though_each_run_recorded_other_metadata():
    """The fail-open: two writes of one call, each envelope with its own langgraph_step, planned as two committed writes."""
    first = tool("e2" * 8, envelope(2, "call_c1"), tool_message("call_c1"))
    second = tool("e3" * 8, envelope(4, "call_c2"), tool_message("call_c2"))
    assert plan_of(chat("call_c1"), chat("call_c2") | {"spanId": "e4" * 8}, first, second) == ("review", [
        ("e2" * 8, "charge_card", "skip", ("write_committed", "repeated_later", "arguments_unwrapped")),
        ("e3" * 8, "charge_card", "review", ("repeats_earlier_write", "arguments_unwrapped")),
    ])


def test_a_raised_call_is_matched_to_its_request_by_the_envelopes_call_id():
    """No ToolMessage names the call (it raised): the envelope's call id matches the request, no phantom step. The
    step keeps its span id as its call id (the span records none: the envelope's id is for matching, as 443's)."""
    raised = tool("e2" * 8, envelope(2, "call_c1"), code=2)
    assert plan_of(chat("call_c1"), raised) == ("review", [("e2" * 8, "charge_card", "review", ("write_error", "arguments_unwrapped"))])


def test_an_envelope_naming_another_call_leaves_the_request_a_step():
    raised = tool("e2" * 8, envelope(2, "call_c9", inputs={"customer": "b"}), code=2)
    assert plan_of(chat("call_c1"), raised) == ("review", [
        ("call_c1", "charge_card", "review", ("effect_unknown", "requested_not_recorded")),
        ("e2" * 8, "charge_card", "review", ("write_error", "arguments_unwrapped")),
    ])
