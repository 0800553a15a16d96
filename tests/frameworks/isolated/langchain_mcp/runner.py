"""langchain-mcp-adapters in a LangGraph agent, calling a small MCP server (../mcp_billing_server.py, FastMCP over stdio),
under OpenInference's LangChain instrumentation, offline (langchain-core's fake chat model, scripted).

Each scenario opens one MCP session (``MultiServerMCPClient.session``: one server process) and loads its
tools with ``load_mcp_tools``; the adapters' own mechanisms make the failures: ``handle_tool_errors``
(an ``isError`` result handed to the model as a ToolMessage status=error, or raised), the MCP client's
LangGraph's node timeout (the adapters have none per call), an interceptor calling LangGraph's
``interrupt()`` for approval. The tool bodies run in the server: nothing can label the agent's TOOL spans,
so the operator's tool rules name the effects (framework.py ``TOOL_RULES``). mcp 1.x (the adapters'
range) emits no spans of its own.
"""

from __future__ import annotations

import asyncio
import sys
import warnings

from langchain_scripted import ASK, hand_built, model, turn
from openinference.instrumentation.langchain import LangChainInstrumentor
from matrix_tools import CHARGE, MCP_BILLING_SERVER, PAYMENT, REFUND, STATE, CannotProduce, read_call, write_call
from runner_common import PROVIDER, main, session

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.checkpoint.memory import MemorySaver
from langgraph.errors import GraphRecursionError, NodeTimeoutError
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.types import Command, RetryPolicy, interrupt
from langchain_core.tools import ToolException

warnings.filterwarnings("ignore", message="create_react_agent has been moved")
LangChainInstrumentor().instrument(tracer_provider=PROVIDER)


def client(**env: str) -> MultiServerMCPClient:
    connection = {"transport": "stdio", "command": sys.executable, "args": [str(MCP_BILLING_SERVER)], "env": {"TRACEFENCE_TEST_SLOW_S": "3.0", **env}}
    return MultiServerMCPClient({"billing": connection})


async def approve_writes(request, handler):
    """A tool interceptor asking a human (LangGraph's interrupt()) before create_invoice runs."""
    if request.name == "create_invoice" and interrupt({"action": request.name, "args": request.args}) != "approve":
        raise ToolException("not approved")
    return await handler(request)


async def scenario_run(scenario: str) -> None:
    env = {"TRACEFENCE_TEST_FLAKY": "1"} if scenario == "framework_retries" else {}
    mcp = client(**env)
    async with mcp.session("billing") as mcp_session:
        options = {}
        if scenario == "write_raises":
            options["handle_tool_errors"] = False  # the isError result raised as a ToolException, out of the run
        if scenario == "framework_retries":
            options["handle_tool_errors"] = False  # raised, so the tools node's RetryPolicy sees it
        if scenario == "approval_interrupt_resume":
            options["tool_interceptors"] = [approve_writes]
        tools = await load_mcp_tools(mcp_session, server_name="billing", **options)
        if scenario == "read_ok":
            await create_react_agent(model(turn(read_call())), ToolNode(tools)).ainvoke(ASK)
        elif scenario == "write_commits":
            await create_react_agent(model(turn(write_call())), ToolNode(tools)).ainvoke(ASK)
        elif scenario == "write_raises":
            await create_react_agent(model(turn(("call_c1", "charge_card", CHARGE))), ToolNode(tools)).ainvoke(ASK)
        elif scenario == "write_times_out":
            # the adapters have no per-call timeout, and the MCP client's read_timeout_seconds (session_kwargs) bounds the
            # session's initialize too; the agent's own: the tools node's timeout (LangGraph >= 1.2), NodeTimeoutError
            try:
                await hand_built(model(turn(("call_p1", "send_payment", PAYMENT))), ToolNode(tools), timeout=1.0).ainvoke(ASK)
            except NodeTimeoutError:
                STATE["timed_out"] = True
        elif scenario == "tool_error_to_model":
            await create_react_agent(model(turn(("call_f1", "refund_order", REFUND))), ToolNode(tools)).ainvoke(ASK)
        elif scenario == "parallel_one_fails":
            await create_react_agent(model(turn(read_call(), ("call_c1", "charge_card", CHARGE))), ToolNode(tools)).ainvoke(ASK)
        elif scenario == "framework_retries":
            node = ToolNode(tools, handle_tool_errors=False)
            retry = RetryPolicy(max_attempts=2, initial_interval=0.01, retry_on=ToolException)
            await hand_built(model(turn(write_call())), node, retry_policy=retry).ainvoke(ASK)
        elif scenario == "requested_never_ran":
            try:
                await create_react_agent(model(turn(write_call())), ToolNode(tools)).ainvoke(ASK, {"recursion_limit": 1})
            except GraphRecursionError:
                STATE["stopped"] = True
        elif scenario == "approval_interrupt_resume":
            agent = create_react_agent(model(turn(write_call())), ToolNode(tools), checkpointer=MemorySaver())
            config = {"configurable": {"thread_id": "billing-1"}}
            first = await agent.ainvoke(ASK, config)
            assert "__interrupt__" in first, first
            await agent.ainvoke(Command(resume="approve"), config)
        elif scenario == "mcp_is_error":
            await create_react_agent(model(turn(("call_c1", "charge_card", CHARGE))), ToolNode(tools)).ainvoke(ASK)
        else:
            raise CannotProduce(scenario)
        await asyncio.sleep(0.2)  # callbacks of cancelled or failed tasks end their spans on the loop


def run(scenario: str) -> None:
    with session():
        asyncio.run(scenario_run(scenario))


if __name__ == "__main__":
    raise SystemExit(main(run))
