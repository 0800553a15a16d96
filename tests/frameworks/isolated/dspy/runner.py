"""DSPy's ReAct agent under OpenInference's DSPy instrumentation, offline.

The model is DSPy's own ``DummyLM`` (``dspy.utils``), answering scripted turns in ReAct's fields
(``next_thought``, ``next_tool_name``, ``next_tool_args``; the last turn the extract step's ``reasoning`` and
``answer``), formatted by the ChatAdapter as a real model's text would be. OpenInference wraps ``Tool.__call__`` /
``Tool.acall`` in a TOOL span made current around the body, so each tool labels its own span with ``declare``.

ReAct asks for one tool per turn and catches every exception a tool raises, handing the model
``Execution error in <tool>: <error>`` as the observation; it has no tool timeout, no retry and no approval API.
A requested call that never ran is a call to a tool the agent lacks: ReAct's ``next_tool_name`` is a ``Literal`` of
its tools, so the ChatAdapter and its JSONAdapter fallback cannot parse the turn, and their ``AdapterParseError`` (no
``ValueError`` in DSPy 3.4, so ReAct's "failed to select a valid tool" handler does not catch it) ends the run before
any tool ran.
"""

from __future__ import annotations

import asyncio
import sys

import dspy
from dspy.utils import DummyLM
from matrix_tools import (
    CHARGE,
    CUSTOMER,
    INVOICE,
    MCP_BILLING_SERVER,
    PAYMENT,
    STATE,
    CannotProduce,
    charge_card,
    create_invoice,
    lookup_customer,
    send_payment,
)
from openinference.instrumentation.dspy import DSPyInstrumentor
from runner_common import PROVIDER, main, session

ASK = {"request": "bill customer a"}
ANSWER = {"reasoning": "the tools answered", "answer": "done"}


def turn(tool: str, args: dict) -> dict:
    """One ReAct turn of the model: the tool it picks and the arguments (JSON in the model's text)."""
    return {"next_thought": f"I call {tool}", "next_tool_name": tool, "next_tool_args": dict(args)}


FINISH = turn("finish", {})


def react(tools: list, *turns: dict, lm_answers: tuple = ()) -> dspy.Prediction:
    """ReAct over ``tools`` with the model answering ``turns``, then ``finish`` and the extract step's answer."""
    lm = DummyLM([*turns, *(lm_answers or (FINISH, ANSWER))])
    with dspy.context(lm=lm):
        return dspy.ReAct("request -> answer", tools=tools)(**ASK)


def streamed(scenario: str) -> None:
    """``dspy.streamify`` over ReAct (its output consumed to the end, as a streaming UI does), with no enclosing span:
    ``stream_write_commits``, ``stream_write_raises``, ``stream_requested_never_ran``."""
    program = {
        "stream_write_commits": ([lookup_customer, create_invoice], [turn("create_invoice", INVOICE), FINISH, ANSWER]),
        "stream_write_raises": ([charge_card], [turn("charge_card", CHARGE), FINISH, ANSWER]),
        "stream_requested_never_ran": ([lookup_customer, create_invoice], [turn("delete_customer", CUSTOMER)] * 2 + [ANSWER]),
    }
    if scenario not in program:
        raise CannotProduce(scenario)
    tools, answers = program[scenario]

    async def consume():
        with dspy.context(lm=DummyLM(answers)):
            async for _ in dspy.streamify(dspy.ReAct("request -> answer", tools=tools))(**ASK):
                pass

    asyncio.run(consume())


def run(scenario: str) -> None:
    if scenario.startswith("stream_"):
        return streamed(scenario)
    if scenario == "tool_error_to_model":
        raise CannotProduce(
            "DSPy's ReAct has one failure path: every exception a tool raises is caught and handed to the model as the "
            "observation (write_raises is that path); no tool option lets the error out or shapes it"
        )
    if scenario == "parallel_one_fails":
        raise CannotProduce("DSPy's ReAct requests one tool per turn (next_tool_name / next_tool_args): no parallel calls")
    if scenario == "approval_interrupt_resume":
        raise CannotProduce("no human-approval or interrupt API in DSPy 3.4 (ReAct runs each requested tool at once)")
    with session():
        if scenario == "read_ok":
            react([lookup_customer], turn("lookup_customer", CUSTOMER))
        elif scenario == "write_commits":
            react([lookup_customer, create_invoice], turn("create_invoice", INVOICE))
        elif scenario == "write_raises":
            # the card processor declines: ReAct catches it, the model reads "Execution error in charge_card: ..."
            react([charge_card], turn("charge_card", CHARGE))
        elif scenario == "write_times_out":
            # no tool timeout in DSPy: a TimeoutError raised in the tool, caught by ReAct as any other
            react([send_payment], turn("send_payment", PAYMENT))
        elif scenario == "framework_retries":
            # no tool retry in DSPy: the first create_invoice raises ConnectionError, the model asks again
            STATE["flaky"] = True
            react([create_invoice], turn("create_invoice", INVOICE), turn("create_invoice", INVOICE))
        elif scenario == "requested_never_ran":
            # a call to a tool the agent lacks: the ChatAdapter, then its JSONAdapter fallback (the second answer), cannot
            # parse the turn (next_tool_name is a Literal of the agent's tools); the AdapterParseError ends the run
            wanted = turn("delete_customer", CUSTOMER)
            react([lookup_customer, create_invoice], lm_answers=(wanted, wanted, ANSWER))
        elif scenario == "mcp_is_error":
            asyncio.run(_mcp_is_error())
        else:
            raise CannotProduce(scenario)


async def _mcp_is_error() -> None:
    """dspy.Tool.from_mcp_tool over an mcp ClientSession (stdio) to the billing server; its charge_card answers isError."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(command=sys.executable, args=[str(MCP_BILLING_SERVER)])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as mcp_session:
        await mcp_session.initialize()
        listed = await mcp_session.list_tools()
        tools = [dspy.Tool.from_mcp_tool(mcp_session, t) for t in listed.tools if t.name == "charge_card"]
        lm = DummyLM([turn("charge_card", CHARGE), FINISH, ANSWER])
        with dspy.context(lm=lm):
            await dspy.ReAct("request -> answer", tools=tools).acall(**ASK)


if __name__ == "__main__":
    DSPyInstrumentor().instrument(tracer_provider=PROVIDER)
    raise SystemExit(main(run))
