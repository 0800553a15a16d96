"""Mastra (npm ``@mastra/core`` 0.24, the newest whose engines allow Node.js 20; 1.x is the ``mastra_1`` row) under its AI tracing, exported as
OpenTelemetry spans by ``@mastra/otel-exporter``'s ``OtelExporter`` (Mastra's documented route to OpenTelemetry),
scripted with ``MockLanguageModelV2`` from ``ai/test`` (a Mastra agent takes an AI SDK 5 model); the agent loop is
Mastra's own (``maxSteps``), approval its own (a tool's ``requireApproval``, ``approveToolCall``), MCP its own client
(``@mastra/mcp``'s ``MCPClient`` over stdio).

Its spans (``OtelExporter``'s ``SpanConverter``, scope ``@mastra/otel``): ``agent.<id>`` (``gen_ai.operation.name``
``agent.run``), ``chat <model>`` (``chat``; ``gen_ai.completion`` holds the final text only), ``step: <n>``
(``model.step``: ``output`` ``{"text", "toolCalls": [{toolCallId, toolName, args}]}``), ``chunk: '<type>'``
(``model.chunk``: ``tool-call`` / ``tool-result`` / ``tool-call-approval`` records of the model's stream, ``output``
holding ``toolCallId``, ``toolName`` and the arguments or result) and ``tool.execute <tool>`` (``gen_ai.operation.name``
``tool.execute``, ``mastra.span.type`` ``tool_call``: ``gen_ai.tool.name``, ``gen_ai.tool.input`` (JSON),
``gen_ai.tool.output`` / ``output`` (the result, a string kept as is), no call id; a thrown error: ERROR with the
message, an ``exception`` event typed ``Error`` whatever the error, ``error`` = true, ``error.type`` = the MastraError
id or ``unknown``, ``error.message``). A span's ``metadata`` becomes attributes of the same keys: how a Mastra tool
labels its span (``tracefence.effect``). None of these keys are read today (kinds F and D below)."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, Framework, cannot, cell

FRAMEWORK = Framework(
    "mastra", "Mastra", "@mastra/core", "native AI tracing (@mastra/otel-exporter)", "@mastra/otel-exporter", module="", isolated="node",
)

# The MCP tool's body runs in the server process, where it cannot label Mastra's span of it: the operator names it
# (Mastra names an MCP tool <server>_<tool>).
TOOL_RULES = [dict(match="billing_charge_card", effect="write")]

# Mastra 0.24's exporter records tool spans under its own operation name (gen_ai.operation.name "tool.execute", a row
# of the conventions' tool kinds) with gen_ai.tool.input / gen_ai.tool.output (read), and the model's calls as call
# records under a plain "output" on its model.step and model.chunk spans (DECISIONS 959): the chunk spans are records
# of calls the trace knows, not activity of their own. A failed span's error.message is failure evidence no convention
# reads (unrecognized_failure_evidence), beside the status that fails the write.
UFE = "unrecognized_failure_evidence"
# Mastra never ends the spans of a run suspended for approval (agent, model, step): the approval chunk names a parent
# no exported span has, so every door flags the trace partial (rootless.absent_parent, DECISIONS 980).

K = FRAMEWORK.key
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a tool.execute span labelled read (its metadata) replays"),
    cell(
        K, "write_commits", "injected", (COMMITTED,), "an OK tool.execute span with gen_ai.tool.output: committed; the result is injected on replay",
    ),
    cell(
        K, "write_raises", "review", (("charge_card", "review", (UFE, "write_error")),),
        "Mastra lets no tool error out of the run: the tool wrapper hands the error to the model as the result (a MastraError); "
        "the tool.execute span ends ERROR with an exception event",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", (UFE, "write_timeout")),),
        "no tool timeout in Mastra: the run's abortSignal (AbortSignal.timeout) reaches the tool's execute options, the tool "
        "ends with its TimeoutError; the exporter types every exception Error, only the status message says timeout",
    ),
    cannot(K, "tool_error_to_model", "Mastra has one failure path: a thrown error becomes the tool's result for the model (a MastraError), which write_raises is"),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", (UFE, "write_error"))),
        "one step's calls run together (Mastra's foreach, concurrency 10); the failed write holds the trace",
    ),
    cell(
        K, "framework_retries", "review", (("create_invoice", "review", ("repeats_earlier_write",)), ("create_invoice", "review", (UFE, "write_error", "repeated_later"))),
        "no tool retry in Mastra (maxRetries retries the model): the model asks again, so one write was dispatched twice",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "a tool with requireApproval, never approved: the suspended run's agent, model and step spans never end (never exported); "
        "the call is recorded only by the instant chunk: 'tool-call-approval' span (toolCallId, toolName, args); partial at every "
        "door, its parent never seen (DECISIONS 980)",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "requireApproval, approved with approveToolCall (the run resumed from its snapshot, one trace through tracingOptions): "
        "the write ran once, committed; the approval chunk is the request of that call; partial at every door, the suspended "
        "step span never ended (DECISIONS 980)",
    ),
    cell(
        K, "mcp_is_error", "review", (("billing_charge_card", "review", ("write_error", "error_in_result")),),
        "@mastra/mcp's MCPClient (stdio, the billing server of runner_common.mjs): the tool's result is the whole CallToolResult, "
        "isError true in gen_ai.tool.output, on an OK span; a tool rule names the server's tool a write",
    ),
]
NOT_IN_MATRIX = [
    (
        "Mastra 0.24's deprecated OpenTelemetry telemetry (spans through the global tracer provider, on unless telemetry.enabled is false; removed in 1.x)",
        "not a row (switched off in the runner); run by hand, every trace plans review (an over-hold): its agent.*, workflow.* and "
        "mastra.stream.toolCall spans (stream.toolCall.toolName / .toolCallId / .args / .result) are unrecognized_tool_span steps, "
        "and one run's spans spread over several traces",
    ),
]
