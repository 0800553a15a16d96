"""Microsoft Agent Framework for Python (agent-framework-core) under its own OpenTelemetry instrumentation, offline.

The model is a chat client of the framework's own composition (``FunctionInvocationLayer``, ``ChatMiddlewareLayer``,
``ChatTelemetryLayer`` over ``BaseChatClient``, the layers its shipped clients stack), whose ``_inner_get_response``
answers each model turn from a script: ``function_call`` contents (several in one turn run together) or a text.
The agent is the framework's ``Agent`` (``AgentTelemetryLayer``), so a run makes ``invoke_agent <name>`` around
``chat <model>`` and ``execute_tool <tool>`` spans (agent_framework/observability.py) through the global provider
runner_common sets. Instrumentation is on by default; sensitive data (arguments, results, messages on spans) is
turned on with ``enable_instrumentation(enable_sensitive_data=True)``, as the framework's manual-setup path says a
user who wants to see calls does. ``TRACEFENCE_MAF_CONTENT=off`` (a trial outside the matrix) leaves it off, the
framework's default; ``TRACEFENCE_MAF_STREAM=1`` runs every agent call streaming.

The framework's own mechanisms: an exception in a tool becomes the call's result to the model ("Error: Function
failed.") unless a function middleware raises ``MiddlewareFailure`` (its fail-closed abort, which ends the run);
``approval_mode="always_require"`` pauses the run with a ``function_approval_request`` that the caller answers in the
next run of the same session; ``MCPStdioTool`` is its MCP client (``request_timeout`` its own timeout).
"""

from __future__ import annotations

import asyncio
import os
import sys

from matrix_tools import (
    CHARGE,
    MCP_BILLING_SERVER,
    PAYMENT,
    REFUND,
    STATE,
    CUSTOMER,
    CannotProduce,
    charge_card,
    declare,
    create_invoice,
    lookup_customer,
    read_call,
    refund_order,
    send_payment,
    send_payment_slow,
    write_call,
)
from runner_common import main, session

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    FunctionMiddleware,
    MCPStdioTool,
    Message,
    MiddlewareFailure,
    ResponseStream,
    tool,
)
from agent_framework.observability import ChatTelemetryLayer, enable_instrumentation

CONTENT_ON = os.environ.get("TRACEFENCE_MAF_CONTENT", "on") != "off"
STREAM = os.environ.get("TRACEFENCE_MAF_STREAM") == "1"
enable_instrumentation(enable_sensitive_data=CONTENT_ON)


class ScriptedChatClient(FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer, BaseChatClient):
    """Answers each model turn from ``script``: a list of calls ``(id, name, args)`` or a text."""

    OTEL_PROVIDER_NAME = "scripted"

    def __init__(self, script: list, **kwargs) -> None:
        super().__init__(**kwargs)
        self.script = list(script)

    def _turn(self) -> tuple[list, str]:
        turn = self.script.pop(0) if self.script else "done"
        if isinstance(turn, str):
            return [Content.from_text(turn)], "stop"
        return [Content.from_function_call(call_id=cid, name=name, arguments=dict(args)) for cid, name, args in turn], "tool_calls"

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        contents, finish = self._turn()
        if stream:

            async def updates():
                yield ChatResponseUpdate(role="assistant", contents=contents, finish_reason=finish, model="scripted-model")

            return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

        async def answer():
            message = Message(role="assistant", contents=contents)
            return ChatResponse(messages=[message], response_id=f"resp-{len(self.script)}", model="scripted-model", finish_reason=finish)

        return answer()


class FailLoud(FunctionMiddleware):
    """The framework's documented way to let a tool's error end the run: ``MiddlewareFailure`` from the error."""

    async def process(self, context, call_next):
        try:
            await call_next()
        except Exception as exc:
            raise MiddlewareFailure(f"{context.function.name} failed") from exc


def lookup_customer_down(customer: str) -> str:
    """Look a customer up: the CRM is down (raises).

    Args:
        customer: the customer id
    """
    declare("read")
    raise ConnectionError("CRM did not answer")


async def _run_agent(agent: Agent, message, agent_session):
    if STREAM:
        stream = agent.run(message, session=agent_session, stream=True)
        async for _ in stream:
            pass
        return await stream.get_final_response()
    return await agent.run(message, session=agent_session)


