"""The conformance matrix (issue 24, section 3): real agent frameworks x a fixed list of failure scenarios.

Each installed framework runs offline inside the test with a scripted model and its own
instrumentation; each (framework, scenario) cell is one trace, whose plan is checked
(class, every step's decision and reasons) through all three doors by
``tests/frameworks/test_conformance_matrix.py``. This module holds what that test and
``docs/conformance.md`` share: the scenarios, the frameworks, the expected cell table
and the runners that make each cell's spans.

Regenerate the page with ``make conformance`` (``python -m tests.frameworks.conformance > docs/conformance.md``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:  # framework_helpers and friends import by bare name (as under pytest)
    sys.path.insert(0, str(ROOT / "tests"))

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no usage events from Haystack

from tests.frameworks.matrix_table import (  # noqa: E402 - after the sys.path line
    COMMITTED,
    FINAL,
    NA,
    NO_MODEL,
    READ_OK,
    RETRIED,
    SCENARIO_KEYS,
    U,
    Cell,
    Framework,
    cannot,
    cell,
    oi,
)
from tests.frameworks.isolated import envs, framework_modules  # noqa: E402
from tests.frameworks.isolated.matrix_tools import (  # noqa: E402 - the tools every framework runs, wrapped in its own tool type
    CHARGE,
    CUSTOMER,
    INVOICE,
    PAYMENT,
    PLAIN_TOOLS,
    REFUND,
    STATE,
    CannotProduce,
    charge_card,
    create_invoice,
    declare,
    lookup_customer,
    ran,
    read_call,
    send_payment,
    send_payment_slow,
    write_call,
)

REGENERATE = "make conformance"


def _config(framework: str | None = None):
    """Every door plans a framework's cells with this: the defaults, smolagents' own ``final_answer`` tool
    named a read by the operator (nobody can ``declare`` it; the existing smolagents tests name it the
    same way), and the operator's ``tool_rules`` an isolated framework's ``framework.py`` gives as
    ``TOOL_RULES`` (a list of :class:`~otel_tracefence.core.config.ToolRule` fields), for a framework
    whose tools run where ``declare`` cannot reach their span: what its users configure (docs/processor.md)."""
    from otel_tracefence.core.config import ToolRule, TraceFenceConfig

    rules = [ToolRule(match="final_answer", effect="read")]
    module = _ISOLATED_BY_KEY.get(framework)
    rules += [ToolRule(**fields) for fields in getattr(module, "TOOL_RULES", [])]
    return TraceFenceConfig(tool_rules=rules)



# -- The frameworks -------------------------------------------------------------------------------------

FRAMEWORKS = [
    Framework("openai_agents", "OpenAI Agents SDK", "openai-agents", "OpenLLMetry", "opentelemetry-instrumentation-openai-agents", "opentelemetry.instrumentation.openai_agents"),
    Framework(
        "openai_agents_openinference", "OpenAI Agents SDK", "openai-agents", "OpenInference", "openinference-instrumentation-openai-agents",
        "openinference.instrumentation.openai_agents",
    ),
    Framework("pydantic_ai", "pydantic-ai", "pydantic-ai-slim", "native (InstrumentationSettings)", None, "pydantic_ai"),
    Framework("strands", "Strands Agents", "strands-agents", "native", None, "strands"),
    Framework("smolagents", "smolagents", "smolagents", "OpenInference", "openinference-instrumentation-smolagents", "openinference.instrumentation.smolagents"),
    Framework("llama_index", "LlamaIndex", "llama-index-core", "OpenInference", "openinference-instrumentation-llama-index", "openinference.instrumentation.llama_index"),
    Framework("haystack", "Haystack", "haystack-ai", "its own tracer (opentelemetry-haystack)", "opentelemetry-haystack", "haystack_integrations.tracing.opentelemetry"),
    Framework("mcp", "MCP Python SDK", "mcp", "native", None, "mcp.server.mcpserver"),
]
FRAMEWORK_BY_KEY = {f.key: f for f in FRAMEWORKS}
NOT_INSTALLED_HERE: list[tuple[str, str]] = []


def version(dist: str | None, framework: Framework | None = None) -> str:
    """``dist``'s version: from the framework's pins when it runs in its own environment, else installed here."""
    if framework is not None and framework.isolated:
        return envs.pinned_version(framework.key, framework.isolated, dist)
    if dist is None:
        return ""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def installed(framework: Framework) -> bool:
    """An in-process framework: importable here. An isolated one counts as installed: whether its
    environment can be made is known only when the matrix makes it (its cells then skip, saying why)."""
    import importlib.util

    if framework.isolated or kept_out(framework):
        return True
    try:
        return importlib.util.find_spec(framework.module) is not None
    except ModuleNotFoundError:
        return False


# -- Span collection -------------------------------------------------------------------------------------------


class Collector:
    """One in-memory exporter per run, behind the process-wide switch the instrumentors are bound to."""

    def __init__(self) -> None:
        from framework_helpers import SWITCH
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        self.exporter = InMemorySpanExporter()
        self.switch = SWITCH
        self.processor = SimpleSpanProcessor(self.exporter)

    def __enter__(self) -> Collector:
        self.switch.target = self.processor
        return self

    def __exit__(self, *exc: object) -> None:
        self.switch.target = None

    def spans(self) -> list:
        return list(self.exporter.get_finished_spans())


def _provider():
    from framework_helpers import global_provider

    return global_provider()


def _one_session(name: str):
    """A plain parent span: two runs of one agent session (interrupted, then resumed) make one trace."""
    return _provider().get_tracer("conformance").start_as_current_span(name)


# -- OpenAI Agents SDK (OpenLLMetry) ---------------------------------------------------------------------------------


def _setup_openai_agents() -> Callable[[], None]:
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    instrumentor = OpenAIAgentsInstrumentor(replace_existing_processors=True)
    instrumentor.instrument(tracer_provider=_provider())
    return instrumentor.uninstrument


def _setup_openai_agents_openinference() -> Callable[[], None]:
    """OpenInference's processor as the SDK's only trace processor (its default, exclusive_processor=True)."""
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=_provider())
    return instrumentor.uninstrument


def _run_openai_agents_openinference(scenario: str) -> list:
    """The OpenLLMetry row's scenarios, the same SDK runs: only the instrumentation differs."""
    return _run_openai_agents(scenario)


