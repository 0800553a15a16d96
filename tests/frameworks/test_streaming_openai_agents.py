"""The OpenAI Agents SDK run streamed (``Runner.run_streamed``, its events consumed), under both of the matrix's
instrumentations (OpenLLMetry, OpenInference): the matrix's scenarios as users run them streamed.

The scripted model streams each turn as the SDK's Responses model does: it opens a ``response_span`` and yields one
``response.completed`` event carrying the ``Response`` (its ``function_call`` items, several for parallel calls).
Each run's expected plan is the plan the rules give (docs/design.md: a write is skip only on evidence it committed;
a failed or unknown write, and a requested call never run, hold the trace); one trace per run.
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("agents")
pytest.importorskip("opentelemetry.instrumentation.openai_agents")
pytest.importorskip("openinference.instrumentation.openai_agents")

from agents import Agent, Runner, function_tool  # noqa: E402
from agents.tracing import response_span  # noqa: E402
from openai.types.responses import (  # noqa: E402
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from tests.frameworks import conformance as matrix  # noqa: E402
from tests.frameworks.isolated.matrix_tools import (  # noqa: E402
    CHARGE,
    PAYMENT,
    REFUND,
    STATE,
    charge_card,
    create_invoice,
    lookup_customer,
    read_call,
    refund_order,
    send_payment_slow,
    write_call,
)
from tests.frameworks.matrix_table import COMMITTED, READ_OK  # noqa: E402
from tests.frameworks.streaming import expected, plans, run_in_process  # noqa: E402
from tests.frameworks.test_framework_openai_agents import ScriptedModel  # noqa: E402

KEYS = ["openai_agents", "openai_agents_openinference"]
FAILED_REFUND = ("refund_order", "review", ("write_error",))
EXPECTED = {
    "stream_write_commits": expected("INJECTED", COMMITTED),
    "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error",))),
    "stream_tool_error_to_model": expected("REVIEW", FAILED_REFUND),
    "stream_parallel_one_fails": expected("REVIEW", READ_OK, FAILED_REFUND),
    "stream_requested_never_ran": expected("REVIEW", ("create_invoice", "review", ("effect_unknown",))),
    # what only a streamed run does: the consumer cancels the stream (``result.cancel()``, its default "immediate")
    # once the model's turn asking for the write has streamed, before the write runs ...
    "stream_cancelled_before_tools": expected("REVIEW", ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))),
    # ... or while the write runs (a payment API slower than the consumer's patience)
    "stream_cancelled_during_write": expected("REVIEW", ("send_payment", "review", ("write_outcome_unrecorded", "result_not_recorded"))),
}


class StreamingScriptedModel(ScriptedModel):
    """The scripted turns, streamed: one ``response.completed`` event per turn, inside the turn's ``response_span``."""

    async def stream_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kwargs):
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            text = ResponseOutputText(type="output_text", text=turn, annotations=[])
            output: list = [ResponseOutputMessage(id="msg_final", type="message", role="assistant", status="completed", content=[text])]
        else:
            output = [
                ResponseFunctionToolCall(type="function_call", call_id=cid, name=name, arguments=json.dumps(args), id=f"fc_{cid}", status="completed")
                for cid, name, args in turn
            ]
        response = Response(
            id=f"resp_{len(self.turns)}", created_at=0, model="scripted", object="response", output=output, parallel_tool_calls=True, tool_choice="auto", tools=[],
        )
        with response_span(disabled=tracing.is_disabled()) as span:
            if tracing.include_data():
                span.span_data.response = response
                span.span_data.input = input
            yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


def _streamed(scenario: str) -> None:
    tools = {"lookup_customer": function_tool(lookup_customer), "create_invoice": function_tool(create_invoice), "refund_order": function_tool(refund_order)}
    if scenario == "stream_write_commits":
        turns: list = [[write_call()], "done"]
    elif scenario == "stream_write_raises":
        tools["charge_card"] = function_tool(charge_card, failure_error_function=None)  # the error propagates
        turns = [[("call_c1", "charge_card", CHARGE)], "done"]
    elif scenario == "stream_tool_error_to_model":
        turns = [[("call_f1", "refund_order", REFUND)], "done"]
    elif scenario == "stream_parallel_one_fails":
        turns = [[read_call(), ("call_f1", "refund_order", REFUND)], "done"]
    elif scenario == "stream_requested_never_ran":  # a call waiting for approval, never approved
        tools["create_invoice"] = function_tool(create_invoice, needs_approval=True)
        turns = [[write_call()], "done"]
    elif scenario == "stream_cancelled_before_tools":
        turns = [[write_call()], "done"]
    else:  # stream_cancelled_during_write
        tools["send_payment"] = function_tool(send_payment_slow, name_override="send_payment")
        turns = [[("call_p1", "send_payment", PAYMENT)], "done"]
    agent = Agent(name="billing", model=StreamingScriptedModel(turns), tools=list(tools.values()))

    async def consume():
        result = Runner.run_streamed(agent, "bill customer a")
        if scenario == "stream_cancelled_during_write":
            asyncio.get_running_loop().create_task(_cancel_once_ran(result, "send_payment"))
        async for event in result.stream_events():
            if scenario == "stream_cancelled_before_tools" and event.type == "raw_response_event":
                result.cancel()  # the turn asking for create_invoice has streamed; nothing has run
        STATE["create_invoice_ran"] = STATE.get("create_invoice", 0)

    try:
        asyncio.run(consume())
    except Exception as exc:  # the SDK wraps a propagated tool error in its own exceptions
        if type(exc).__module__.split(".")[0] != "agents":
            raise


async def _cancel_once_ran(result, tool: str) -> None:
    while not STATE.get(tool):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    result.cancel()


@pytest.fixture(scope="module", params=KEYS)
def instrumented(request):
    teardown = matrix.setup(request.param)
    yield request.param
    teardown()


@pytest.fixture(scope="module")
def streamed(instrumented) -> dict:
    """Each scenario's spans, run streamed under the module's instrumentation: {scenario: spans}."""
    return run_in_process(instrumented, EXPECTED, _streamed, STATE, setup=False)


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_a_streamed_run_plans_as_the_rules_say(instrumented, streamed, scenario):
    assert plans(streamed[scenario], instrumented) == EXPECTED[scenario]


def test_a_cancelled_stream_stopped_where_the_scenario_says(streamed):
    assert (streamed["stream_cancelled_before_tools", "ran"].get("create_invoice"), streamed["stream_cancelled_during_write", "ran"]["send_payment"]) == (None, 1)
