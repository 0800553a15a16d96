"""The Vercel AI SDK 6 (npm ``ai`` 6.x) under its own OpenTelemetry spans (``experimental_telemetry`` with
recordInputs / recordOutputs), scripted with ``MockLanguageModelV3`` from ``ai/test``; the agent is a ``ToolLoopAgent``
(``stopWhen: stepCountIs(5)``) and the scenarios are ``../vercel_ai_common.mjs``'s, shared with the AI SDK 7 row. Its
spans are AI SDK 5's (``ai.generateText``, ``ai.generateText.doGenerate`` with ``ai.response.toolCalls``, ``ai.toolCall``
with ``ai.toolCall.name`` / ``.id`` / ``.args`` / ``.result``), read by the conventions table's Vercel rows; what 6 adds
is tool approval (``needsApproval``), which its spans record only as the model's request and, once approved, the
``ai.toolCall`` span of the resumed run."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework("vercel_ai_6", "Vercel AI SDK 6", "ai", "native (experimental_telemetry)", None, module="", isolated="node")

# The MCP server's tool body runs in the server, where it cannot reach the client's ai.toolCall span to declare
# itself: the operator names it, as docs/processor.md's tool_rules do.
TOOL_RULES = [dict(match="charge_card", effect="write")]

K = FRAMEWORK.key
NEVER_RAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays"),
    cell(K, "write_commits", "injected", (COMMITTED,), "an ai.toolCall span with ai.toolCall.result and no error: committed; the result is injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "AI SDK 6 lets no tool error out of the agent: the thrown error becomes a tool-error part for the model; the ai.toolCall span ends ERROR",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),),
        "no tool timeout in AI SDK 6 (timeout.toolMs came with 7): the call's abortSignal (AbortSignal.timeout) reaches execute, which ends with its TimeoutError",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error", "error_in_result")),),
        "the tool catches its failure and returns { error }, which toModelOutput hands the model as an error-text part; the span is OK "
        "but ai.toolCall.result is the error object",
    ),
    cell(K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "one step's calls run together; the failed write holds the trace"),
    cell(K, "framework_retries", "review", RETRIED, "maxRetries retries model calls, never a tool: the model asks again, so one write was dispatched twice"),
    cell(
        K, "requested_never_ran", "review", (NEVER_RAN,),
        "needsApproval: the agent stops with a tool-approval-request that is never answered; only ai.response.toolCalls shows the call",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "needsApproval, approved (a tool-approval-response): the resumed agent runs the call once under an ai.toolCall span, committed",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error", "error_in_result")),),
        "@ai-sdk/mcp 1.x's client (stdio) against the billing MCP server: the CallToolResult (isError true) is ai.toolCall.result on an UNSET span; "
        "a tool rule names the server's tool a write",
    ),
]