def _run_openai_agents(scenario: str) -> list:
    """The SDK's scripted runs (one home for every row of the SDK, ``isolated/openai_agents_scripted.py``)."""
    from tests.frameworks.isolated.openai_agents_scripted import run

    if scenario == "mcp_is_error":
        return _over_mcp(lambda server: run(scenario, mcp_server=server))
    with Collector() as collected:
        run(scenario)
    return collected.spans()


# -- pydantic-ai (native instrumentation) -----------------------------------------------------------------------------


def _run_pydantic_ai(scenario: str) -> list:
    from pydantic_ai import (
        Agent,
        DeferredToolRequests,
        DeferredToolResults,
        ModelRetry,
        Tool,
    )
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import UsageLimits

    def refund_retry(order: str, amount_cents: int) -> str:
        """Refund an order: the refund API refuses (ModelRetry: the error goes back to the model)."""
        declare("write")
        ran("refund_order")
        raise ModelRetry("refund refused: order already refunded")

    def invoice_retry(customer: str, amount_cents: int, idempotency_key: str) -> str:
        """Create an invoice: the first call asks the framework to retry (ModelRetry)."""
        declare("write", idempotency_key=idempotency_key)
        if ran("create_invoice") == 1:
            raise ModelRetry("billing API reset the connection, try again")
        return "invoice inv_8812"

    if scenario == "mcp_is_error":
        return _over_mcp(_pydantic_ai_over_mcp)
    tools = {"lookup_customer": Tool(lookup_customer), "create_invoice": Tool(create_invoice)}
    turns: list = []
    run_kwargs: dict[str, Any] = {}
    output_type: Any = str
    if scenario == "read_ok":
        turns = [[read_call()]]
    elif scenario == "write_commits":
        turns = [[write_call()]]
    elif scenario == "write_raises":
        tools["charge_card"] = Tool(charge_card)  # pydantic-ai lets the exception out of the run
        turns = [[("call_c1", "charge_card", CHARGE)]]
    elif scenario == "write_times_out":
        tools["send_payment"] = Tool(send_payment_slow, name="send_payment", timeout=0.2, max_retries=0)
        turns = [[("call_p1", "send_payment", PAYMENT)]]
    elif scenario == "tool_error_to_model":
        tools["refund_order"] = Tool(refund_retry, name="refund_order", max_retries=3)
        turns = [[("call_f1", "refund_order", REFUND)]]
    elif scenario == "parallel_one_fails":
        tools["refund_order"] = Tool(refund_retry, name="refund_order", max_retries=3)
        turns = [[read_call(), ("call_f1", "refund_order", REFUND)]]
    elif scenario == "framework_retries":
        tools["create_invoice"] = Tool(invoice_retry, name="create_invoice", max_retries=2)
        turns = [[write_call("call_w1")], [write_call("call_w2")]]
    elif scenario == "requested_never_ran":
        turns = [[write_call()]]
        run_kwargs["usage_limits"] = UsageLimits(tool_calls_limit=0)
    elif scenario == "approval_interrupt_resume":
        tools["create_invoice"] = Tool(create_invoice, requires_approval=True)
        turns = [[write_call()]]
        output_type = [str, DeferredToolRequests]
    else:
        raise CannotProduce(scenario)
    script = list(turns)

    def respond(messages, info):
        if not script:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(name, json.dumps(args), tool_call_id=cid) for cid, name, args in script.pop(0)])

    agent = Agent(
        FunctionModel(respond),
        tools=list(tools.values()),
        output_type=output_type,
    )
    agent.instrument = InstrumentationSettings(tracer_provider=_provider(), include_content=True)
    with Collector() as collected:
        if scenario == "approval_interrupt_resume":
            with _one_session("billing session"):
                first = agent.run_sync("bill customer a")
                approvals = {call.tool_call_id: True for call in first.output.approvals}
                agent.run_sync(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals=approvals))
        else:
            try:
                agent.run_sync("bill customer a", **run_kwargs)
            except (RuntimeError, UsageLimitExceeded):
                pass
    return collected.spans()


