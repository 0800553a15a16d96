"""Agno under OpenInference's Agno instrumentation (openinference-instrumentation-agno), scripted offline.

The model is an Agno ``Model`` subclass answering from a script: each turn one ``ModelResponse`` whose
``tool_calls`` are OpenAI-shaped (``{"id", "type": "function", "function": {"name", "arguments"}}``, several in one
turn for parallel calls), or a text. OpenInference wraps ``invoke`` / ``ainvoke`` / ``invoke_stream`` /
``ainvoke_stream`` of the ``Model`` subclasses it finds in the ``agno.models`` package when it instruments
(``find_model_subclasses``): a model class defined elsewhere gets no LLM span. The scripted model is put in
``agno.models.base``'s namespace before instrumenting, so the instrumentor's own wrapper makes its LLM spans as it
does a provider model's. Each call Agno runs is ``FunctionCall.execute`` / ``aexecute``, which OpenInference wraps in
a TOOL span (named for the tool, no call id); the tool bodies ``declare`` on it (it is current while they run).

Agno's own features, where it has them: a tool hook raising ``StopAgentRun`` (the run stops) or ``RetryAgentRun``
(Agno's retry: the model is asked again); ``requires_confirmation`` (the run pauses; ``continue_run`` after the
requirement is confirmed); ``tool_call_limit``; ``MCPTools`` over stdio against the billing MCP server (its
``timeout_seconds`` is the framework's own tool timeout). Extra scenarios outside the matrix (named on the command
line): ``tool_call_limit``, ``mcp_commits``, ``stream_write_commits``, ``stream_tool_error_to_model``,
``stream_write_raises``, ``stream_parallel_one_fails``, ``stream_requested_never_ran``, ``stream_abandoned_after_request``,
``stream_abandoned_then_run``, ``hook_swallows_error``; content capture off is OpenInference's ``OPENINFERENCE_HIDE_INPUTS`` /
``OPENINFERENCE_HIDE_OUTPUTS`` in the runner's environment (``TraceConfig`` reads them).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("AGNO_TELEMETRY", "false")  # no usage ping to Agno's API (the runs are offline)

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
    write_call,
)
from runner_common import PROVIDER, main, session  # noqa: E402

import agno.models.base as agno_models_base  # noqa: E402
from agno.agent import Agent  # noqa: E402
from agno.exceptions import RetryAgentRun, StopAgentRun  # noqa: E402
from agno.models.base import Model  # noqa: E402
from agno.models.response import ModelResponse  # noqa: E402
from agno.tools import tool  # noqa: E402
from agno.tools.mcp import MCPTools  # noqa: E402
from mcp import StdioServerParameters  # noqa: E402


@dataclass
class ScriptedModel(Model):
    """Answers each model turn from ``script``: a list of calls ``(id, name, args)`` or a text."""

    id: str = "scripted-model"
    name: str = "ScriptedModel"
    provider: str = "scripted"
    script: list = field(default_factory=list)

    def _next(self) -> ModelResponse:
        turn = self.script.pop(0) if self.script else "done"
        if isinstance(turn, str):
            return ModelResponse(role="assistant", content=turn)
        calls = [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}} for cid, name, args in turn]
        return ModelResponse(role="assistant", tool_calls=calls)

    # The signature of Agno's provider models' invoke (OpenInference records the bound ``messages`` as the input).
    def invoke(self, messages, assistant_message, response_format=None, tools=None, tool_choice=None, run_response=None, compress_tool_results=False):
        return self._next()

    async def ainvoke(self, messages, assistant_message, response_format=None, tools=None, tool_choice=None, run_response=None, compress_tool_results=False):
        return self._next()

    def invoke_stream(self, messages, assistant_message, response_format=None, tools=None, tool_choice=None, run_response=None, compress_tool_results=False):
        yield self._next()

    async def ainvoke_stream(self, messages, assistant_message, response_format=None, tools=None, tool_choice=None, run_response=None, compress_tool_results=False):
        yield self._next()

    def _parse_provider_response(self, response: Any, **kwargs) -> ModelResponse:
        return response

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response


# OpenInference instruments the Model subclasses it finds in agno.models' modules: the scripted one is put there.
agno_models_base.ScriptedModel = ScriptedModel  # type: ignore[attr-defined]

# -- Agno's tool hooks (a hook wraps the call: ``next_func(**arguments)`` runs the tool) ----------------------------


def stop_run_on_error(function_name: str, function_call, arguments: dict):
    """The run stops at a failed tool: Agno's ``StopAgentRun`` raised from a tool hook."""
    try:
        return function_call(**arguments)
    except (RuntimeError, ConnectionError, TimeoutError) as exc:
        raise StopAgentRun(f"{function_name} failed: {exc}") from exc


