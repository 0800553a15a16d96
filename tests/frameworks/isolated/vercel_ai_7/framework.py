"""The Vercel AI SDK 7 (npm ``ai`` 7.x) under its OpenTelemetry integration, ``@ai-sdk/otel``'s ``OpenTelemetry``
registered with ``registerTelemetry`` (AI SDK 7 moved OpenTelemetry out of ``ai``: with no integration registered the
SDK makes no span; ``telemetry`` replaces ``experimental_telemetry``, enabled with inputs and outputs recorded by
default). Scripted with ``MockLanguageModelV4`` from ``ai/test``; the agent is a ``ToolLoopAgent``
(``stopWhen: stepCountIs(5)``). Its spans follow the GenAI semantic conventions, not AI SDK 4-6's ``ai.*`` spans:
``invoke_agent <model>`` (the call: ``gen_ai.output.messages`` with every ``tool_call`` / ``tool_call_response``
part), ``step <n>`` (``gen_ai.operation.name`` ``agent_step``), ``chat <model>`` (each model call:
``gen_ai.output.messages``, ``gen_ai.response.finish_reasons``) and ``execute_tool <tool>`` (``gen_ai.tool.name`` /
``gen_ai.tool.call.id`` / ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``; a thrown error: status ERROR
and an exception event), read by the conventions table's GenAI rows.

Every AI SDK 7 package declares ``engines.node >=22``; npm installs it on Node 20 with an EBADENGINE warning and every
scenario runs on Node 20.20 here (an npm set to ``engine-strict`` refuses it: the row then skips, naming npm's error)."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework("vercel_ai_7", "Vercel AI SDK 7", "ai", "@ai-sdk/otel OpenTelemetry", "@ai-sdk/otel", module="", isolated="node")

# The MCP client runs with protocolVersionDiscovery false: @ai-sdk/mcp 2.0.99 first sends server/discover (2026-07-28),
# does not accept mcp 2.1.1's answer (a discover result with supportedVersions ["2026-07-28"]), falls back to initialize
# (2025-11-25), and the server refuses it (-32022, "connection is serving the 2026-07-28 protocol"): no client of this
# pair connects with the default settings. Without discovery the client initializes and the server accepts it.
#
# The MCP server's tool body runs in the server, where it cannot reach the client's execute_tool span to declare
# itself: the operator names it, as docs/processor.md's tool_rules do.
TOOL_RULES = [dict(match="charge_card", effect="write")]

# The approval request is recorded as a part of the invoke_agent span's gen_ai.output.messages that no convention
# defines ({"type": "tool_approval_request", "approval_id": ..., "tool_call_id": <the call's id>}), beside the
# tool_call part of the same call: it refers to that call and adds none (docs/DECISIONS.md 961).

K = FRAMEWORK.key
NEVER_RAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays"),
    cell(K, "write_commits", "injected", (COMMITTED,), "an execute_tool span with gen_ai.tool.call.result and no error: committed; the result is injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "AI SDK 7 lets no tool error out of the agent: the thrown error becomes a tool-error part for the model; the execute_tool span ends ERROR",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),),
        "the SDK's own tool timeout (timeout: { toolMs }) aborts the tool's abortSignal; execute ends with its TimeoutError, recorded on the execute_tool span",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error", "error_in_result")),),
        "the tool catches its failure and returns { error }, which toModelOutput hands the model as an error-text part; the span is OK "
        "but its recorded result is the error object",
    ),
    cell(K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "one step's calls run together; the failed write holds the trace"),
    cell(K, "framework_retries", "review", RETRIED, "maxRetries retries model calls, never a tool: the model asks again, so one write was dispatched twice"),
    cell(
        K, "requested_never_ran", "review", (NEVER_RAN,),
        "needsApproval: the agent stops with a tool-approval-request that is never answered; only the model's tool_call part shows the call",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "needsApproval, approved (a tool-approval-response) and run once by the resumed agent: one committed write",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error", "error_in_result")),),
        "@ai-sdk/mcp's client (stdio) against the billing MCP server: the CallToolResult (isError true) is the recorded result on an UNSET span; "
        "a tool rule names the server's tool a write",
    ),
]