def _pydantic_ai_over_mcp(server: dict) -> None:
    """The agent's toolset is the billing MCP server (pydantic_ai.mcp.MCPToolset over fastmcp's stdio
    transport, its default tool_error_behavior: an isError result is a ModelRetry); the model asks for the
    charge, then stops."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    script = [ToolCallPart("charge_card", json.dumps(CHARGE), tool_call_id="call_c1")]

    def respond(messages, info):
        return ModelResponse(parts=[script.pop()] if script else [TextPart("done")])

    toolset = MCPToolset(StdioTransport(**server))
    agent = Agent(FunctionModel(respond), toolsets=[toolset])
    agent.instrument = InstrumentationSettings(tracer_provider=_provider(), include_content=True)
    agent.run_sync("charge customer a")


# -- Strands Agents (native) ---------------------------------------------------------------------------------------------


def _run_strands(scenario: str) -> list:
    from strands import Agent, tool
    from strands.hooks import BeforeToolCallEvent, HookProvider

    from tests.frameworks.test_framework_strands import ScriptedModel

    def refund_error(order: str, amount_cents: int) -> dict:
        """Refund an order: the refund API refuses (a ToolResult with status error, handed to the model)."""
        declare("write")
        ran("refund_order")
        return {"status": "error", "content": [{"text": "refund refused: order already refunded"}]}

    if scenario == "mcp_is_error":
        return _over_mcp(_strands_over_mcp)
    tools = {"lookup_customer": tool(lookup_customer), "create_invoice": tool(create_invoice)}
    hooks: list = []
    turns: list = ["done"]
    resume = False
    if scenario == "read_ok":
        turns = [[read_call()], "done"]
    elif scenario == "write_commits":
        turns = [[write_call()], "done"]
    elif scenario == "write_raises":
        tools["charge_card"] = tool(charge_card)  # Strands catches it: the error goes to the model
        turns = [[("call_c1", "charge_card", CHARGE)], "done"]
    elif scenario == "write_times_out":
        tools["send_payment"] = tool(send_payment)
        turns = [[("call_p1", "send_payment", PAYMENT)], "done"]
    elif scenario == "tool_error_to_model":
        tools["refund_order"] = tool(refund_error, name="refund_order")
        turns = [[("call_f1", "refund_order", REFUND)], "done"]
    elif scenario == "parallel_one_fails":
        tools["refund_order"] = tool(refund_error, name="refund_order")
        turns = [[read_call(), ("call_f1", "refund_order", REFUND)], "done"]
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        turns = [[write_call("call_w1")], [write_call("call_w2")], "done"]
    elif scenario in ("requested_never_ran", "approval_interrupt_resume"):
        resume = scenario == "approval_interrupt_resume"

        class Approval(HookProvider):
            def register_hooks(self, registry, **kwargs):
                registry.add_callback(BeforeToolCallEvent, self.approve)

            def approve(self, event):
                if event.tool_use["name"] == "create_invoice" and event.interrupt("approve_invoice", reason="APPROVAL") != "yes":
                    event.cancel_tool = "approval was not granted"

        hooks = [Approval()]
        turns = [[write_call()], "done"]
    else:
        raise CannotProduce(scenario)
    with _strands_tracing(), Collector() as collected:
        agent = Agent(model=ScriptedModel(turns), tools=list(tools.values()), hooks=hooks, callback_handler=None)
        if hooks:
            with _one_session("billing session"):
                result = agent("bill customer a")
                if resume and result.stop_reason == "interrupt":
                    agent([{"interruptResponse": {"interruptId": i.id, "response": "yes"}} for i in result.interrupts])
        else:
            agent("bill customer a")
    return collected.spans()


@contextmanager
def _strands_tracing():
    """Strands' tracer bound to the global provider (Strands keeps one tracer instance, made at first use)."""
    import strands.telemetry.tracer as strands_tracer

    provider = _provider()
    saved = strands_tracer._tracer_instance
    tracer = strands_tracer.Tracer()
    tracer.tracer_provider = provider
    tracer.tracer = provider.get_tracer(tracer.service_name)
    strands_tracer._tracer_instance = tracer
    try:
        yield
    finally:
        strands_tracer._tracer_instance = saved


def _strands_over_mcp(server: dict) -> None:
    """The agent's tools are the billing MCP server's (strands.tools.mcp.MCPClient over stdio)."""
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from strands import Agent
    from strands.tools.mcp import MCPClient

    from tests.frameworks.test_framework_strands import ScriptedModel

    with _strands_tracing(), MCPClient(lambda: stdio_client(StdioServerParameters(**server))) as client:
        agent = Agent(model=ScriptedModel([[("call_c1", "charge_card", CHARGE)], "done"]), tools=client.list_tools_sync(), callback_handler=None)
        agent("charge customer a")


def _setup_strands() -> Callable[[], None]:
    saved = os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)

    def teardown() -> None:
        if saved is not None:
            os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = saved

    return teardown


# -- Haystack (its own tracer, opentelemetry-haystack) -------------------------------------------------------------------


def _haystack_asks(*calls: tuple[str, str, dict]):
    """A scripted model reply asking for ``calls`` ((call id, tool, arguments) each)."""
    from haystack.dataclasses import ChatMessage, ToolCall

    return ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name=name, arguments=args, id=cid) for cid, name, args in calls])


def _haystack_agent(tools: list, replies: list, **agent_kwargs: Any) -> None:
    """One Agent run with ``tools``, its MockChatGenerator answering ``replies`` then "done", traced (content
    included) by Haystack's OpenTelemetry tracer onto the global provider."""
    from haystack import tracing
    from haystack.components.agents import Agent
    from haystack.components.generators.chat import MockChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    content = tracing.tracer.is_content_tracing_enabled
    tracing.enable_tracing(OpenTelemetryTracer(_provider().get_tracer("haystack")))
    tracing.tracer.is_content_tracing_enabled = True
    try:
        agent = Agent(chat_generator=MockChatGenerator(responses=[*replies, "done"]), tools=tools, **agent_kwargs)
        try:
            agent.run(messages=[ChatMessage.from_user("bill customer a")])
        except Exception as exc:  # raise_on_tool_invocation_failure: Haystack's ToolInvocationError
            if type(exc).__module__.split(".")[0] != "haystack":
                raise
    finally:
        tracing.disable_tracing()
        tracing.tracer.is_content_tracing_enabled = content


def _haystack_over_mcp(server: dict) -> None:
    """The agent's tool is the billing MCP server's charge_card (mcp-haystack's MCPTool, stdio)."""
    from haystack_integrations.tools.mcp import MCPTool, StdioServerInfo

    charge = MCPTool(name="charge_card", server_info=StdioServerInfo(command=server["command"], args=server["args"], env=server["env"]))
    try:
        _haystack_agent([charge], [_haystack_asks(("call_c1", "charge_card", CHARGE))])
    finally:
        charge.close()


def _run_haystack(scenario: str) -> list:
    from haystack.tools import create_tool_from_function

    asks = _haystack_asks
    if scenario == "mcp_is_error":
        return _over_mcp(_haystack_over_mcp)
    tools = {f.__name__: create_tool_from_function(f) for f in PLAIN_TOOLS}
    agent_kwargs: dict[str, Any] = {}
    if scenario == "read_ok":
        replies = [asks(read_call())]
    elif scenario == "write_commits":
        replies = [asks(write_call())]
    elif scenario == "write_raises":
        replies = [asks(("call_c1", "charge_card", CHARGE))]
        agent_kwargs["raise_on_tool_invocation_failure"] = True  # the error leaves the run
    elif scenario == "write_times_out":
        replies = [asks(("call_p1", "send_payment", PAYMENT))]
    elif scenario == "tool_error_to_model":
        replies = [asks(("call_f1", "refund_order", REFUND))]  # the default: the failure becomes the tool's result
    elif scenario == "parallel_one_fails":
        replies = [asks(read_call(), ("call_f1", "refund_order", REFUND))]
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        replies = [asks(write_call("call_w1")), asks(write_call("call_w2"))]
    elif scenario in ("requested_never_ran", "approval_interrupt_resume"):
        # max_agent_steps stops before the next model turn, never between a request and its run: the
        # requested call that never ran is one a human rejects (ScriptedConfirmation rejects all but invoices).
        from haystack.hooks.human_in_the_loop import (
            AlwaysAskPolicy,
            BlockingConfirmationStrategy,
            ConfirmationHook,
        )

        from tests.frameworks.test_framework_haystack import ScriptedConfirmation

        strategy = BlockingConfirmationStrategy(confirmation_policy=AlwaysAskPolicy(), confirmation_ui=ScriptedConfirmation())
        agent_kwargs["hooks"] = {"before_tool": [ConfirmationHook(confirmation_strategies={"*": strategy})]}
        replies = [asks(write_call())] if scenario == "approval_interrupt_resume" else [asks(("call_c1", "charge_card", CHARGE))]
    else:
        raise CannotProduce(scenario)
    with Collector() as collected:
        _haystack_agent(list(tools.values()), replies, **agent_kwargs)
    return collected.spans()


