"""CrewAI under OpenInference (openinference-instrumentation-crewai) in the conformance matrix, in a light environment.

crewai 1.15.30's declared dependencies (not extras) pull in chromadb with onnxruntime, tokenizers and kubernetes, and
lancedb: about 1 GB, 11.5 min to install here. Its runner's path imports none of those: ``requirements.nodeps.txt``
installs crewai and chromadb without their dependencies (crewai imports chromadb's OpenAI embedding function when it
is imported) and ``requirements.txt`` pins what ``from crewai import Agent, Task, Crew`` and a scripted run import,
found by importing until nothing was missing, and mcp 1.30.0 (a new venv from nothing in about 45 s; DECISIONS 985).

OpenInference's default mode (``CrewAIInstrumentor().instrument()``) wraps ``Crew.kickoff`` (a CHAIN span,
``<crew>.kickoff``), ``Task._execute_core`` (an AGENT span, ``<role>._execute_core``) and ``BaseTool.run`` /
``Tool.run`` (a TOOL span, ``<tool>.run``: ``tool.name``, ``input.value`` the arguments as JSON, ``output.value`` the
result; ERROR with an ``exception`` event when the tool raises, which CrewAI then hands to the model as
``Error executing tool: ...``; no call id). It makes no LLM span for a custom ``BaseLLM`` (the scripted model here,
and any provider without an LLM instrumentation of its own): the model's requests are recorded only inside the AGENT
span's ``output.value``, the TaskOutput as JSON whose ``messages`` are the OpenAI-shaped conversation (assistant
``tool_calls`` with ids and arguments, ``tool`` messages with the results), which the normalizer does not read.
CrewAI's native telemetry is no alternative for users: a private ``TracerProvider`` exporting to CrewAI's collector
(``crewai/telemetry/telemetry.py``), never the application's.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework("crewai", "CrewAI", "crewai", "OpenInference", "openinference-instrumentation-crewai", module="", isolated="python")

K = FRAMEWORK.key
TRANSCRIPT = (
    "the AGENT span's output.value (the TaskOutput's messages: the assistant's tool_calls with id call_w1 and the "
    "arguments, the tool message 'Tool execution blocked by hook. Tool: create_invoice')"
)
# CrewAI names an MCP server's tool <command>_<args>_<tool> (tool_resolver.py; the model sees it sanitized and cut to 64
# characters with a hash, so an absolute interpreter path would leave the tool's own name out)
MCP_CHARGE = "python_-m_mcp_billing_server_charge_card"
TOOL_FAILURE = (
    "the TOOL span is OK and its output.value is the ToolFailure as JSON ({\"message\": \"card declined\", \"reason\": "
    "\"mcp_error\", \"code\": null, \"retryable\": false, \"details\": {...}}), recorded on TaskOutput.tool_failures too"
)
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays (TOOL span lookup_customer.run, arguments in input.value)"),
    cell(K, "write_commits", "injected", (COMMITTED,), "OK TOOL span with output.value: committed; the result is injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "tool_failure_policy='raise': the tool's error aborts the run (ToolExecutionFailedError on the AGENT and CHAIN "
        "spans); the TOOL span ends ERROR with the RuntimeError",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),),
        "no tool timeout in CrewAI (the agent's max_execution_time bounds its task and waits for a running tool): a "
        "TimeoutError raised in the tool, the TOOL span's exception, the error handed to the model",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "CrewAI's default (tool_failure_policy 'warn'): the error goes to the model as 'Error executing tool: ...'; the "
        "TOOL span ends ERROR first",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))),
        "two calls in one turn run in CrewAI's thread pool (the context is carried: one trace); the read replays, the "
        "failed write holds the trace",
    ),
    cell(
        K, "framework_retries", "review", RETRIED,
        "no tool retry in CrewAI (max_retry_limit runs the whole task again only after an error leaves the agent's loop, "
        "never a tool's): the model asks again; one key dispatched twice, the first TOOL span ERROR",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "a before-tool-call hook asks a human (request_human_input), who refuses: the hook blocks the call, no TOOL span. "
        f"The request is only in {TRANSCRIPT}, read as a chat transcript (DECISIONS 982)",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "a before-tool-call hook asks a human (request_human_input), who approves: the write runs once, committed. CrewAI's "
        "approval waits in place (the hook blocks on input); it has no interrupt and resume of a tool call",
    ),
    cell(
        K, "mcp_is_error", "review", ((MCP_CHARGE, "review", ("write_error", "error_in_result")),),
        "CrewAI's own MCP client (Agent(mcps=[MCPServerStdio('python', ['-m', 'mcp_billing_server'])]), a stdio session "
        f"per call) turns isError into its ToolFailure, which the tool returns: {TOOL_FAILURE}; its retry verdict "
        "(retryable) makes it a failure report (DECISIONS 983)",
    ),
]
# The MCP tool's body runs in the server process: nothing labels CrewAI's span of it, so the operator's rule names it.
TOOL_RULES = [dict(match="*_charge_card", effect="write")]
NOT_IN_MATRIX = [
    (
        "CrewAI under OpenInference, a tool returning CrewAI's ToolFailure instead of raising (its declared failure)",
        "run by hand with this runner (scenario tool_reports_failure): the OK TOOL span's output.value is the ToolFailure "
        "as JSON (reason tool_reported): the write is held (write_error, error_in_result: its retryable verdict, "
        "DECISIONS 983), as mcp_is_error",
    ),
    (
        "CrewAI under OpenInference's event-listener mode (CrewAIInstrumentor().instrument(use_event_listener=True))",
        "run by hand (TRACEFENCE_CREWAI_EVENT_LISTENER=1): spans made from CrewAI's events, so no tool body runs under its "
        "TOOL span (effects from tool rules only). A call a hook blocked is an OK TOOL span whose output is CrewAI's "
        "'Tool execution blocked by hook. Tool: <name>', a framework template (held: error_template_in_result, "
        "DECISIONS 984); an MCP isError is an OK TOOL span with the error text alone ('card declined'), planned skip: a "
        "fail-open no reading of the trace can close (OpenInference drops the event's failure; it would have to end the "
        "span ERROR or keep the ToolFailure). After an aborted run (tool_failure_policy='raise') its AGENT and CHAIN "
        "spans never end and every later run of the process joins that trace (held: trace_root_missing)",
    ),
    (
        "CrewAI under OpenInference with content capture off (OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS)",
        "run by hand: every write is held (write_outcome_unrecorded: the results are '__REDACTED__'), and "
        "requested_never_ran is held by its AGENT span's hidden output (DECISIONS 952)",
    ),
    (
        "CrewAI, the agent's max_execution_time and max_retry_limit",
        "run by hand (agent_max_execution_time, task_retry_after_model_error): the timeout waits for the running tool, "
        "whose span records its result (committed, correctly); an error out of the agent's loop re-runs the whole task, "
        "the write twice under one key (held: repeats_earlier_write)",
    ),
    (
        "CrewAI's native telemetry",
        "its own private TracerProvider exporting to CrewAI's collector (crewai/telemetry/telemetry.py): it cannot be "
        "pointed at an application's OpenTelemetry provider, so OpenInference is the OTel route",
    ),
]
