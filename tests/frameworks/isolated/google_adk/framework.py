"""Google ADK (its native OpenTelemetry tracing) in the conformance matrix: its own environment, its cells."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, Framework, cell

FRAMEWORK = Framework(
    "google_adk", "Google ADK", "google-adk", "native (telemetry schema v2, content on spans)", None, module="", isolated="python",
)

K = FRAMEWORK.key
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays"),
    cell(K, "write_commits", "injected", (COMMITTED,), "OK span with gen_ai.tool.call.result: committed"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "no on_tool_error_callback: ADK lets the error out of the run; the span ends ERROR (error.type RuntimeError), its call id ADK's '<not specified>'",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),),
        "no tool timeout in ADK: a TimeoutError raised in the tool, recorded as the span's exception",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "on_tool_error_callback hands the error to the model as the tool's response; ADK still ends the span ERROR (error.type TOOL_ERROR)",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))),
        "two function_call parts in one response run in parallel; the failed write holds the trace, ADK's execute_tool (merged) span is no step",
    ),
    cell(
        K, "framework_retries", "review",
        (("create_invoice", "review", ("write_error", "repeated_later", "error_in_result")), ("create_invoice", "review", ("repeats_earlier_write",))),
        "ReflectAndRetryToolPlugin (ADK's retry): its failure response (span unset) goes to the model, which asks again; one write dispatched twice",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "error_in_result", "approval_pending")),),
        "require_confirmation never answered: ADK's gate answers the call with its own confirmation text (approval_pending), "
        "the body never ran (so no label)",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (("create_invoice", "skip", ("write_committed", "resumes_pending_call")),),
        "require_confirmation, confirmed in the next run (adk_request_confirmation answered): the gate's pending span is "
        "superseded by the confirmed run of the same call id, which ran once, committed (DECISIONS 600)",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error",)),),
        "McpToolset (ADK's own MCP client, stdio) against the billing server (FastMCP, isError): ADK reads isError from the "
        "CallToolResult and ends the execute_tool span ERROR (error.type MCP_TOOL_ERROR); the body runs in the server, so the "
        "effect is the operator's tool rule",
    ),
]
# The MCP tool's body runs in the server process: nothing labels ADK's span of it, so the operator's rule names it.
TOOL_RULES = [dict(match="charge_card", effect="write")]
NOT_IN_MATRIX = [
    (
        "Google ADK, telemetry schema v1 (ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1: call_llm spans, gcp.vertex.agent.* content)",
        "not a row yet (it would be a second environment of the same pins); run by hand with this runner, its plans equal the v2 row's",
    ),
    (
        "Google ADK, default content capture (off: no gen_ai.tool.call.arguments / .result on spans)",
        "not a row yet; run by hand: ReflectAndRetryToolPlugin's handled failure is an UNSET span with no result, which the "
        "commit rule plans committed (static) unless another signal holds it; ADK would have to set the span's status "
        "(it detects errors only in responses with an error key, not its own plugin's)",
    ),
]