def retry_on_connection_error(function_name: str, function_call, arguments: dict):
    """Agno's retry: ``RetryAgentRun`` from a tool hook hands the error to the model, which asks again."""
    try:
        return function_call(**arguments)
    except ConnectionError as exc:
        raise RetryAgentRun(f"{function_name} failed ({exc}); call it again") from exc


def swallow_error(function_name: str, function_call, arguments: dict):
    """A user's hook that turns the error into the tool's text (Agno then records success)."""
    try:
        return function_call(**arguments)
    except RuntimeError as exc:
        return f"Error: {exc}"


def _tools(**wrapped) -> list:
    plain = {f.__name__: f for f in (lookup_customer, create_invoice, charge_card, refund_order)}
    plain.update(wrapped)
    return list(plain.values())


def _mcp(timeout_s: int = 10, include: list[str] | None = None, env: dict | None = None) -> MCPTools:
    server = StdioServerParameters(command=sys.executable, args=[str(MCP_BILLING_SERVER)], env={**os.environ, **(env or {})})
    return MCPTools(server_params=server, transport="stdio", timeout_seconds=timeout_s, include_tools=include)


def _agent(turns: list, tools: list, **settings) -> Agent:
    return Agent(name="billing", model=ScriptedModel(script=list(turns)), tools=tools, instructions="bill the customer", telemetry=False, **settings)


def _run(turns: list, tools: list, *, asynchronous: bool = False, stream: bool | str = False, **settings) -> Any:
    agent = _agent(turns, tools, **settings)
    if not asynchronous:
        if stream == "abandon":  # the consumer stops reading at the first tool call event (a chat UI whose user left)
            events = agent.run("bill customer a", stream=True, stream_events=True)  # the run's events, tool calls too
            for event in events:
                if "ToolCallStarted" in type(event).__name__:
                    STATE["abandoned_at"] = type(event).__name__
                    break
            events.close()
            if "abandoned_at" not in STATE:
                raise RuntimeError("the stream showed no tool call")
            return None
        if stream:
            return list(agent.run("bill customer a", stream=True))
        return agent.run("bill customer a")
    if stream:  # arun(stream=True): an async iterator of the run's events (its calls run with asyncio.gather)

        async def consume():
            return [event async for event in agent.arun("bill customer a", stream=True)]

        return asyncio.run(consume())

    async def go():
        mcp = [t for t in tools if isinstance(t, MCPTools)]
        for toolkit in mcp:
            await toolkit.connect()
        try:
            return await agent.arun("bill customer a")
        finally:
            for toolkit in mcp:
                await toolkit.close()  # the server process ends with its session

    if not any(isinstance(t, MCPTools) for t in tools):
        return asyncio.run(go())
    with session():  # the MCP session's own spans (initialize, tools/list) start before the run: one trace
        return asyncio.run(go())


def _approval(confirm: bool) -> None:
    gated = tool(requires_confirmation=True)(create_invoice)
    agent = _agent([[write_call()], "done"], _tools(create_invoice=gated))
    with session():
        paused = agent.run("bill customer a")
        STATE["paused"] = bool(paused.is_paused)
        if confirm:
            for requirement in paused.active_requirements:
                requirement.confirm()
            agent.continue_run(run_response=paused, requirements=paused.requirements)


