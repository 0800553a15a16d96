"""A call held for approval under Logfire's OpenAI Agents bridge is a pending record (docs/DECISIONS.md 600, 1000).

The SDK opens a ``Function: {name}`` span for a call held for ``needs_approval`` and ends it with the arguments in
``input``, ``output`` the text ``null`` typed null in ``logfire.json_schema`` (none recorded, 992), status unset, no
label (the body never ran), inside a ``Turn`` span of the interrupted ``Agent run: {name!r}`` span. After the approval
a second ``Agent run`` span runs the call first thing and records it with its result. Logfire's agent span carries no
GenAI operation and no OpenInference kind: its message template marks it (``conventions.MARKED_AGENT_SPANS``). The
traces below are shaped as Logfire 5.6.0 exports them for the OpenAI Agents SDK 0.24.0 (attribute keys and values,
parentage, timings), hand-made.
"""

from __future__ import annotations

import json

from otlp_json_helpers import json_span, json_value

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.span_kinds import agent_name
from otel_tracefence.pipeline.documents import plan_text

TRACE = "cd" * 16
ROOT, RUN1, TURN1, MODEL1, PENDING, RUN2, TOOL2, TURN2, MODEL2, AGAIN = (f"{i:02x}" * 8 for i in range(1, 11))
T0 = 1_796_677_864_000_000_000
MS = 1_000_000
ARGS = '{"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}'
AGENT_TEMPLATE = "Agent run: {name!r}"
FUNCTION = "Function: {name}"
TYPED_NULL = {"type": "object", "properties": {"name": {}, "input": {}, "output": {"type": "null"}, "mcp_data": {"type": "null"}, "gen_ai.system": {}}}
RESULT_SCHEMA = {"type": "object", "properties": {"name": {}, "input": {}, "output": {}, "mcp_data": {"type": "null"}, "gen_ai.system": {}}}
CALL = {"type": "function_call", "call_id": "call_w1", "name": "create_invoice", "arguments": ARGS, "id": "fc_call_w1", "status": "completed"}
ANSWER = {"type": "message", "id": "msg_final", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "done", "annotations": []}]}


def span(span_id: str, name: str, parent: str, start_ms: int, end_ms: int, attributes: dict) -> dict:
    """An OTLP/JSON span from ``start_ms`` to ``end_ms`` after T0 (Logfire's key ``name`` is an attribute here)."""
    found = json_span(TRACE, span_id, name, parent)
    found.update(startTimeUnixNano=str(T0 + start_ms * MS), endTimeUnixNano=str(T0 + end_ms * MS))
    found["attributes"] = [{"key": k, "value": json_value(v)} for k, v in attributes.items()]
    return found


def agent_run(span_id: str, start_ms: int, end_ms: int, template: str = AGENT_TEMPLATE) -> dict:
    return span(span_id, template, ROOT, start_ms, end_ms, {
        "logfire.msg_template": template, "logfire.span_type": "span", "name": "billing", "handoffs": "[]",
        "tools": '["lookup_customer","create_invoice","refund_order"]', "output_type": "str", "gen_ai.system": "openai",
        "logfire.msg": "Agent run: 'billing'"})


def turn(span_id: str, parent: str, start_ms: int, end_ms: int) -> dict:
    return span(span_id, "Turn {turn} for agent billing", parent, start_ms, end_ms, {
        "logfire.msg_template": "Turn {turn} for agent billing", "type": "custom", "name": "turn", "sdk_span_type": "turn",
        "turn": 1, "agent_name": "billing", "gen_ai.system": "openai"})


def model(span_id: str, parent: str, start_ms: int, end_ms: int, output: dict) -> dict:
    response = {"id": "resp_1", "object": "response", "model": "scripted", "output": [output]}
    return span(span_id, "Responses API", parent, start_ms, end_ms, {
        "logfire.msg_template": "Responses API", "logfire.span_type": "span", "gen_ai.system": "openai", "gen_ai.operation.name": "chat",
        "gen_ai.response.model": "scripted", "response_id": "resp_1", "response": json.dumps(response)})


def function(span_id: str, parent: str, start_ms: int, end_ms: int, output: str = "null", **labels: str) -> dict:
    """Logfire's Function span of create_invoice; ``output`` "null" is typed null (the SDK's None), else a result."""
    schema = TYPED_NULL if output == "null" else RESULT_SCHEMA
    return span(span_id, FUNCTION, parent, start_ms, end_ms, {
        "logfire.msg_template": FUNCTION, "logfire.span_type": "span", **labels, "name": "create_invoice", "input": ARGS,
        "output": output, "mcp_data": "null", "gen_ai.system": "openai", "logfire.msg": "Function: create_invoice",
        "logfire.json_schema": json.dumps(schema)})