def _setup_haystack() -> Callable[[], None]:
    import haystack.telemetry._telemetry

    saved = haystack.telemetry._telemetry.telemetry
    haystack.telemetry._telemetry.telemetry = None

    def teardown() -> None:
        haystack.telemetry._telemetry.telemetry = saved

    return teardown


# -- smolagents (OpenInference) ----------------------------------------------------------------------------------------------


def _setup_smolagents() -> Callable[[], None]:
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=_provider())
    return instrumentor.uninstrument


def _run_smolagents(scenario: str) -> list:
    from smolagents import OpenAIModel, ToolCallingAgent, tool

    from tests.frameworks.test_framework_smolagents import (
        ScriptedClient,
        completion,
        final,
    )

    tools = {f.__name__: tool(f) for f in PLAIN_TOOLS}
    max_steps = 6
    if scenario == "read_ok":
        turns = [completion(read_call()), final()]
    elif scenario == "write_commits":
        turns = [completion(write_call()), final()]
    elif scenario == "write_raises":
        turns = [completion(("call_c1", "charge_card", CHARGE)), final()]  # smolagents hands every tool error to the model
    elif scenario == "write_times_out":
        turns = [completion(("call_p1", "send_payment", PAYMENT)), final()]
    elif scenario == "tool_error_to_model":
        raise CannotProduce("smolagents has one failure path: a raised error is handed to the model as the observation (write_raises is that path)")
    elif scenario == "parallel_one_fails":
        turns = [completion(read_call(), ("call_f1", "refund_order", REFUND)), final()]
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        turns = [completion(write_call("call_w1")), completion(write_call("call_w2")), final()]
    elif scenario == "requested_never_ran":
        # max_steps stops between steps, never between a request and its run: the requested call that
        # never ran is one to a tool the agent does not have (smolagents answers an error, runs nothing).
        turns = [completion(("call_x1", "delete_customer", CUSTOMER)), final()]
    elif scenario == "approval_interrupt_resume":
        raise CannotProduce("no human-approval API in smolagents 1.26 (step callbacks can only interrupt the whole run)")
    else:
        raise CannotProduce(scenario)
    with Collector() as collected:
        model = OpenAIModel(model_id="scripted-model", client=ScriptedClient(turns))
        agent = ToolCallingAgent(tools=list(tools.values()), model=model, max_steps=max_steps, verbosity_level=-1)
        agent.run("bill customer a")
    return collected.spans()


# -- LlamaIndex (OpenInference) ---------------------------------------------------------------------------------------------


def _setup_llama_index() -> Callable[[], None]:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=_provider())
    return instrumentor.uninstrument


def _run_llama_index(scenario: str) -> list:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool

    from tests.frameworks.test_framework_llama_index import OneSpanPerTurnLLM, script

    if scenario == "mcp_is_error":
        return _over_mcp(_llama_index_over_mcp)
    tools = {f.__name__: FunctionTool.from_defaults(f) for f in PLAIN_TOOLS}
    run_kwargs: dict[str, Any] = {}
    if scenario == "read_ok":
        turns = [[read_call()]]
    elif scenario == "write_commits":
        turns = [[write_call()]]
    elif scenario == "write_raises":
        turns = [[("call_c1", "charge_card", CHARGE)]]  # FunctionAgent hands every tool error to the model
    elif scenario == "write_times_out":
        turns = [[("call_p1", "send_payment", PAYMENT)]]
    elif scenario == "tool_error_to_model":
        raise CannotProduce("FunctionAgent has one failure path: a raised error becomes the tool's result (is_error), which write_raises is")
    elif scenario == "parallel_one_fails":
        turns = [[read_call(), ("call_f1", "refund_order", REFUND)]]
    elif scenario == "framework_retries":
        STATE["flaky"] = True
        turns = [[write_call("call_w1")], [write_call("call_w2")]]
    elif scenario == "requested_never_ran":
        turns = [[write_call()]]
        run_kwargs["max_iterations"] = 1  # the workflow stops after the model's turn, before the call runs
    elif scenario == "approval_interrupt_resume":
        raise CannotProduce("not scripted yet: LlamaIndex asks a human through workflow events (InputRequiredEvent / HumanResponseEvent) inside the tool, no approval before a call")
    else:
        raise CannotProduce(scenario)
    agent = FunctionAgent(tools=list(tools.values()), llm=OneSpanPerTurnLLM(response_generator=script(*turns), is_chat_model=True), streaming=False)

    async def main():
        try:
            return await agent.run("bill customer a", **run_kwargs)
        except Exception as exc:  # max_iterations: the workflow raises
            if "max iterations" not in str(exc).lower():
                raise

    with Collector() as collected:
        asyncio.run(main())
    return collected.spans()


