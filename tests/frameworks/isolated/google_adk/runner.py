"""Google ADK under its own OpenTelemetry tracing (google/adk/telemetry), scripted offline.

The model is a ``BaseLlm`` subclass answering from a script (as ADK's own tests' mock model does): each
turn one ``LlmResponse`` whose content holds ``function_call`` parts (several in one turn: ADK runs them
in parallel and opens ``execute_tool (merged)`` after them), or a text. ADK's tracer is
``trace.get_tracer("gcp.vertex.agent")`` at import, a proxy that resolves to the global provider
runner_common sets. ADK 2.x's default telemetry schema (v2, semconv-aligned: ``invoke_agent``,
``generate_content``, ``execute_tool <name>``) records tool arguments and results only when content
capture puts content on spans: the runner sets ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` to
``SPAN_AND_EVENT`` as a user who wants to see calls does (the matrix test removes every OTEL_ variable
from the runner's environment, so this is the only setting). mcp_is_error runs the billing MCP server
(``matrix_tools.MCP_BILLING_SERVER``, FastMCP over stdio) through ADK's own ``McpToolset``.
"""

from __future__ import annotations

import asyncio
import os
import sys

os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_AND_EVENT"
os.environ.setdefault("GOOGLE_API_KEY", "offline-fake-key")  # never used: the model is scripted
os.environ["ADK_DISABLE_TELEMETRY_UPLOAD"] = "1"

from matrix_tools import (  # noqa: E402 - after the environment lines
    CHARGE,
    MCP_BILLING_SERVER,
    PAYMENT,
    REFUND,
    STATE,
    CannotProduce,
    charge_card,
    create_invoice,
    lookup_customer,
    read_call,
    refund_order,
    send_payment,
    write_call,
)
from runner_common import main, session  # noqa: E402 - after the environment lines

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.run_config import RunConfig, StreamingMode  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.plugins.reflect_retry_tool_plugin import ReflectAndRetryToolPlugin  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from google.adk.tools.mcp_tool.mcp_session_manager import StdioConnectionParams  # noqa: E402
from google.adk.tools.mcp_tool.mcp_toolset import McpToolset  # noqa: E402
from mcp import StdioServerParameters  # noqa: E402
from google.genai import types  # noqa: E402

class ScriptedModel(BaseLlm):
    """Answers each model turn from ``script``: a list of calls ``(id, name, args)`` or a text."""

    script: list = []

    async def generate_content_async(self, llm_request, stream: bool = False):
        turn = self.script.pop(0) if self.script else "done"
        if isinstance(turn, str):
            parts = [types.Part(text=turn)]
            if stream:  # streamed (RunConfig streaming_mode SSE): the text in a partial response first, as a provider's
                yield LlmResponse(content=types.Content(role="model", parts=parts), partial=True)
        else:
            parts = [types.Part(function_call=types.FunctionCall(id=cid, name=name, args=dict(args))) for cid, name, args in turn]
        yield LlmResponse(content=types.Content(role="model", parts=parts), turn_complete=True)


def hand_error_to_model(tool, args, tool_context, error):
    """ADK's on_tool_error_callback: the error becomes the tool's response to the model."""
    return {"error": f"{type(error).__name__}: {error}"}


