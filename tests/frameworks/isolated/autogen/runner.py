"""AutoGen AgentChat 0.7 under its own OpenTelemetry tracing (autogen-core's ``execute_tool`` spans),
scripted offline with autogen-ext's ``ReplayChatCompletionClient`` returning ``FunctionCall`` lists.

AutoGen traces through the global tracer provider (``trace_tool_span`` in autogen_core/_telemetry/_genai.py),
which ``runner_common`` sets; the (async) tool bodies run inside their ``execute_tool`` span, so ``declare`` labels
it. mcp_is_error runs ``mcp_server.py`` (FastMCP over stdio) through autogen-ext's ``McpWorkbench``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from pathlib import Path

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import HandoffTermination, TextMentionTermination
from autogen_agentchat.messages import HandoffMessage
from autogen_agentchat.teams import Swarm
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams
from matrix_tools import (
    CHARGE,
    CUSTOMER,
    PAYMENT,
    REFUND,
    STATE,
    CannotProduce,
    create_invoice,
    lookup_customer,
    read_call,
    refund_order,
    send_payment,
    write_call,
)
from runner_common import main, session

MODEL_INFO = ModelInfo(vision=False, function_calling=True, json_output=False, family=ModelFamily.UNKNOWN, structured_output=False)


def calls(*requested) -> CreateResult:
    """One model turn requesting ``requested`` ((call id, tool, arguments) each) together."""
    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id=cid, name=name, arguments=json.dumps(args)) for cid, name, args in requested],
        usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
        cached=False,
    )


def tool(f) -> FunctionTool:
    """``f`` as an async FunctionTool: AutoGen runs a sync tool function in the loop's executor without the
    caller's context (FunctionTool.run, run_in_executor), so its body could not reach its execute_tool span to
    label it; an async one runs inside that span (and AutoGen's own examples write tools async)."""

    @functools.wraps(f)
    async def body(*args, **kwargs):
        return f(*args, **kwargs)

    return FunctionTool(body, description=f.__doc__.strip().splitlines()[0], name=f.__name__)


def replay_client(turns: list) -> ReplayChatCompletionClient:
    """The scripted model of the native runs: autogen-ext's ReplayChatCompletionClient answering ``turns``
    (:class:`CreateResult` or text each) in order."""
    return ReplayChatCompletionClient(turns, model_info=MODEL_INFO)


def agent(client, tools: list, **kwargs) -> AssistantAgent:
    return AssistantAgent("billing", model_client=client, tools=tools, **kwargs)


async def approval(model_client) -> None:
    """Swarm + HandoffTermination: the agent hands off to the user for approval (the run stops), the user
    answers with a HandoffMessage and the team resumes, the write runs."""
    turns = [calls(("call_h1", "transfer_to_user", {})), calls(write_call()), "TERMINATE"]
    with session():
        billing = AssistantAgent("billing", model_client=model_client(turns), tools=[tool(create_invoice)], handoffs=["user"])
        team = Swarm([billing], termination_condition=HandoffTermination(target="user") | TextMentionTermination("TERMINATE"))
        await team.run(task="bill customer a; ask the user to approve first")
        await team.run(task=HandoffMessage(source="user", target="billing", content="approved"))


async def mcp_call(tool_name: str, model_client) -> None:
    """The agent calls an MCP server's tool through autogen-ext's McpWorkbench (stdio): ``charge_card`` answers
    isError (mcp_is_error), ``capture_payment`` commits (mcp_commits: not a matrix scenario, the committed twin
    tests/frameworks/test_autogen_mcp_spans.py compares the failed call's span with)."""
    params = StdioServerParams(command=sys.executable, args=[str(Path(__file__).with_name("mcp_server.py"))], read_timeout_seconds=30)
    with session():
        async with McpWorkbench(params) as workbench:
            billing = AssistantAgent("billing", model_client=model_client([calls(("call_c1", tool_name, CHARGE)), "done"]), workbench=workbench)
            result = await billing.run(task="charge customer a")
            STATE["mcp_results"] = [str(m) for m in result.messages]


STREAMED = {"stream_write_commits", "stream_tool_error_to_model", "stream_parallel_one_fails", "stream_requested_never_ran"}


def run(scenario: str, model_client=replay_client) -> None:
    """Make ``scenario``'s spans; ``model_client(turns)`` is the scripted model (the OpenInference runner's is
    an OpenAI client over a scripted HTTP transport, the one model client that instrumentation traces).
    ``stream_<scenario>`` (STREAMED's four): the same run streamed, ``run_stream`` consumed to its end with the
    model's answers streamed too (``model_client_stream=True``: the client's ``create_stream``)."""
    streamed = scenario in STREAMED
    scenario = scenario.removeprefix("stream_") if streamed else scenario
    tools = [tool(lookup_customer), tool(create_invoice), tool(refund_order)]
    kwargs: dict = {}
    if scenario == "read_ok":
        turns = [calls(read_call())]
    elif scenario == "write_commits":
        turns = [calls(write_call())]
    elif scenario == "write_raises":
        raise CannotProduce(WRITE_RAISES)
    elif scenario == "write_times_out":
        tools.append(tool(send_payment))  # no tool timeout in AutoGen: a TimeoutError raised in the tool
        turns = [calls(("call_p1", "send_payment", PAYMENT))]
    elif scenario == "tool_error_to_model":
        turns = [calls(("call_f1", "refund_order", REFUND))]
    elif scenario == "parallel_one_fails":
        turns = [calls(read_call(), ("call_f1", "refund_order", REFUND))]
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        turns = [calls(write_call("call_w1")), calls(write_call("call_w2"))]
        kwargs["max_tool_iterations"] = 3
    elif scenario == "requested_never_ran":
        turns = [calls(("call_x1", "delete_customer", CUSTOMER))]
    elif scenario == "approval_interrupt_resume":
        asyncio.run(approval(model_client))
        return
    elif scenario in ("mcp_is_error", "mcp_commits"):
        asyncio.run(mcp_call("charge_card" if scenario == "mcp_is_error" else "capture_payment", model_client))
        return
    else:
        raise CannotProduce(scenario)
    async def one_run() -> None:
        # one session span, as a user's app has: AssistantAgent's create_agent span (made by its constructor) and
        # its invoke_agent span are siblings, so without a parent they would be two traces
        with session():
            if not streamed:
                await agent(model_client([*turns, "done"]), tools, **kwargs).run(task="bill customer a")
                return
            async for _event in agent(model_client([*turns, "done"]), tools, model_client_stream=True, **kwargs).run_stream(task="bill customer a"):
                pass

    asyncio.run(one_run())


WRITE_RAISES = (
    "AutoGen's workbench catches every tool exception and hands it to the model as the call's result "
    "(FunctionExecutionResult is_error): tool_error_to_model is that path"
)

if __name__ == "__main__":
    raise SystemExit(main(run))
