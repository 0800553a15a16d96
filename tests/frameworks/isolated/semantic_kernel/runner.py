"""Semantic Kernel for Python under its own OpenTelemetry diagnostics, scripted offline.

The model is a ``ChatCompletionClientBase`` subclass returning ``FunctionCallContent`` lists, its
``_inner_get_chat_message_contents`` wrapped in SK's own ``trace_chat_completion`` (as every SK connector's is),
so the chat spans are the ones an OpenAI connector would make. SK's diagnostics are switched on by its own
environment variables (read when semantic_kernel is first imported), with content ("sensitive") capture on.
mcp_is_error runs the billing MCP server (``matrix_tools.MCP_BILLING_SERVER``, FastMCP over stdio) as SK's own
``MCPStdioPlugin``.
"""

from __future__ import annotations

import os

os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"] = "true"
os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "true"

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from typing import Any, ClassVar  # noqa: E402

from matrix_tools import (  # noqa: E402
    CHARGE,
    MCP_BILLING_SERVER,
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
from runner_common import main, session  # noqa: E402
from semantic_kernel import Kernel  # noqa: E402
from semantic_kernel.agents import ChatCompletionAgent  # noqa: E402
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase  # noqa: E402
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior  # noqa: E402
from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings  # noqa: E402
from semantic_kernel.connectors.mcp import MCPStdioPlugin  # noqa: E402
from semantic_kernel.contents import ChatMessageContent, FunctionCallContent  # noqa: E402
from semantic_kernel.contents.utils.author_role import AuthorRole  # noqa: E402
from semantic_kernel.contents.utils.finish_reason import FinishReason  # noqa: E402
from semantic_kernel.filters import AutoFunctionInvocationContext, FilterTypes  # noqa: E402
from semantic_kernel.functions import KernelArguments, kernel_function  # noqa: E402
from semantic_kernel.contents import StreamingChatMessageContent, StreamingTextContent  # noqa: E402
from semantic_kernel.utils.telemetry.model_diagnostics.decorators import trace_chat_completion, trace_streaming_chat_completion  # noqa: E402

PLUGIN = "billing"
SCRIPT: list = []  # the turns left: each a list of (call id, tool, arguments); empty: the model answers "done"


class ScriptedChat(ChatCompletionClientBase):
    """A chat service answering each request with the next scripted turn."""

    SUPPORTS_FUNCTION_CALLING: ClassVar[bool] = True

    def service_url(self) -> str | None:
        return None

    @trace_chat_completion("scripted")
    async def _inner_get_chat_message_contents(self, chat_history, settings: PromptExecutionSettings) -> list[ChatMessageContent]:
        if not SCRIPT:
            return [ChatMessageContent(role=AuthorRole.ASSISTANT, content="done", finish_reason=FinishReason.STOP)]
        items = [
            FunctionCallContent(id=cid, call_id=cid, name=f"{PLUGIN}-{name}", function_name=name, plugin_name=PLUGIN, arguments=json.dumps(args))
            for cid, name, args in SCRIPT.pop(0)
        ]
        return [ChatMessageContent(role=AuthorRole.ASSISTANT, items=items, finish_reason=FinishReason.TOOL_CALLS)]

    @trace_streaming_chat_completion("scripted")
    async def _inner_get_streaming_chat_message_contents(self, chat_history, settings: PromptExecutionSettings, function_invoke_attempt: int = 0):
        """The turn streamed as SK's OpenAI connector streams it: one chunk whose items are the calls (id, index, name,
        arguments), or the text, with the finish reason."""
        if not SCRIPT:
            text = [StreamingTextContent(choice_index=0, text="done")]
            yield [StreamingChatMessageContent(role=AuthorRole.ASSISTANT, choice_index=0, items=text, finish_reason=FinishReason.STOP, function_invoke_attempt=function_invoke_attempt)]
            return
        items = [FunctionCallContent(id=cid, index=i, name=f"{PLUGIN}-{name}", arguments=json.dumps(args)) for i, (cid, name, args) in enumerate(SCRIPT.pop(0))]
        yield [StreamingChatMessageContent(role=AuthorRole.ASSISTANT, choice_index=0, items=items, finish_reason=FinishReason.TOOL_CALLS, function_invoke_attempt=function_invoke_attempt)]


class Billing:
    """The matrix's tools as an SK plugin (the bodies are runner_common's, which label their span)."""

    @kernel_function(description="Look a customer up.")
    def lookup_customer(self, customer: str) -> str:
        return lookup_customer(customer)

    @kernel_function(description="Create an invoice.")
    def create_invoice(self, customer: str, amount_cents: int, idempotency_key: str) -> str:
        return create_invoice(customer, amount_cents, idempotency_key)

    @kernel_function(description="Refund an order.")
    def refund_order(self, order: str, amount_cents: int) -> str:
        return refund_order(order, amount_cents)

    @kernel_function(description="Send a payment.")
    def send_payment(self, customer: str, amount_cents: int) -> str:
        return send_payment(customer, amount_cents)


def approval_filter(approve: bool):
    """SK's human-in-the-loop: an auto function invocation filter asks before a write runs; a denial never calls
    ``next`` (the function does not run) and hands the model a refusal instead."""

    async def ask(context: AutoFunctionInvocationContext, next) -> None:
        if context.function.name != "create_invoice" or approve:
            STATE["asked"] = context.function.name
            await next(context)
            return
        context.function_result = type(context.function_result)(function=context.function.metadata, value="the user denied the call")

    return ask


async def one_run(turns: list, approve: bool | None = None, mcp: bool = False, streamed: bool = False) -> None:
    """One agent run (``streamed``: ``agent.invoke_stream``, every chunk consumed, with no enclosing span)."""
    SCRIPT[:] = turns
    with session() if not streamed else contextlib.nullcontext():
        kernel = Kernel()
        if approve is not None:
            kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, approval_filter(approve))
        settings = PromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
        agent = ChatCompletionAgent(service=ScriptedChat(ai_model_id="scripted-model"), kernel=kernel, name="billing", arguments=KernelArguments(settings=settings))
        if not mcp:
            kernel.add_plugin(Billing(), plugin_name=PLUGIN)
            if not streamed:
                await agent.get_response(messages="bill customer a")
                return
            async for _chunk in agent.invoke_stream(messages="bill customer a"):
                pass
            return
        async with MCPStdioPlugin(name=PLUGIN, command=sys.executable, args=[str(MCP_BILLING_SERVER)]) as billing:
            kernel.add_plugin(billing)
            await agent.get_response(messages="bill customer a")


