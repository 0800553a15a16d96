"""CrewAI under OpenInference's CrewAI instrumentation (openinference-instrumentation-crewai), scripted offline.

The model is a ``crewai.llms.base_llm.BaseLLM`` subclass answering from a script: each turn a list of OpenAI-shaped
tool calls (``{"id", "type": "function", "function": {"name", "arguments"}}``, several in one turn for parallel calls)
or a text (the final answer). It says it supports function calling, so CrewAI's agent executor takes its native
tool-calling path (``AgentExecutor._execute_single_native_tool_call``; two calls in one turn run in a thread pool).
OpenInference's default mode wraps ``Crew.kickoff``, ``Task._execute_core`` and ``BaseTool.run`` / ``Tool.run``: a
TOOL span per call (named ``<tool>.run``; ``tool.name``, ``input.value`` the arguments as JSON, ``output.value`` the
result, no call id) and no LLM span (a custom ``BaseLLM`` is not wrapped), so the model's requests are nowhere.

CrewAI's own features, where it has them: ``tool_failure_policy="raise"`` (a failed tool aborts the run with
``ToolExecutionFailedError``); ``max_execution_time`` (the agent's own timeout) with ``max_retry_limit`` (the agent
runs the task again after an error); a before-tool-call hook asking a human (``ToolCallHookContext.request_human_input``,
its answer read from standard input: the runner feeds it) that approves or blocks the call; its own MCP client
(``Agent(mcps=[MCPServerStdio(...)])``) against the billing MCP server. Content capture off is
OpenInference's ``OPENINFERENCE_HIDE_INPUTS`` / ``OPENINFERENCE_HIDE_OUTPUTS`` in the runner's environment.
Extra scenarios outside the matrix (named on the command line): see ``_extra``.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from typing import Any

# No usage telemetry to CrewAI's collector and no trace upload to its platform (the runs are offline); CrewAI's files
# (its SQLite stores) go to a folder of the run's own.
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("CREWAI_STORAGE_DIR", os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "_crewai_storage"))

from matrix_tools import (  # noqa: E402 - after the environment lines
    CHARGE,
    MCP_BILLING_SERVER,
    PAYMENT,
    REFUND,
    STATE,
    CannotProduce,
    charge_card,
    create_invoice,
    declare,
    lookup_customer,
    ran,
    read_call,
    refund_order,
    send_payment,
    write_call,
)
from runner_common import PROVIDER, main  # noqa: E402

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.events.event_bus import crewai_event_bus  # noqa: E402
from crewai.hooks.tool_hooks import ToolCallHookContext, clear_all_tool_call_hooks, register_before_tool_call_hook  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.mcp import MCPServerStdio  # noqa: E402
from crewai.mcp.filters import create_static_tool_filter  # noqa: E402
from crewai.tools import tool  # noqa: E402
from crewai.tools.tool_failure import ToolFailure  # noqa: E402


class ScriptedLLM(BaseLLM):
    """Answers each model turn from ``script``: a list of calls ``(id, name, args)``, a text, or an exception to raise."""

    script: list = []

    def call(self, messages, tools=None, callbacks=None, available_functions=None, from_task=None, from_agent=None, response_model=None):
        turn = self.script.pop(0) if self.script else "done"
        if isinstance(turn, Exception):
            raise turn
        if isinstance(turn, str):
            return turn
        offered = [t.get("function", {}).get("name", "") for t in tools or [] if isinstance(t, dict)]
        STATE["offered"] = offered
        return [{"id": cid, "type": "function", "function": {"name": _offered(name, offered), "arguments": json.dumps(args)}} for cid, name, args in turn]

    def supports_function_calling(self) -> bool:
        return True


def _offered(name: str, offered: list[str]) -> str:
    """The name CrewAI offers the model for tool ``name`` (an MCP server's tools get a prefix of the server's name)."""
    return name if name in offered else next((o for o in offered if o.endswith(name)), name)


def send_payment_slow(customer: str, amount_cents: int) -> str:
    """Send a payment: the payment API answers after the agent's max_execution_time.

    Args:
        customer: the customer id
        amount_cents: the amount in cents
    """
    declare("write")
    ran("send_payment")
    time.sleep(2.0)
    return "payment pay_1"


send_payment_slow.__name__ = "send_payment"


def charge_card_reporting(customer: str, amount_cents: int) -> ToolFailure:
    """Charge a card: the processor declines (reported as CrewAI's ToolFailure, not raised).

    Args:
        customer: the customer id
        amount_cents: the amount in cents
    """
    declare("write")
    ran("charge_card")
    return ToolFailure(message="card declined", code="card_declined")


charge_card_reporting.__name__ = "charge_card"
TOOLS = {f.__name__: f for f in (lookup_customer, create_invoice, charge_card, send_payment, refund_order)}


def _tools(*names: str, **replaced) -> list:
    plain = {**TOOLS, **replaced}
    return [tool(plain[name]) for name in names or ("lookup_customer", "create_invoice", "charge_card", "refund_order")]


def _crew(turns: list, tools: list, **settings) -> Crew:
    llm = ScriptedLLM(model="scripted-model", script=list(turns))
    agent = Agent(role="billing", goal="bill the customer", backstory="a billing clerk", llm=llm, tools=tools, verbose=False, **settings)
    task = Task(description="bill customer a", expected_output="what was billed", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)


def _run(turns: list, tools: list | None = None, **settings) -> Any:
    try:
        return _crew(turns, _tools() if tools is None else tools, **settings).kickoff()
    finally:
        # CrewAI's event bus runs its handlers on a thread pool (OpenInference's event-listener mode ends its spans
        # there): the run's spans are ended before the scenario's are collected
        crewai_event_bus.flush()


def _human_approval(answer: str):
    """A before-tool-call hook asking a human to approve each write (CrewAI's ``request_human_input``), the human's
    ``answer`` fed on standard input."""

    def approval(context: ToolCallHookContext) -> bool | None:
        if context.tool_name != "create_invoice":
            return None
        stdin, sys.stdin = sys.stdin, io.StringIO(answer + "\n")
        try:
            response = context.request_human_input(prompt="Allow create_invoice?", default_message="Type 'approve' to continue:")
        finally:
            sys.stdin = stdin
        STATE["asked"] = response
        return None if response == "approve" else False

    return approval


def _mcp(*names: str) -> MCPServerStdio:
    """The billing server as a user starts one (``python -m <module>``, the venv's interpreter first on PATH): CrewAI
    names each of its tools ``<command>_<args>_<tool>`` sanitized, cut to 64 characters with a hash when longer, so
    an absolute interpreter path would leave the tool's own name out (and make the name differ per machine)."""
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    allowed = create_static_tool_filter(allowed_tool_names=list(names))
    return MCPServerStdio(command="python", args=["-m", MCP_BILLING_SERVER.stem], env=dict(os.environ), tool_filter=allowed)


def _approval(answer: str) -> None:
    register_before_tool_call_hook(_human_approval(answer))
    _run([[write_call()], "done"])


def run(scenario: str) -> None:
    clear_all_tool_call_hooks()
    if scenario == "read_ok":
        _run([[read_call()], "done"])
    elif scenario == "write_commits":
        _run([[write_call()], "done"])
    elif scenario == "write_raises":
        # tool_failure_policy="raise": a failed tool aborts the run (ToolExecutionFailedError, never retried)
        _run([[("call_c1", "charge_card", CHARGE)], "done"], tool_failure_policy="raise")
    elif scenario == "write_times_out":
        # CrewAI has no tool timeout (max_execution_time bounds the agent's task, and waits for a running tool: see
        # _extra's agent_max_execution_time): a TimeoutError raised in the tool, handed to the model
        _run([[("call_p1", "send_payment", PAYMENT)], "done"], _tools("send_payment"))
    elif scenario == "tool_error_to_model":
        _run([[("call_f1", "refund_order", REFUND)], "done"])  # CrewAI's default: "Error executing tool: ..." to the model
    elif scenario == "parallel_one_fails":
        _run([[read_call(), ("call_f1", "refund_order", REFUND)], "done"])  # two calls in one turn: a thread pool
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        _run([[write_call("call_w1")], [write_call("call_w2")], "done"])  # the model asks again after the error
    elif scenario == "requested_never_ran":
        _approval("no")  # the human refuses: the hook blocks the call
    elif scenario == "approval_interrupt_resume":
        _approval("approve")
    elif scenario == "mcp_is_error":
        # CrewAI's own MCP client (Agent(mcps=[MCPServerStdio(...)]): a fresh stdio session per call) against the
        # billing server, whose charge_card answers isError
        _run([[("call_c1", "charge_card", CHARGE)], "done"], [], mcps=[_mcp("charge_card")])
    else:
        _extra(scenario)


def _extra(scenario: str) -> None:
    """What users do beyond the ten scenarios (not matrix cells; run by name)."""
    slow = _tools("send_payment", send_payment=send_payment_slow)
    if scenario == "agent_max_execution_time":
        # the agent's own timeout around its task (whole seconds), no retry (max_retry_limit=0): the TimeoutError comes
        # after the running tool finishes (the executor's thread pool is shut down waiting for it)
        _run([[("call_p1", "send_payment", PAYMENT)], "done"], slow, max_execution_time=1, max_retry_limit=0)
    elif scenario == "task_retry_after_model_error":
        # CrewAI's default max_retry_limit=2: an error out of the agent's loop (here the model's, after the write ran)
        # runs the whole task again, and the write with it (a TimeoutError or a tool failure is never retried)
        _run([[write_call("call_w1")], ConnectionError("model API reset the connection"), [write_call("call_w2")], "done"])
    elif scenario == "tool_reports_failure":
        # CrewAI's declared failure: the tool returns a ToolFailure instead of raising (the default policy "warn"
        # records it on TaskOutput.tool_failures and hands its text to the model)
        _run([[("call_c1", "charge_card", CHARGE)], "done"], _tools("charge_card", charge_card=charge_card_reporting))
    else:
        raise CannotProduce(scenario)


def instrument() -> None:
    """OpenInference's CrewAI instrumentor on the runner's provider (TraceConfig reads OPENINFERENCE_HIDE_*)."""
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.crewai import CrewAIInstrumentor

    # OpenInference's other mode (spans made from CrewAI's event bus, LLM spans included): run by hand with
    # TRACEFENCE_CREWAI_EVENT_LISTENER=1 in the runner's environment
    listener = os.environ.get("TRACEFENCE_CREWAI_EVENT_LISTENER") == "1"
    CrewAIInstrumentor().instrument(tracer_provider=PROVIDER, config=TraceConfig(), use_event_listener=listener)


if __name__ == "__main__":
    instrument()
    raise SystemExit(main(run))