def _run(turns: list, tools: list, *, callbacks: dict | None = None, plugins: list | None = None, resume: bool = False, streamed: str = "") -> None:
    """One run; ``streamed``: "" (not streamed), "sse" (RunConfig streaming_mode SSE, every event consumed) or "abandon"
    (SSE, the consumer stops reading at the event holding the model's function calls)."""
    model = ScriptedModel(model="scripted-model", script=list(turns))
    agent = LlmAgent(name="billing", model=model, tools=tools, instruction="bill the customer", **(callbacks or {}))
    runner = InMemoryRunner(agent=agent, app_name="billing", plugins=plugins or [])

    async def go():
        s = await runner.session_service.create_session(app_name="billing", user_id="u1")
        message = types.Content(role="user", parts=[types.Part(text="bill customer a")])
        confirmations = []
        config = RunConfig(max_llm_calls=10, streaming_mode=StreamingMode.SSE if streamed else StreamingMode.NONE)
        events = runner.run_async(user_id="u1", session_id=s.id, new_message=message, run_config=config)
        async for event in events:
            if streamed == "abandon" and event.get_function_calls():
                await events.aclose()  # the consumer (a chat UI whose user left) stops reading
                break
            for call in event.get_function_calls() or []:
                if call.name == "adk_request_confirmation":
                    confirmations.append(call.id)
        if resume:
            answer = types.Content(
                role="user",
                parts=[types.Part(function_response=types.FunctionResponse(id=cid, name="adk_request_confirmation", response={"confirmed": True})) for cid in confirmations],
            )
            async for _ in runner.run_async(user_id="u1", session_id=s.id, new_message=answer):
                pass
        STATE["confirmations"] = confirmations
        for toolset in [t for t in tools if isinstance(t, McpToolset)]:
            await toolset.close()  # the server process ends with its session

    asyncio.run(go())


STREAMED = {"stream_write_commits", "stream_write_raises", "stream_tool_error_to_model", "stream_parallel_one_fails", "stream_requested_never_ran"}


def run(scenario: str) -> None:
    """The matrix's scenarios; ``stream_<scenario>`` (the five of STREAMED) and ``stream_abandoned_after_request``: the
    same runs streamed (SSE)."""
    streamed = ""
    if scenario == "stream_abandoned_after_request":
        scenario, streamed = "write_commits", "abandon"
    elif scenario in STREAMED:
        scenario, streamed = scenario.removeprefix("stream_"), "sse"
    tools = {f.__name__: FunctionTool(f) for f in (lookup_customer, create_invoice, charge_card, send_payment, refund_order)}
    callbacks: dict = {}
    plugins: list = []
    resume = False
    if scenario == "read_ok":
        turns = [[read_call()], "done"]
    elif scenario == "write_commits":
        turns = [[write_call()], "done"]
    elif scenario == "write_raises":
        turns = [[("call_c1", "charge_card", CHARGE)], "done"]  # no error callback: ADK lets the error out of the run
    elif scenario == "write_times_out":
        turns = [[("call_p1", "send_payment", PAYMENT)], "done"]  # no tool timeout in ADK: a TimeoutError raised in the tool
    elif scenario == "tool_error_to_model":
        callbacks["on_tool_error_callback"] = hand_error_to_model
        turns = [[("call_f1", "refund_order", REFUND)], "done"]
    elif scenario == "parallel_one_fails":
        callbacks["on_tool_error_callback"] = hand_error_to_model
        turns = [[read_call(), ("call_f1", "refund_order", REFUND)], "done"]
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        plugins = [ReflectAndRetryToolPlugin(max_retries=2)]  # ADK's own retry: the error and guidance go to the model, which asks again
        turns = [[write_call("call_w1")], [write_call("call_w2")], "done"]
    elif scenario in ("requested_never_ran", "approval_interrupt_resume"):
        tools["create_invoice"] = FunctionTool(create_invoice, require_confirmation=True)
        resume = scenario == "approval_interrupt_resume"
        turns = [[write_call()], "done"]
    elif scenario == "mcp_is_error":
        server = StdioServerParameters(command=sys.executable, args=[str(MCP_BILLING_SERVER)])
        tools = {"mcp": McpToolset(connection_params=StdioConnectionParams(server_params=server, timeout=30), tool_filter=["charge_card"])}
        turns = [[("call_c1", "charge_card", CHARGE)], "done"]
    else:
        raise CannotProduce(scenario)
    if resume:
        with session():
            _run(turns, list(tools.values()), callbacks=callbacks, plugins=plugins, resume=True)
    else:
        _run(turns, list(tools.values()), callbacks=callbacks, plugins=plugins, streamed=streamed)


if __name__ == "__main__":
    raise SystemExit(main(run))
