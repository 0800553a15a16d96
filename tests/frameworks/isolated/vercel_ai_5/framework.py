"""The Vercel AI SDK 5 (npm ``ai`` 5.x) under its own OpenTelemetry spans (``experimental_telemetry`` with
recordInputs / recordOutputs), scripted with ``MockLanguageModelV2`` from ``ai/test``; the agent loop is
``generateText``'s own (``stopWhen: stepCountIs(5)``). Its spans: ``ai.generateText`` (the call),
``ai.generateText.doGenerate`` (each model step: ``ai.response.toolCalls``, ``ai.response.finishReason``) and
``ai.toolCall`` (``ai.toolCall.name`` / ``.id`` / ``.args`` / ``.result``; a thrown error: status ERROR and an
exception event), read by the conventions table's Vercel rows (normalize/conventions.py)."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cannot, cell

FRAMEWORK = Framework("vercel_ai_5", "Vercel AI SDK 5", "ai", "native (experimental_telemetry)", None, module="", isolated="node")

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
        "AI SDK 5 lets no tool error out of generateText: the thrown error becomes a tool-error part for the model; the ai.toolCall span ends ERROR",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),),
        "no tool timeout in the SDK: generateText's abortSignal (AbortSignal.timeout) reaches execute, which ends with its TimeoutError; the outcome is unknown",
    ),
    cannot(K, "tool_error_to_model", "AI SDK 5 has one failure path: a thrown error becomes a tool-error part handed to the model, which write_raises is"),
    cell(K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "one step's calls run together (Promise.all); the failed write holds the trace"),
    cell(K, "framework_retries", "review", RETRIED, "maxRetries retries model calls, never a tool: the model asks again, so one write was dispatched twice"),
    cell(
        K, "requested_never_ran", "review", (NEVER_RAN,),
        "a tool without execute: generateText stops and hands the call to the application, which never runs it; only ai.response.toolCalls shows it",
    ),
    cell(
        K, "approval_interrupt_resume", "review", (NEVER_RAN,),
        "no approval API in AI SDK 5 (needsApproval came with 6): the application runs the approved call itself, outside the SDK's "
        "telemetry, and resumes with its result; the SDK would have to record an ai.toolCall span for it, so the write is held",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error", "error_in_result")),),
        "@ai-sdk/mcp's client over an in-process transport: the CallToolResult (isError true) is the ai.toolCall result on an UNSET span; "
        "a tool rule names the server's tool a write",
    ),
]