def _llama_index_over_mcp(server: dict) -> None:
    """FunctionAgent's tools are the billing MCP server's (llama-index-tools-mcp: McpToolSpec over BasicMCPClient,
    stdio); the model asks for the charge, then stops."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    from tests.frameworks.test_framework_llama_index import OneSpanPerTurnLLM, script

    async def main():
        client = BasicMCPClient(server["command"], args=server["args"], env=server["env"])
        tools = await McpToolSpec(client, allowed_tools=["charge_card"]).to_tool_list_async()
        llm = OneSpanPerTurnLLM(response_generator=script([("call_c1", "charge_card", CHARGE)]), is_chat_model=True)
        await FunctionAgent(tools=tools, llm=llm, streaming=False).run("charge customer a")

    asyncio.run(main())


# -- MCP Python SDK (native: the client's and the server's spans) ------------------------------------------------------------

MCP_SERVER = ROOT / "tests" / "programs" / "mcp_billing_server.py"
_MCP_RUNS: dict[str, list] = {}
MCP_SCENARIOS = ("read_ok", "write_commits", "write_times_out", "parallel_one_fails", "mcp_is_error")


def _mcp_server() -> tuple[dict, Path]:
    """How a framework's MCP client starts the billing server (stdio; ``command``, ``args``, ``env``),
    and the file the server writes its spans to."""
    import tempfile

    spans_file = Path(tempfile.mkdtemp(prefix="tf-conformance-mcp-")) / "server-spans.b64"
    env = {"TRACEFENCE_TEST_SPANS": str(spans_file), "TRACEFENCE_TEST_SLOW_S": "1.0"}
    return {"command": sys.executable, "args": [str(MCP_SERVER)], "env": env}, spans_file


def _server_spans(spans_file: Path) -> list:
    """The server's spans (OTLP protobuf, base64 a line), read as finished SDK spans."""
    import base64

    from case_spans import readable_spans_of
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    lines = spans_file.read_text().splitlines() if spans_file.exists() else []
    return [s for line in lines for s in readable_spans_of(ExportTraceServiceRequest.FromString(base64.b64decode(line)))]


def _over_mcp(run: Callable[[dict], None]) -> list:
    """An agent framework's mcp_is_error cell: ``run`` starts the billing server with the given parameters
    through the framework's own MCP client and has its scripted model ask for ``charge_card`` (which the
    server answers isError). The cell's trace is the agent's, with the server's spans (the MCP SDK's
    context propagation puts them in it), as the MCP SDK's row has them."""
    server, spans_file = _mcp_server()
    with Collector() as collected:
        run(server)
    spans = collected.spans() + _server_spans(spans_file)
    (trace_id,) = {s.context.trace_id for s in spans if s.name == "tools/call charge_card"}
    return _as_exported([s for s in spans if s.context.trace_id == trace_id])


def _as_exported(spans: list) -> list:
    """The spans in the order an OTLP exporter writes them (grouped by resource, then scope, each group where
    its first span is): the order ``tracefence plan`` reads them in, so the in-process door numbers each span
    (its sequence) as the CLI does. Three instrumentations (the framework's, the MCP SDK's client and server)
    end their spans interleaved."""
    groups: dict = {}
    for span in spans:
        groups.setdefault((span.resource, span.instrumentation_scope), []).append(span)
    return [span for group in groups.values() for span in group]


def _setup_mcp() -> Callable[[], None]:
    _MCP_RUNS.clear()
    return _MCP_RUNS.clear