def interrupted(template: str = AGENT_TEMPLATE) -> list[dict]:
    """The first run: the model asks for create_invoice, the SDK opens its Function span and stops for approval."""
    return [agent_run(RUN1, 1, 40, template), turn(TURN1, RUN1, 2, 39), model(MODEL1, TURN1, 3, 5, CALL), function(PENDING, TURN1, 6, 8)]


def resumed(output: str = "invoice inv_8812") -> list[dict]:
    """The run after the approval: the call runs first (labelled by its body), then the model answers."""
    return [agent_run(RUN2, 50, 99), function(TOOL2, RUN2, 51, 60, output, **{"tracefence.effect": "write"}),
            turn(TURN2, RUN2, 61, 70), model(MODEL2, TURN2, 62, 65, ANSWER)]


def plan_of(spans: list[dict]) -> tuple:
    """(class, [(tool, decision, reasons)]) of ``spans`` under Logfire's trace root span."""
    root = span(ROOT, "OpenAI Agents trace: {name}", "", 0, 100, {"logfire.msg_template": "OpenAI Agents trace: {name}", "name": "billing"})
    scope = {"scope": {"name": "logfire.openai_agents", "version": "5.6.0"}, "spans": [root, *spans]}
    (trace,), _ = plan_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [scope]}]}), "otlp-json", TraceFenceConfig())
    cls = trace.replay_class.value if trace.replay_class is not None else None
    return cls, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


COMMITTED = ("create_invoice", "skip", ("write_committed",))
HELD = ("create_invoice", "review", ("effect_unknown",))


def test_the_pending_span_is_superseded_by_the_resumed_run_s_committed_span():
    assert plan_of(interrupted() + resumed()) == ("injected", [("create_invoice", "skip", ("write_committed", "resumes_pending_call"))])


def test_a_call_held_for_approval_and_never_resumed_holds_the_trace():
    """Nothing later ran the call: the pending span stays a step of unknown effect (the request is matched to it)."""
    assert plan_of(interrupted()) == ("review", [HELD])


def test_the_agent_run_span_is_what_bounds_the_run():
    """The same trace whose agent spans carry a template no marker names: no agent run, so no pending record (held as
    before DECISIONS 1000, an over-hold)."""
    spans = interrupted("Agent: {name}") + resumed()
    spans[4:5] = [agent_run(RUN2, 50, 99, "Agent: {name}")]
    assert plan_of(spans) == ("review", [HELD, COMMITTED])


def test_a_write_whose_body_ran_and_returned_none_is_no_pending_record():
    """The body labelled its span (it ran) and returned None (typed null): held, never folded into the later run."""
    spans = interrupted()
    spans[3] = function(PENDING, TURN1, 6, 8, **{"tracefence.effect": "write"})
    assert plan_of(spans + resumed()) == ("review", [
        ("create_invoice", "review", ("write_outcome_unrecorded", "repeated_later", "result_not_recorded")),
        ("create_invoice", "review", ("repeats_earlier_write",)),
    ])


def test_a_later_run_that_records_no_result_supersedes_nothing():
    """The resumed run's span also records None: no later step shows the call ran with a result, both are held."""
    assert plan_of(interrupted() + resumed("null")) == ("review", [HELD, ("create_invoice", "review", ("write_outcome_unrecorded", "result_not_recorded"))])


def test_a_run_that_went_on_after_the_span_did_not_stop_there():
    """A model call of the first run after the Function span ended (it was given the call's outcome): a step."""
    spans = interrupted() + [model(AGAIN, TURN1, 10, 12, ANSWER)] + resumed()
    assert plan_of(spans) == ("review", [HELD, COMMITTED])


def test_a_model_call_that_asked_again_before_the_later_run_keeps_both():
    """A model call between the two asked for the same call again: the later span answers it, not the pending one."""
    spans = interrupted() + resumed()
    spans.append(model(AGAIN, RUN2, 50, 51, CALL))
    assert plan_of(spans) == ("review", [HELD, COMMITTED])


def test_agent_name_reads_the_producer_s_marked_agent_span():
    attributes = {"logfire.msg_template": "agent RUN: {name!r}", "name": "billing"}
    assert agent_name(attributes, "Agent run: {name!r}") == "billing"
    assert agent_name({**attributes, "name": ""}, "Agent run: {name!r}") is None
    assert agent_name({"logfire.msg_template": "Function: {name}", "name": "billing"}, "Function: {name}") is None
