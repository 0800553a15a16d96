"""The Vercel AI SDK 4 (npm ``ai`` 4.x) under its own OpenTelemetry spans (``experimental_telemetry`` with
recordInputs / recordOutputs), scripted with ``MockLanguageModelV1`` from ``ai/test``; the agent loop is
``generateText``'s own (``maxSteps: 5``). Its spans are AI SDK 5's (``ai.generateText``,
``ai.generateText.doGenerate`` with ``ai.response.toolCalls`` whose calls carry ``args`` as JSON text, and
``ai.toolCall``), but a tool's error is not handed to the model: it ends ``generateText``
(``ToolExecutionError``), after the ``ai.toolCall`` span ended ERROR."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, Framework, cannot, cell

FRAMEWORK = Framework("vercel_ai_4", "Vercel AI SDK 4", "ai", "native (experimental_telemetry)", None, module="", isolated="node")

# The MCP server's tool body runs in the server, where it cannot reach the client's ai.toolCall span to declare
# itself: the operator names it, as docs/processor.md's tool_rules do.
TOOL_RULES = [dict(match="charge_card", effect="write")]

K = FRAMEWORK.key
NEVER_RAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays"),
    cell(K, "write_commits", "injected", (COMMITTED,), "an ai.toolCall span with ai.toolCall.result and no error: committed; the result is injected on replay"),
    cell(K, "write_raises", "review", (("charge_card", "review", ("write_error",)),), "the thrown error ends generateText (ToolExecutionError); the ai.toolCall span ends ERROR"),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),),
        "no tool timeout in the SDK: generateText's abortSignal (AbortSignal.timeout) reaches execute, which ends with its TimeoutError; the outcome is unknown",
    ),
    cannot(K, "tool_error_to_model", "AI SDK 4 hands no tool error to the model: a thrown error ends generateText (ToolExecutionError), which write_raises is"),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))),
        "one step's calls run together (Promise.all): the read finished, the failed write ended the run and holds the trace",
    ),
    cannot(K, "framework_retries", "no tool retry in AI SDK 4 (maxRetries retries model calls) and a tool's error ends generateText, so the model never asks again"),
    cell(
        K, "requested_never_ran", "review", (NEVER_RAN,),
        "a tool without execute: generateText stops and hands the call to the application, which never runs it; only ai.response.toolCalls shows it",
    ),
    cell(
        K, "approval_interrupt_resume", "review", (NEVER_RAN,),
        "no approval API in AI SDK 4: the application runs the approved call itself (a tool without execute), outside the SDK's "
        "telemetry, and resumes with its result; the SDK would have to record an ai.toolCall span for it, so the write is held",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error", "error_in_result")),),
        "experimental_createMCPClient over an in-process transport: the CallToolResult (isError true) is the ai.toolCall result on an UNSET span; "
        "a tool rule names the server's tool a write",
    ),
]