def _run(turns: list, tools: list, *, middleware: list | None = None, approve: bool | None = None, config: dict | None = None) -> None:
    """One agent run on ``turns``; ``approve`` True/False answers the approval requests it paused on (one more run of
    the same session), None leaves them unanswered."""
    client = ScriptedChatClient(turns)
    client.function_invocation_configuration.update(config or {})
    agent = Agent(client=client, name="billing", instructions="bill the customer", tools=tools, middleware=middleware or [])

    async def go():
        agent_session = agent.create_session()
        try:
            response = await _run_agent(agent, "bill customer a", agent_session)
            requests = list(response.user_input_requests)
            STATE["approval_requests"] = [r.function_call.call_id for r in requests]
            if approve is not None and requests:
                answer = Message(role="user", contents=[r.to_function_approval_response(approve) for r in requests])
                await _run_agent(agent, answer, agent_session)
        finally:
            for mcp in [t for t in tools if isinstance(t, MCPStdioTool)]:
                await mcp.close()  # the server process ends with its session

    asyncio.run(go())


def _mcp(tool_name: str, **kwargs) -> MCPStdioTool:
    return MCPStdioTool(
        name="billing", command=sys.executable, args=[str(MCP_BILLING_SERVER)], allowed_tools=[tool_name], **kwargs,
    )


def run(scenario: str) -> None:
    tools = {f.__name__: tool(f) for f in (lookup_customer, create_invoice, charge_card, send_payment, refund_order)}
    middleware: list = []
    approve = None
    if scenario == "read_ok":
        turns = [[read_call()], "done"]
    elif scenario == "write_commits":
        turns = [[write_call()], "done"]
    elif scenario == "write_raises":
        middleware = [FailLoud()]  # the error ends the run (MiddlewareFailure), as a fail-loud application makes it
        turns = [[("call_c1", "charge_card", CHARGE)], "done"]
    elif scenario == "write_times_out":
        # no timeout for function tools in the framework: a TimeoutError raised in the tool, handed to the model
        turns = [[("call_p1", "send_payment", PAYMENT)], "done"]
    elif scenario == "tool_error_to_model":
        turns = [[("call_f1", "refund_order", REFUND)], "done"]  # the framework's default: the error is the call's result
    elif scenario == "parallel_one_fails":
        turns = [[read_call(), ("call_f1", "refund_order", REFUND)], "done"]
    elif scenario == "framework_retries":
        STATE["flaky"] = True  # no tool retry in the framework: its error result goes to the model, which asks again
        turns = [[write_call("call_w1")], [write_call("call_w2")], "done"]
    elif scenario in ("requested_never_ran", "approval_interrupt_resume"):
        tools["create_invoice"] = tool(create_invoice, approval_mode="always_require")
        approve = True if scenario == "approval_interrupt_resume" else None
        turns = [[write_call()], "done"]
    elif scenario == "mcp_is_error":
        tools = {"mcp": _mcp("charge_card")}
        turns = [[("call_c1", "charge_card", CHARGE)], "done"]
    elif scenario == "parallel_abort":  # outside the matrix (run by hand): MiddlewareFailure cancels the sibling call
        middleware = [FailLoud()]
        tools["send_payment"] = tool(send_payment_slow, name="send_payment")
        turns = [[("call_p1", "send_payment", PAYMENT), ("call_c1", "charge_card", CHARGE)], "done"]
    elif scenario == "parallel_abort_read":  # outside the matrix (test_agent_framework_settings): a failed read aborts, the write is cancelled
        middleware = [FailLoud()]
        tools["send_payment"] = tool(send_payment_slow, name="send_payment")
        tools["lookup_customer"] = tool(lookup_customer_down, name="lookup_customer")
        turns = [[("call_p1", "send_payment", PAYMENT), ("call_r1", "lookup_customer", CUSTOMER)], "done"]
    elif scenario == "mcp_times_out":  # outside the matrix (run by hand): the framework's own timeout, MCP's request_timeout
        # request_timeout bounds the session's every request, initialize too: on a loaded machine the server's start
        # alone can pass a tight one, so the matrix's write_times_out is the function tool's TimeoutError instead
        slow = {**os.environ, "TRACEFENCE_TEST_SLOW_S": "8"}
        tools = {"mcp": _mcp("send_payment", request_timeout=4, env=slow)}
        turns = [[("call_p1", "send_payment", PAYMENT)], "done"]
    else:
        raise CannotProduce(scenario)
    if approve is not None:
        with session():  # the paused run and the resumed one, one trace
            _run(turns, list(tools.values()), middleware=middleware, approve=approve)
    else:
        _run(turns, list(tools.values()), middleware=middleware)


if __name__ == "__main__":
    raise SystemExit(main(run))