def run(scenario: str) -> None:
    if scenario == "read_ok":
        _run([[read_call()], "done"], _tools())
    elif scenario == "write_commits":
        _run([[write_call()], "done"], _tools())
    elif scenario == "write_raises":
        _run([[("call_c1", "charge_card", CHARGE)], "done"], _tools(), tool_hooks=[stop_run_on_error])
    elif scenario == "write_times_out":
        # Agno's own tool timeout is MCPTools' timeout_seconds, every request's (the server's start on a loaded machine
        # must fit in it, so not less); the billing server's send_payment answers after 20 s.
        mcp = _mcp(timeout_s=8, include=["send_payment"], env={"TRACEFENCE_TEST_SLOW_S": "20"})
        _run([[("call_p1", "send_payment", PAYMENT)], "done"], [mcp], asynchronous=True)
    elif scenario == "tool_error_to_model":
        _run([[("call_f1", "refund_order", REFUND)], "done"], _tools())  # Agno's default: the error is the call's result
    elif scenario == "parallel_one_fails":
        _run([[read_call(), ("call_f1", "refund_order", REFUND)], "done"], _tools(), asynchronous=True)  # arun: asyncio.gather
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        _run([[write_call("call_w1")], [write_call("call_w2")], "done"], _tools(), tool_hooks=[retry_on_connection_error])
    elif scenario in ("requested_never_ran", "approval_interrupt_resume"):
        _approval(confirm=scenario == "approval_interrupt_resume")
    elif scenario == "mcp_is_error":
        _run([[("call_c1", "charge_card", CHARGE)], "done"], [_mcp(include=["charge_card"])], asynchronous=True)
    else:
        _extra(scenario)


def _extra(scenario: str) -> None:
    """What users do beyond the ten scenarios (not matrix cells; run by name)."""
    if scenario == "tool_call_limit":
        _run([[read_call(), write_call()], "done"], _tools(), tool_call_limit=1)
    elif scenario == "mcp_commits":
        _run([[("call_w1", "create_invoice", dict(customer="a", amount_cents=1200, idempotency_key="inv-17"))], "done"], [_mcp(include=["create_invoice"])], asynchronous=True)
    elif scenario == "stream_write_commits":
        _run([[write_call()], "done"], _tools(), stream=True)
    elif scenario == "stream_tool_error_to_model":
        _run([[("call_f1", "refund_order", REFUND)], "done"], _tools(), stream=True)
    elif scenario == "stream_write_raises":
        _run([[("call_c1", "charge_card", CHARGE)], "done"], _tools(), stream=True, tool_hooks=[stop_run_on_error])
    elif scenario == "stream_parallel_one_fails":
        _run([[read_call(), ("call_f1", "refund_order", REFUND)], "done"], _tools(), asynchronous=True, stream=True)
    elif scenario == "stream_requested_never_ran":  # a call waiting for confirmation, never confirmed (the stream ends paused)
        _run([[write_call()], "done"], _tools(create_invoice=tool(requires_confirmation=True)(create_invoice)), stream=True)
    elif scenario == "stream_abandoned_after_request":
        _run([[write_call()], "done"], _tools(), stream="abandon")
    elif scenario == "stream_abandoned_then_run":  # in one thread: an abandoned stream, then the next (plain) run
        _run([[write_call()], "done"], _tools(), stream="abandon")
        _run([[write_call("call_w2")], "done"], _tools())
    elif scenario == "hook_swallows_error":
        _run([[("call_f1", "refund_order", REFUND)], "done"], _tools(), tool_hooks=[swallow_error])
    else:
        raise CannotProduce(scenario)


def instrument() -> None:
    """OpenInference's Agno instrumentor on the runner's provider (TraceConfig reads OPENINFERENCE_HIDE_*)."""
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.agno import AgnoInstrumentor

    AgnoInstrumentor().instrument(tracer_provider=PROVIDER, config=TraceConfig())


if __name__ == "__main__":  # another row (agno_openllmetry) loads this file and instruments otherwise
    instrument()
    raise SystemExit(main(run))