STREAMED = {"stream_write_commits", "stream_tool_error_to_model", "stream_parallel_one_fails", "stream_requested_never_ran"}


def run(scenario: str) -> None:
    """The matrix's scenarios; ``stream_<scenario>`` (STREAMED's four): the same run streamed (``invoke_stream``)."""
    streamed = scenario in STREAMED
    scenario = scenario.removeprefix("stream_") if streamed else scenario
    approve: Any = None
    if scenario == "read_ok":
        turns = [[read_call()]]
    elif scenario == "write_commits":
        turns = [[write_call()]]
    elif scenario == "write_raises":
        raise CannotProduce(WRITE_RAISES)
    elif scenario == "write_times_out":
        turns = [[("call_p1", "send_payment", PAYMENT)]]  # no tool timeout in SK: a TimeoutError raised in the tool
    elif scenario == "tool_error_to_model":
        turns = [[("call_f1", "refund_order", REFUND)]]
    elif scenario == "parallel_one_fails":
        turns = [[read_call(), ("call_f1", "refund_order", REFUND)]]
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        turns = [[write_call("call_w1")], [write_call("call_w2")]]
    elif scenario == "requested_never_ran":
        turns, approve = [[write_call()]], False
    elif scenario == "approval_interrupt_resume":
        turns, approve = [[write_call()]], True
    elif scenario == "mcp_is_error":
        asyncio.run(one_run([[("call_c1", "charge_card", CHARGE)]], mcp=True))
        return
    else:
        raise CannotProduce(scenario)
    asyncio.run(one_run(turns, approve, streamed=streamed))


WRITE_RAISES = (
    "SK's auto function invocation catches every function exception and hands it to the model as the call's result "
    "(FunctionResultContent \"An error occurred while invoking the function ...\"): tool_error_to_model is that path"
)

if __name__ == "__main__":
    raise SystemExit(main(run))
