"""The OpenAI Agents SDK (``openai-agents``) runs of the conformance matrix: one home for every row that runs the SDK,
whatever instrumentation records it (OpenLLMetry and OpenInference in the test process, ``tests/frameworks/conformance.py``;
Logfire in its own environment, ``openai_agents_logfire/runner.py``).

The model is scripted (:class:`ScriptedModel`, the SDK's ``Model`` interface: it opens a ``response_span`` with an
``openai`` ``Response`` as the SDK's own Responses model does, so the model turn is traced too); the tools are
``matrix_tools``'s, wrapped in ``function_tool``. :func:`run` makes one scenario's run; the caller collects its spans.
This module needs only ``openai-agents`` (and ``mcp`` for ``mcp_is_error``): imported as
``tests.frameworks.isolated.openai_agents_scripted`` in the test process, and by bare name in a framework's own
environment (a link in the runner's ``PYTHONPATH`` folder, ``envs._shared_modules``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import operator
from typing import Any

from agents import Agent, ModelResponse, Runner, Usage, function_tool
from agents.exceptions import MaxTurnsExceeded
from agents.models.interface import Model
from agents.tracing import response_span
from openai.types.responses import Response, ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

# The test process imports the package's module, so STATE is the one the matrix clears; a framework's environment has
# the module linked beside this one.
_TOOLS = importlib.import_module(f"{__package__}.matrix_tools" if __package__ else "matrix_tools")
(CHARGE, PAYMENT, REFUND, STATE, CannotProduce, charge_card, create_invoice, lookup_customer, read_call, refund_order,
 send_payment_slow, write_call) = operator.attrgetter(
    "CHARGE", "PAYMENT", "REFUND", "STATE", "CannotProduce", "charge_card", "create_invoice", "lookup_customer", "read_call",
    "refund_order", "send_payment_slow", "write_call",
)(_TOOLS)


class ScriptedModel(Model):
    """Each turn is a list of (call_id, tool, arguments) function calls, or a final text."""

    def __init__(self, turns):
        self.turns = list(turns)

    async def get_response(
        self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, *, previous_response_id=None, conversation_id=None, prompt=None,
    ):
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            output = [
                ResponseOutputMessage(
                    id="msg_final", type="message", role="assistant", status="completed", content=[ResponseOutputText(type="output_text", text=turn, annotations=[])]
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments), id=f"fc_{call_id}", status="completed")
                for call_id, name, arguments in turn
            ]
        with response_span(disabled=tracing.is_disabled()) as span:
            if tracing.include_data():
                span.span_data.response = Response(
                    id=f"resp_{len(self.turns)}", created_at=0, model="scripted", object="response", output=output, parallel_tool_calls=True, tool_choice="auto", tools=[]
                )
                span.span_data.input = input
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("not scripted")


def _script(scenario: str) -> tuple[dict, list]:
    """The scenario's tools (name -> ``FunctionTool``) and the model's turns."""
    tools = {
        "lookup_customer": function_tool(lookup_customer),
        "create_invoice": function_tool(create_invoice),
        "refund_order": function_tool(refund_order),  # the SDK's default failure_error_function: the error goes to the model
    }
    if scenario == "read_ok":
        return tools, [[read_call()], "done"]
    if scenario == "write_commits":
        return tools, [[write_call()], "done"]
    if scenario == "write_raises":
        tools["charge_card"] = function_tool(charge_card, failure_error_function=None)  # the error propagates
        return tools, [[("call_c1", "charge_card", CHARGE)], "done"]
    if scenario == "write_times_out":
        tools["send_payment"] = function_tool(send_payment_slow, name_override="send_payment", timeout=0.2)
        return tools, [[("call_p1", "send_payment", PAYMENT)], "done"]
    if scenario == "tool_error_to_model":
        return tools, [[("call_f1", "refund_order", REFUND)], "done"]
    if scenario == "parallel_one_fails":
        return tools, [[read_call(), ("call_f1", "refund_order", REFUND)], "done"]
    if scenario == "framework_retries":
        STATE["flaky"] = True
        return tools, [[write_call("call_w1")], [write_call("call_w2")], "done"]
    if scenario in ("requested_never_ran", "approval_interrupt_resume"):
        # max_turns cannot stop a requested call: the SDK runs a turn's calls before it counts the next turn.
        # A call waiting for approval that is never given is the requested call that never ran.
        tools["create_invoice"] = function_tool(create_invoice, needs_approval=True)
        return tools, [[write_call()], "done"]
    raise CannotProduce(scenario)


def run(scenario: str, mcp_server: dict[str, Any] | None = None) -> None:
    """Run one scenario of the matrix (the SDK's errors that end a run are swallowed: the spans are the cell).
    ``mcp_server``: how ``agents.mcp.MCPServerStdio`` starts the billing MCP server (``command``, ``args``,
    ``env``), for ``mcp_is_error``. Raises :class:`CannotProduce` for a scenario this module does not script."""
    if scenario == "mcp_is_error":
        if mcp_server is None:
            raise CannotProduce("no MCP server given")
        asyncio.run(_over_mcp(mcp_server))
        return
    tools, turns = _script(scenario)
    agent = Agent(name="billing", model=ScriptedModel(turns), tools=list(tools.values()))
    if tools["create_invoice"].needs_approval is True:
        asyncio.run(_approval_session(agent, resume=scenario == "approval_interrupt_resume"))
        return
    try:
        Runner.run_sync(agent, "bill customer a")
    except (RuntimeError, MaxTurnsExceeded):
        pass
    except Exception as exc:  # the SDK wraps a propagated tool error in UserError / AgentsException
        if type(exc).__module__.split(".")[0] != "agents":
            raise


async def _approval_session(agent: Agent, resume: bool) -> None:
    """One SDK trace: the run stops at the call waiting for approval; with ``resume`` it is approved and run on."""
    from agents import trace

    with trace("billing session"):
        result = await Runner.run(agent, "bill customer a")
        if not resume:
            return
        state = result.to_state()
        for item in result.interruptions:
            state.approve(item)
        await Runner.run(agent, state)


async def _over_mcp(server: dict[str, Any]) -> None:
    """The agent's tools are the billing MCP server's (agents.mcp.MCPServerStdio); the model asks for the charge."""
    from agents.mcp import MCPServerStdio

    async with MCPServerStdio(params=server) as mcp_server:  # type: ignore[arg-type]
        agent = Agent(name="billing", model=ScriptedModel([[("call_c1", "charge_card", CHARGE)], "done"]), mcp_servers=[mcp_server])
        await Runner.run(agent, "charge customer a")
