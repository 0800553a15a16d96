"""LangGraph (the prebuilt ReAct agent and ToolNode) under OpenInference's LangChain instrumentation, offline.

The model is langchain-core's own fake chat model (``GenericFakeChatModel``, given ``bind_tools``) answering
scripted ``AIMessage`` s with ``tool_calls``. Every scenario uses LangGraph's own mechanism: ToolNode's
``handle_tool_errors``, a node ``retry_policy`` (``RetryPolicy``), a node ``timeout`` (``NodeTimeoutError``),
``recursion_limit``, and ``interrupt()`` answered by ``Command(resume=...)`` through a checkpointer.

OpenInference's LangChain tracer attaches no OpenTelemetry context around a tool (its ``_start_trace``
says why), so ``trace.get_current_span()`` inside a tool body is not the tool's span. Each tool body
reaches its span through OpenInference's own ``get_current_span()`` (the run's callback manager) and
labels it there, as a user of this instrumentation would pass ``span=`` to ``declare``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import warnings

from openinference.instrumentation.langchain import LangChainInstrumentor, get_current_span
from opentelemetry import trace

from langchain_scripted import ASK, ScriptedChatModel, hand_built, model, turn
from matrix_tools import (
    CHARGE,
    PAYMENT,
    REFUND,
    STATE,
    CannotProduce,
    charge_card,
    create_invoice,
    declare,
    lookup_customer,
    read_call,
    refund_order,
    send_payment_slow,
    write_call,
)
from runner_common import PROVIDER, main, session

from langchain_core.tools import ToolException, tool
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk
from langgraph.checkpoint.memory import MemorySaver
from langgraph.errors import GraphRecursionError, NodeTimeoutError
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.types import Command, RetryPolicy, interrupt

warnings.filterwarnings("ignore", message="create_react_agent has been moved")  # LangGraph 1.x: still its prebuilt agent


def on_its_span(fn, name: str | None = None, **options):
    """``fn`` as a LangChain tool (named ``name``, default its own; ``options``: BaseTool fields such as
    ``handle_tool_error``) whose body runs with its OpenInference tool span current."""

    def span():
        return get_current_span() or trace.INVALID_SPAN

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def body(**kwargs):
            with trace.use_span(span(), end_on_exit=False, record_exception=False, set_status_on_exception=False):
                return await fn(**kwargs)
    else:

        @functools.wraps(fn)
        def body(**kwargs):
            with trace.use_span(span(), end_on_exit=False, record_exception=False, set_status_on_exception=False):
                return fn(**kwargs)

    made = tool(body, parse_docstring=True)
    made.name = name or made.name
    for option, value in options.items():
        setattr(made, option, value)
    return made


def approved_invoice(customer: str, amount_cents: int, idempotency_key: str) -> str:
    """Create an invoice once a human approves it (LangGraph's interrupt()).

    Args:
        customer: the customer id
        amount_cents: the amount in cents
        idempotency_key: the billing API's idempotency key
    """
    declare("write", idempotency_key=idempotency_key)
    answer = interrupt({"action": "create_invoice", "customer": customer, "amount_cents": amount_cents})
    if answer != "approve":
        return "not approved"
    return create_invoice(customer, amount_cents, idempotency_key)


def refund_order_handled(order: str, amount_cents: int) -> str:
    """Refund an order: the refund API refuses, raised as LangChain's ToolException (handed to the model).

    Args:
        order: the order id
        amount_cents: the amount in cents
    """
    try:
        return refund_order(order, amount_cents)
    except RuntimeError as exc:
        raise ToolException(str(exc)) from exc


def tools(*fns):
    return [on_its_span(f) for f in fns]


WRITE_TOOLS = (lookup_customer, create_invoice, charge_card, refund_order)


def run(scenario: str) -> None:
    if scenario.startswith("stream_"):
        return streamed(scenario)
    if scenario == "mcp_is_error":
        raise CannotProduce("no MCP server in this cell: LangGraph calls MCP servers through langchain-mcp-adapters (the langchain_mcp row)")
    with session():
        if scenario == "read_ok":
            create_react_agent(model(turn(read_call())), ToolNode(tools(*WRITE_TOOLS))).invoke(ASK)
        elif scenario == "write_commits":
            create_react_agent(model(turn(write_call())), ToolNode(tools(*WRITE_TOOLS))).invoke(ASK)
        elif scenario == "write_raises":
            # ToolNode's default handle_tool_errors hands only invocation (argument) errors to the model: the error propagates
            create_react_agent(model(turn(("call_c1", "charge_card", CHARGE))), ToolNode(tools(*WRITE_TOOLS))).invoke(ASK)
        elif scenario == "write_times_out":
            # the node's own timeout (add_node(timeout=), LangGraph >= 1.2): NodeTimeoutError ends the run
            graph = hand_built(model(turn(("call_p1", "send_payment", PAYMENT))), ToolNode([on_its_span(send_payment_slow, "send_payment")]), timeout=0.3)

            async def timed_out():
                try:
                    await graph.ainvoke(ASK)
                except NodeTimeoutError:
                    STATE["timed_out"] = True
                    # the cancelled node's callbacks (its chain span's end) run on the loop after the error is out
                    await asyncio.sleep(0.3)

            asyncio.run(timed_out())
        elif scenario == "tool_error_to_model":
            node = ToolNode(tools(*WRITE_TOOLS), handle_tool_errors=True)  # the error goes to the model: ToolMessage status=error
            create_react_agent(model(turn(("call_f1", "refund_order", REFUND))), node).invoke(ASK)
        elif scenario == "parallel_one_fails":
            # one turn's calls run in parallel; the refund's ToolException is handed to the model by the tool's own
            # handle_tool_error (langchain-core BaseTool): its span ends OK with a ToolMessage status=error
            refund = on_its_span(refund_order_handled, "refund_order", handle_tool_error=True)
            node = ToolNode([*tools(lookup_customer), refund])
            create_react_agent(model(turn(read_call(), ("call_f1", "refund_order", REFUND))), node).invoke(ASK)
        elif scenario == "framework_retries":
            STATE["flaky"] = True  # the first create_invoice raises ConnectionError; the node's RetryPolicy runs it again
            node = ToolNode(tools(*WRITE_TOOLS), handle_tool_errors=False)
            graph = hand_built(model(turn(write_call())), node, retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, retry_on=ConnectionError))
            asyncio.run(graph.ainvoke(ASK))
        elif scenario == "requested_never_ran":
            # recursion_limit=1: the model's step uses the one super-step; the tools node never runs
            try:
                create_react_agent(model(turn(write_call())), ToolNode(tools(*WRITE_TOOLS))).invoke(ASK, {"recursion_limit": 1})
            except GraphRecursionError:
                STATE["stopped"] = True
        elif scenario == "approval_interrupt_resume":
            approve = on_its_span(approved_invoice, "create_invoice")
            agent = create_react_agent(model(turn(write_call())), ToolNode([approve, *tools(lookup_customer)]), checkpointer=MemorySaver())
            config = {"configurable": {"thread_id": "billing-1"}}
            first = agent.invoke(ASK, config)
            assert "__interrupt__" in first, first
            agent.invoke(Command(resume="approve"), config)
        else:
            raise CannotProduce(scenario)


class StreamingChatModel(ScriptedChatModel):
    """The scripted model, streamed as a provider's chat model streams: each turn one ``AIMessageChunk`` whose
    ``tool_call_chunks`` carry the calls (langchain-core's fake model drops ``tool_calls`` when it streams)."""

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN003, ANN202 - BaseChatModel's hook
        message = self._generate(messages, stop=stop, run_manager=run_manager, **kwargs).generations[0].message
        calls = [tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i) for i, c in enumerate(message.tool_calls)]
        chunk = ChatGenerationChunk(message=AIMessageChunk(content=message.content, tool_call_chunks=calls, id=message.id, chunk_position="last"))
        if run_manager:
            run_manager.on_llm_new_token(message.content or "", chunk=chunk)
        yield chunk


def streamed(scenario: str) -> None:
    """The matrix's scenarios run streamed (``graph.stream``/``astream``, ``stream_mode=["messages", "updates"]``:
    tokens and node updates, as a chat UI consumes them), with no enclosing span: as users run them."""
    nodes = {
        "stream_write_commits": (turn(write_call()), lambda: ToolNode(tools(*WRITE_TOOLS))),
        "stream_write_raises": (turn(("call_c1", "charge_card", CHARGE)), lambda: ToolNode(tools(*WRITE_TOOLS))),
        "stream_tool_error_to_model": (turn(("call_f1", "refund_order", REFUND)), lambda: ToolNode(tools(*WRITE_TOOLS), handle_tool_errors=True)),
        "stream_parallel_one_fails": (turn(read_call(), ("call_f1", "refund_order", REFUND)), _parallel_node),
        "stream_async_parallel_one_fails": (turn(read_call(), ("call_f1", "refund_order", REFUND)), _parallel_node),
        "stream_requested_never_ran": (turn(write_call()), lambda: ToolNode(tools(*WRITE_TOOLS))),
        "stream_abandoned_after_request": (turn(write_call()), lambda: ToolNode(tools(*WRITE_TOOLS))),
        "stream_events_write_commits": (turn(write_call()), lambda: ToolNode(tools(*WRITE_TOOLS))),
        "stream_events_parallel_one_fails": (turn(read_call(), ("call_f1", "refund_order", REFUND)), _parallel_node),
        "stream_events_abandoned_after_request": (turn(write_call()), lambda: ToolNode(tools(*WRITE_TOOLS))),
        "stream_async_cancelled_during_write": (turn(("call_p1", "send_payment", PAYMENT)), lambda: ToolNode([on_its_span(send_payment_slow, "send_payment")])),
    }
    if scenario == "stream_abandoned_then_run":  # in one thread: an abandoned stream, then the next (plain) run
        streamed("stream_abandoned_after_request")
        create_react_agent(model(turn(write_call("call_w2"))), ToolNode(tools(*WRITE_TOOLS))).invoke({"messages": [("user", "bill customer b")]})
        return
    if scenario not in nodes:
        raise CannotProduce(scenario)
    asked, node = nodes[scenario]
    agent = create_react_agent(StreamingChatModel(messages=iter([asked, AIMessage(content="done")])), node())
    config = {"recursion_limit": 1} if scenario == "stream_requested_never_ran" else {}
    modes = ["messages", "updates"]
    try:
        if scenario == "stream_async_cancelled_during_write":
            asyncio.run(_cancelled_while_writing(agent, modes))
        elif scenario.startswith("stream_events_"):
            asyncio.run(_events(agent, abandon=scenario.endswith("abandoned_after_request")))
        elif scenario.startswith("stream_async_"):

            async def consume():
                async for _ in agent.astream(ASK, config, stream_mode=modes):
                    pass

            asyncio.run(consume())
        else:
            for mode, chunk in agent.stream(ASK, config, stream_mode=modes):
                if scenario == "stream_abandoned_after_request" and mode == "updates" and "agent" in chunk:
                    break  # the consumer (a chat UI whose user left) stops reading once the model's turn streamed
    except GraphRecursionError:
        STATE["stopped"] = True


async def _events(agent, abandon: bool) -> None:
    """``astream_events(version="v2")``, as LangChain chat UIs consume a run; ``abandon``: the consumer stops reading
    at the model's end event holding the tool calls (the generator closed)."""
    events = agent.astream_events(ASK, version="v2")
    async for event in events:
        if abandon and event["event"] == "on_chat_model_end" and event["data"]["output"].tool_calls:
            break
    await events.aclose()
    await asyncio.sleep(0.3)  # the closed run's callbacks (its spans' ends) run on the loop after


async def _cancelled_while_writing(agent, modes) -> None:
    """The consumer's task is cancelled (a client disconnect) while the write runs."""

    async def consume():
        async for _ in agent.astream(ASK, stream_mode=modes):
            pass

    task = asyncio.ensure_future(consume())
    while not STATE.get("send_payment"):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        STATE["cancelled"] = True
    await asyncio.sleep(0.3)  # the cancelled run's callbacks (its spans' ends) run on the loop after


def _parallel_node() -> ToolNode:
    return ToolNode([*tools(lookup_customer), on_its_span(refund_order_handled, "refund_order", handle_tool_error=True)])


if __name__ == "__main__":
    LangChainInstrumentor().instrument(tracer_provider=PROVIDER)  # here, not at import: the LangSmith row loads this module
    raise SystemExit(main(run))
