"""Mastra 1.x (npm ``@mastra/core`` 1.71) under its observability (``@mastra/observability``), exported as
OpenTelemetry spans by ``@mastra/otel-exporter`` 1.4, scripted with ``MockLanguageModelV2`` from ``ai/test``: the same
scenarios as the ``mastra`` row (0.24), on the Mastra users install today. Its engines ask Node.js 22.13; it runs on
Node.js 20 (npm warns only).

Its spans follow the GenAI conventions: ``invoke_agent <agent>``, ``agent_step <agent>`` (``mastra.model_step.output``
``{"text", "toolCalls": [{toolCallId, toolName, args}]}``), ``chat <model>`` (``gen_ai.output.messages`` with the
text parts only, never the tool calls; ``gen_ai.response.finish_reasons``), ``model_generation <model>``,
``model_chunk <agent>`` (``mastra.model_chunk.output``; a tool-result chunk carries ``mastra.metadata.toolCallId`` /
``toolName``) and ``execute_tool <tool>`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``,
``gen_ai.tool.call.result``; a thrown error: ERROR, ``error.type`` (the MastraError id), ``error.message``, an
``exception`` event). A span's metadata is exported as ``mastra.metadata.<key>``: a tool cannot set
``tracefence.effect``, so the operator's tool rules name every effect. A run suspended for approval ends its spans:
``invoke_agent``'s ``mastra.agent_run.output`` is ``{"status": "suspended", "reason": "tool-call-approval", "toolName",
"toolCallId"}``, the chat span records neither output nor finish reason."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, Framework, cannot, cell

FRAMEWORK = Framework(
    "mastra_1", "Mastra", "@mastra/core", "native observability (@mastra/otel-exporter 1.x)", "@mastra/otel-exporter", module="", isolated="node",
)

TOOL_RULES = [
    dict(match="lookup_customer", effect="read"),
    dict(match="create_invoice", effect="write", idempotency_key_argument="idempotency_key"),
    dict(match="charge_card", effect="write"),
    dict(match="send_payment", effect="write"),
    dict(match="refund_order", effect="write"),
    dict(match="billing_charge_card", effect="write"),
]

# The model's requested calls are in Mastra's own keys (agent_step's mastra.model_step.output toolCalls, a suspended
# run's mastra.agent_run.output, the stream chunks' mastra.model_chunk.output): read as call records (DECISIONS 959);
# the GenAI chat span drops its tool_call parts, its enclosing step span holds them; the tool-result chunk span
# (mastra.metadata.toolCallId) is a record of a call the trace names, no activity of its own.
UFE = "unrecognized_failure_evidence"  # error.message, which the normalizer does not read, on the failed write

K = FRAMEWORK.key
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "an OK execute_tool span, a read by the operator's rule, replays"),
    cell(
        K, "write_commits", "injected", (COMMITTED,), "an OK execute_tool span with gen_ai.tool.call.result: committed",
    ),
    cell(
        K, "write_raises", "review", (("charge_card", "review", (UFE, "write_error")),),
        "the tool wrapper hands the error to the model; the execute_tool span ends ERROR with error.message",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", (UFE, "write_timeout")),),
        "no tool timeout in Mastra: the run's abortSignal reaches the tool, which ends with its TimeoutError",
    ),
    cannot(K, "tool_error_to_model", "Mastra has one failure path: a thrown error becomes the tool's result for the model, which write_raises is"),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", (UFE, "write_error"))),
        "one step's calls run together; the failed write holds the trace",
    ),
    cell(
        K, "framework_retries", "review",
        (("create_invoice", "review", (UFE, "write_error", "repeated_later")), ("create_invoice", "review", ("repeats_earlier_write",))),
        "no tool retry in Mastra: the model asks again, so one write was dispatched twice",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("write_status_unknown", "requested_not_recorded")),),
        "requireApproval, never approved: the suspended run ends its spans; the call is in invoke_agent's output "
        "(status suspended, toolName, toolCallId), agent_step records no output, the chat span no output nor finish reason",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "requireApproval, approved with approveToolCall (one trace through tracingOptions): the write ran once, committed",
    ),
    cell(
        K, "mcp_is_error", "review", (("billing_charge_card", "review", (UFE, "write_error")),),
        "@mastra/mcp 2.0 throws on isError (MCP_CLIENT_TOOL_EXECUTION_FAILED): the execute_tool span ends ERROR",
    ),
]