def _mcp_all() -> None:
    """Every MCP cell, each its own trace (under a plain ``invoke_agent`` span), against one server
    process; the server's spans come back as OTLP protobuf and are read as finished SDK spans."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.shared.exceptions import MCPError

    bodies = {
        "read_ok": lambda session: session.call_tool("lookup_customer", CUSTOMER),
        "write_commits": lambda session: session.call_tool("create_invoice", INVOICE),
        "write_times_out": lambda session: session.call_tool("send_payment", {**PAYMENT, "idempotency_key": "pay-2"}, read_timeout_seconds=0.3),
        "parallel_one_fails": lambda session: asyncio.gather(
            session.call_tool("lookup_customer", CUSTOMER), session.call_tool("charge_card", {"customer": "a", "amount_cents": 1200})
        ),
        "mcp_is_error": lambda session: session.call_tool("charge_card", {"customer": "a", "amount_cents": 1200}),
    }
    server, spans_file = _mcp_server()
    params = StdioServerParameters(**server)
    tracer = _provider().get_tracer("conformance-agent")
    trace_ids: dict[str, int] = {}

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for name in MCP_SCENARIOS:
                    with tracer.start_as_current_span(f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
                        try:
                            await bodies[name](session)
                        except MCPError:
                            pass  # the request timed out
                    trace_ids[name] = root.get_span_context().trace_id

    with Collector() as collected:
        asyncio.run(main())
    server_spans = _server_spans(spans_file)
    for name, trace_id in trace_ids.items():
        _MCP_RUNS[name] = [s for s in collected.spans() + server_spans if s.context.trace_id == trace_id]


def _run_mcp(scenario: str) -> list:
    cell_ = CELL_BY_KEY[("mcp", scenario)]
    if cell_.cannot:
        raise CannotProduce(cell_.cannot)
    if not _MCP_RUNS:
        _mcp_all()
    return _MCP_RUNS[scenario]


# -- The expected cells ------------------------------------------------------------------------------------------------------

CELLS: list[Cell] = [
    # OpenAI Agents SDK, OpenLLMetry
    cell("openai_agents", "read_ok", "dynamic", (READ_OK,), "a declared read replays"),
    cell("openai_agents", "write_commits", "injected", (COMMITTED,), "OK span with a result: committed; the result is injected on replay"),
    cell("openai_agents", "write_raises", "review", (("charge_card", "review", ("write_error",)),), "failure_error_function=None lets the error out; the tool span ends ERROR"),
    cell(
        "openai_agents", "write_times_out", "review", (("send_payment", "review", ("write_error", "error_template_in_result")),),
        "the SDK's own timeout (function_tool timeout=) hands its timeout text to the model on an OK span: the text is the SDK's "
        "timeout template (kind A), so the write's outcome is unknown; a result that says timeout reads as error (DECISIONS 400)",
    ),
    cell("openai_agents", "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),), "the default failure_error_function hands the error to the model; OpenLLMetry ends the span ERROR"),
    cell("openai_agents", "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace"),
    cell("openai_agents", "framework_retries", "review", RETRIED, "no tool retry in the SDK: the model asks again, so one write was dispatched twice"),
    cell("openai_agents", "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown",)),), "a call waiting for approval (needs_approval) never approved: its span has arguments, no result, no label"),
    cell(
        "openai_agents", "approval_interrupt_resume", "injected", (("create_invoice", "skip", ("write_committed", "resumes_pending_call")),),
        "approved and run once after the resume: the interrupted run's pending span (arguments, no result, its run stopped "
        "there) is superseded by that run, one committed write (DECISIONS 600)",
    ),
    cell(
        "openai_agents", "mcp_is_error", "review", (("charge_card", "review", ("write_error", "dispatch_attempt_failed")),),
        "MCPServerStdio against the billing server (FastMCP, isError): the SDK drops isError (its tool span is OK, the "
        "result the text part alone; pinned in test_framework_openai_agents.py), so from the agent's spans alone the write "
        "is held as write_outcome_unrecorded (DECISIONS 800). The MCP server's span (error.type tool_error), in the trace "
        "by the MCP SDK's context propagation, shows the failed attempt. The SDK would have to end the tool span ERROR on isError",
    ),
    # OpenAI Agents SDK, OpenInference (openinference-instrumentation-openai-agents: the SDK's trace processor made
    # OpenTelemetry spans; the SDK's own runs, the OpenLLMetry row's, DECISIONS 796)
    cell("openai_agents_openinference", "read_ok", "dynamic", (READ_OK,), "a declared read replays (TOOL span, arguments in input.value)"),
    cell("openai_agents_openinference", "write_commits", "injected", (COMMITTED,), "OK TOOL span with output.value: committed; the result is injected on replay"),
    cell(
        "openai_agents_openinference", "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "failure_error_function=None lets the error out; the SDK's function span records it and OpenInference ends the TOOL span ERROR",
    ),
    cell(
        "openai_agents_openinference", "write_times_out", "review", (("send_payment", "review", ("write_error", "error_template_in_result")),),
        "the SDK's timeout text handed to the model on an OK TOOL span: the SDK's timeout template (kind A, DECISIONS 400)",
    ),
    cell(
        "openai_agents_openinference", "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "the default failure_error_function hands its text to the model (output.value) and the function span's error "
        "ends the TOOL span ERROR",
    ),
    cell("openai_agents_openinference", "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace"),
    cell("openai_agents_openinference", "framework_retries", "review", RETRIED, "no tool retry in the SDK: the model asks again, so one write was dispatched twice"),
    cell(
        "openai_agents_openinference", "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown",)),),
        "a call waiting for approval (needs_approval) never approved: an OK TOOL span with no output and no label",
    ),
    cell(
        "openai_agents_openinference", "approval_interrupt_resume", "injected", (("create_invoice", "skip", ("write_committed", "resumes_pending_call")),),
        "approved and run once after the resume: the interrupted run's pending TOOL span is superseded by that run (DECISIONS 600)",
    ),
    cell(
        "openai_agents_openinference", "mcp_is_error", "review", (("charge_card", "review", ("write_error", "dispatch_attempt_failed")),),
        "MCPServerStdio against the billing server: OpenInference's TOOL span is OK with the text part alone (the SDK drops "
        "isError); the MCP server's span in the trace (error.type tool_error) shows the failed attempt (DECISIONS 800)",
    ),
    # pydantic-ai, native
    cell("pydantic_ai", "read_ok", "dynamic", (READ_OK,), "a declared read replays"),
    cell("pydantic_ai", "write_commits", "injected", (COMMITTED,), "OK span with a result: committed; the result is injected on replay"),
    cell("pydantic_ai", "write_raises", "review", (("charge_card", "review", ("write_error",)),), "pydantic-ai lets the exception out of the run; the span ends ERROR"),
    cell("pydantic_ai", "write_times_out", "review", (("send_payment", "review", ("write_error",)),), "the framework's own timeout (Tool timeout=, no retries left) fails the run; the span names no timeout, so error"),
    cell("pydantic_ai", "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),), "ModelRetry hands the error to the model as a retry prompt; the span ends ERROR"),
    cell("pydantic_ai", "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace"),
    cell("pydantic_ai", "framework_retries", "review", RETRIED, "ModelRetry: the framework asks for the call again; one write dispatched twice"),
    cell("pydantic_ai", "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),), "tool_calls_limit stops the run after the request, before the call: only the model's request shows it"),
    cell("pydantic_ai", "approval_interrupt_resume", "injected", (COMMITTED,), "requires_approval: the deferred call runs once in the resumed run, committed"),
    cell(
        "pydantic_ai", "mcp_is_error", "review", (("charge_card", "review", ("write_error",)),),
        "MCPToolset (fastmcp's stdio transport) against the billing server: its default tool_error_behavior='retry' "
        "turns isError into a ModelRetry, so the execute_tool span ends ERROR (the server's span says tool_error too)",
    ),
    # Strands, native
    cell("strands", "read_ok", "dynamic", (READ_OK,), "a declared read replays (arguments and result read from span events)"),
    cell("strands", "write_commits", "injected", (COMMITTED,), "OK span with a result: committed"),
    cell("strands", "write_raises", "review", (("charge_card", "review", ("write_error",)),), "Strands catches the error and hands it to the model; the span ends ERROR"),
    cell("strands", "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),), "no tool timeout in Strands: a TimeoutError raised in the tool, recorded as an exception"),
    cell("strands", "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),), "a ToolResult with status error: gen_ai.tool.status error"),
    cell("strands", "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace"),
    cell("strands", "framework_retries", "review", RETRIED, "no tool retry in Strands: the model asks again, one write dispatched twice"),
    cell(
        "strands", "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "an interrupt (BeforeToolCallEvent) never answered: the requested write never ran; the agent span's interrupt record "
        "(finish reason interrupt) requests nothing (DECISIONS 601)",
    ),
    cell(
        "strands", "approval_interrupt_resume", "injected", (COMMITTED,),
        "the interrupt answered, the write ran once: committed; the agent span's interrupt record requests nothing (DECISIONS 601)",
    ),
    cell(
        "strands", "mcp_is_error", "review", (("charge_card", "review", ("write_error",)),),
        "MCPClient (stdio) against the billing server: isError becomes a ToolResult with status error, "
        "gen_ai.tool.status error on the execute_tool span (the server's span says tool_error too)",
    ),
    # Haystack, its own tracer
    cell("haystack", "read_ok", "dynamic", (READ_OK,), "a declared read replays"),
    cell("haystack", "write_commits", "injected", (COMMITTED,), "a result and no error: committed"),
    cell("haystack", "write_raises", "review", (("charge_card", "review", ("write_error",)),), "raise_on_tool_invocation_failure lets the error out; haystack.tool.error says it failed"),
    cell("haystack", "write_times_out", "review", (("send_payment", "review", ("write_error",)),), "no tool timeout in Haystack: a TimeoutError raised in the tool; Haystack keeps no exception type, so error"),
    cell("haystack", "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),), "the default: the failure becomes the tool's result; haystack.tool.error = true"),
    cell("haystack", "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace"),
    cell("haystack", "framework_retries", "review", RETRIED, "no tool retry in Haystack: the model asks again, one write dispatched twice"),
    cell("haystack", "requested_never_ran", "review", (("charge_card", "review", ("effect_unknown", "requested_not_recorded")),), "a human rejected the call (ConfirmationHook): only the model's request shows it"),
    cell("haystack", "approval_interrupt_resume", "injected", (COMMITTED,), "ConfirmationHook confirmed (blocking, no resume needed): the write ran once"),
    cell(
        "haystack", "mcp_is_error", "review", (("charge_card", "review", ("write_error",)),),
        "MCPTool (mcp-haystack, stdio) against the billing server: it raises MCPInvocationError on isError, the "
        "failure becomes the tool's result with haystack.tool.error = true; the server's span says tool_error too",
    ),
    # smolagents, OpenInference
    cell("smolagents", "read_ok", "dynamic", (oi(READ_OK), FINAL), "a declared read replays"),
    cell("smolagents", "write_commits", "injected", (oi(COMMITTED), FINAL), "OK span with a result: committed"),
    cell("smolagents", "write_raises", "review", (("charge_card", "review", ("write_error", U)), FINAL), "smolagents hands the error to the model as the observation; the TOOL span ends ERROR"),
    cell("smolagents", "write_times_out", "review", (("send_payment", "review", ("write_timeout", U)), FINAL), "no tool timeout in smolagents: a TimeoutError raised in the tool"),
    cannot("smolagents", "tool_error_to_model", "smolagents has one failure path: a raised error is handed to the model as the observation (write_raises is that path)"),
    cell("smolagents", "parallel_one_fails", "review", (oi(READ_OK), ("refund_order", "review", ("write_error", U)), FINAL), "the calls of one turn run in a thread pool; the failed write holds the trace"),
    cell("smolagents", "framework_retries", "review", (*(oi(s) for s in RETRIED), FINAL), "no tool retry in smolagents: the model asks again, one write dispatched twice"),
    cell("smolagents", "requested_never_ran", "review", (("delete_customer", "review", ("effect_unknown", "requested_not_recorded")), FINAL), "a call to a tool the agent lacks never runs (max_steps stops only between steps)"),
    cannot("smolagents", "approval_interrupt_resume", "no human-approval API in smolagents 1.26 (step callbacks can only interrupt the whole run)"),
    cannot(
        "smolagents", "mcp_is_error",
        "not run here: smolagents' MCP client is mcpadapt, whose releases (0.1.19 on Python 3.11) import mcp 1.x's "
        "streamablehttp_client, gone in the mcp 2.1.1 this environment's MCP rows run on",
    ),
    # LlamaIndex, OpenInference
    cell("llama_index", "read_ok", "dynamic", (oi(READ_OK),), "a declared read replays"),
    cell("llama_index", "write_commits", "injected", (oi(COMMITTED),), "OK span with a result (is_error false): committed"),
    cell("llama_index", "write_raises", "review", (("charge_card", "review", ("write_error", U)),), "FunctionAgent hands the error to the model (is_error); the TOOL span ends ERROR"),
    cell("llama_index", "write_times_out", "review", (("send_payment", "review", ("write_timeout", U)),), "no tool timeout in FunctionAgent: a TimeoutError raised in the tool"),
    cannot("llama_index", "tool_error_to_model", "FunctionAgent has one failure path: a raised error becomes the tool's result (is_error), which write_raises is"),
    cell("llama_index", "parallel_one_fails", "review", (oi(READ_OK), ("refund_order", "review", ("write_error", U))), "the read replays, the failed write holds the trace"),
    cell("llama_index", "framework_retries", "review", tuple(oi(s) for s in RETRIED), "no tool retry in FunctionAgent: the model asks again, one write dispatched twice"),
    cell("llama_index", "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),), "max_iterations stops the workflow after the model's turn, before the call ran"),
    cannot("llama_index", "approval_interrupt_resume", "not scripted yet: LlamaIndex asks a human through workflow events (InputRequiredEvent / HumanResponseEvent) inside a tool, not before a call"),
    cell(
        "llama_index", "mcp_is_error", "review", (("charge_card", "review", ("write_error", U, "error_in_result")),),
        "McpToolSpec (llama-index-tools-mcp, stdio) against the billing server: the TOOL span ends OK, its result the "
        "CallToolResult with is_error=True, which reads as the error; the server's span below says tool_error too",
    ),
    # MCP Python SDK, native (client and server spans)
    cell("mcp", "read_ok", "dynamic", (("lookup_customer", "replay", ("declared_read", NA)),), "the client span is the step, the server span (declared read) its attempt; the SDK records no arguments"),
    cell(
        "mcp", "write_commits", "static", (("create_invoice", "skip", ("write_committed", "result_not_recorded", NA)),),
        "the SDK records no results at all (the producer records none), so an OK write is committed and the trace static",
    ),
    cannot("mcp", "write_raises", "a server tool that raises is answered as an isError result by the SDK (mcp_is_error is that path)"),
    cell("mcp", "write_times_out", "review", (("send_payment", "review", ("write_timeout", NA)),), "the client's read_timeout_seconds: its span records a TimeoutError; the outcome is unknown"),
    cell(
        "mcp", "parallel_one_fails", "review",
        (("lookup_customer", "replay", ("declared_read", NA)), ("charge_card", "review", ("write_error", NA, "dispatch_attempt_failed"))),
        "two requests in flight at once; the server span of the charge says isError (error.type tool_error)",
    ),
    cannot("mcp", "framework_retries", "no retry in the MCP SDK (a caller's retry inside one step is pinned in test_framework_mcp.py)"),
    cell(
        "mcp", "mcp_is_error", "review", (("charge_card", "review", ("write_error", NA, "dispatch_attempt_failed")),),
        "CallToolResult(isError=True): the server span ends ERROR (error.type tool_error) while the client span stays UNSET",
    ),
    *(cannot("mcp", s, NO_MODEL) for s in ("tool_error_to_model", "requested_never_ran")),
    cannot("mcp", "approval_interrupt_resume", "no approval API in the MCP SDK (elicitation is a server's question to the user, not an approval of a call)"),
]
_ISOLATED = framework_modules()
_ISOLATED_BY_KEY = {m.FRAMEWORK.key: m for m in _ISOLATED}
FRAMEWORKS += [m.FRAMEWORK for m in _ISOLATED]
FRAMEWORK_BY_KEY = {f.key: f for f in FRAMEWORKS}
CELLS += [c for m in _ISOLATED for c in m.CELLS]
NOT_INSTALLED_HERE += [n for m in _ISOLATED for n in getattr(m, "NOT_IN_MATRIX", [])]
CELL_BY_KEY = {(c.framework, c.scenario): c for c in CELLS}

RUNNERS: dict[str, Callable[[str], list]] = {}
SETUPS: dict[str, Callable[[], Callable[[], None]]] = {}


def runner(framework: str) -> Callable[[str], list]:
    return globals()[f"_run_{framework}"]


def setup(framework: str) -> Callable[[], None]:
    """Instrument the framework (process-wide, onto the global provider's switch); returns its teardown."""
    made = globals().get(f"_setup_{framework}")
    return made() if made else (lambda: None)


def kept_out(framework: Framework) -> bool:
    """A framework listed with every cell ``cannot`` and no runner (kept out of the matrix, its folder saying why):
    nothing of it runs, so it needs nothing installed."""
    cells = [c for c in CELLS if c.framework == framework.key]
    return not framework.isolated and f"_run_{framework.key}" not in globals() and bool(cells) and all(c.cannot for c in cells)


def collect(framework: str, scenario: str) -> list:
    """The spans of one cell's run (one trace); the framework must be set up (an isolated one: its
    environment made and its runner run, see :func:`run_isolated`). A kept-out framework's cell raises
    :class:`CannotProduce` with its reason."""
    if kept_out(FRAMEWORK_BY_KEY[framework]):
        raise CannotProduce(CELL_BY_KEY[(framework, scenario)].cannot)
    if FRAMEWORK_BY_KEY[framework].isolated:
        return _isolated_spans(framework, scenario)
    STATE.clear()
    return runner(framework)(scenario)


def run_isolated(framework: Framework, out: Path) -> str | None:
    """Make the isolated framework's environment (cached) and run its runner into ``out``; None, or why
    the framework cannot run on this machine."""
    env = envs.prepare(framework.key, framework.isolated)
    if not env.ok:
        return env.why
    envs.run(env, out)
    return None


def _isolated_spans(framework: str, scenario: str) -> list:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from case_spans import readable_spans_of

    f = FRAMEWORK_BY_KEY[framework]
    outcome = envs.prepare(f.key, f.isolated).outcomes[scenario]
    if outcome.cannot is not None:
        raise CannotProduce(outcome.cannot)
    if outcome.error is not None:
        raise RuntimeError(f"the {f.name} runner failed: {outcome.error}")
    return readable_spans_of(ExportTraceServiceRequest.FromString(outcome.request))


# -- docs/conformance.md ---------------------------------------------------------------------------------------------------------


def _steps_text(steps: tuple) -> str:
    return "; ".join(f"{tool} {decision} ({', '.join(r for r in reasons if r != U) or '-'})" for tool, decision, reasons in steps)


def markdown() -> str:
    """docs/conformance.md: the cell table, with each framework's installed version."""
    lines = [
        "# Conformance matrix: agent frameworks x failure scenarios",
        "",
        "Generated from `tests/frameworks/conformance.py` (the table `tests/frameworks/test_conformance_matrix.py` checks);",
        f"do not edit by hand: regenerate with `{REGENERATE}`.",
        "",
        "Each framework runs offline inside the test with a scripted model under its own instrumentation; each cell is one",
        "trace, planned through all three doors (the span processor, `tracefence plan` on the spans' OTLP/JSON, and",
        "`tracefence serve`), which must agree on the class and on every tool span's decision. Tools label their own spans",
        "with `declare` (in a framework's own environment, the same `tracefence.*` attributes set on the current span),",
        "or, where a framework runs its tools outside their span, by the operator's tool rules as its users would;",
        "smolagents' `final_answer` is named a read by a tool rule. Step reasons below leave out",
        "`arguments_unwrapped` (OpenInference's wrapped arguments). **wrong today** cells plan otherwise now (the kind of",
        "issue 24 they belong to is named) and are `xfail(strict=True)` in the test.",
        "",
        "| framework | version | instrumentation | scenario | expected class | today | doors agree | steps expected | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for framework in FRAMEWORKS:
        instrumentation = framework.instrumentation + (f" {version(framework.instrumentation_dist, framework)}" if framework.instrumentation_dist else "")
        for scenario in SCENARIO_KEYS:
            c = CELL_BY_KEY.get((framework.key, scenario))
            if c is None:
                continue
            head = f"| {framework.name} | {version(framework.dist, framework)} | {instrumentation} | {scenario} |"
            if c.cannot:
                lines.append(f"{head} - | cannot | - | - | {c.cannot} |")
                continue
            today = f"wrong ({c.wrong_today})" if c.wrong_today else "as expected"
            lines.append(f"{head} {c.replay_class or 'none'} | {today} | yes | {_steps_text(c.steps)} | {c.reason} |")
    lines += ["", "## Not in the matrix on this machine", ""]
    lines += [f"- {what}: {why}" for what, why in NOT_INSTALLED_HERE]
    produced = [c for c in CELLS if not c.cannot]
    lines += [
        "",
        (
            f"{len(produced)} cells produced, {sum(1 for c in produced if c.wrong_today)} wrong today, "
            f"{sum(1 for c in CELLS if c.cannot)} the framework cannot produce (or not scripted yet)."
        ),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
