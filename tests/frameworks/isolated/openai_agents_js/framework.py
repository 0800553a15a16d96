"""The OpenAI Agents SDK for JavaScript (npm ``@openai/agents``) under OpenInference
(``@arizeai/openinference-instrumentation-openai-agents``: a TracingProcessor registered with the SDK's
``setTraceProcessors``, turning the SDK's own trace and spans into OpenTelemetry spans), scripted with a custom
Model that opens a response span as the SDK's OpenAI models do."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework(
    "openai_agents_js", "OpenAI Agents SDK (JS)", "@openai/agents", "OpenInference",
    "@arizeai/openinference-instrumentation-openai-agents", module="", isolated="node",
)

# The processor makes its OpenTelemetry spans from the SDK's span events and never makes them current: a tool
# body runs under no OpenTelemetry span of its own, so ``declare`` cannot label it. The operator's rules do
# (docs/processor.md, tool_rules), as a user of this bridge would configure them.
TOOL_RULES = [
    dict(match="lookup_customer", effect="read"),
    dict(match="create_invoice", effect="write", idempotency_key_argument="idempotency_key"),
    dict(match="charge_card", effect="write"),
    dict(match="send_payment", effect="write"),
    dict(match="refund_order", effect="write"),
]
K = FRAMEWORK.key
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a read replays (named by a tool rule: declare cannot reach the bridge's span)"),
    cell(K, "write_commits", "injected", (COMMITTED,), "an OK TOOL span with output.value: committed; the result is injected on replay"),
    cell(K, "write_raises", "review", (("charge_card", "review", ("write_error",)),), "errorFunction: null lets the error out of the run (the application catches it inside withTrace); the TOOL span ends ERROR"),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_error", "error_template_in_result")),),
        "the SDK's own timeout (timeoutMs, error_as_result) hands its timeout text to the model on an OK span: the text is the JS SDK's "
        "timeout template (kind A, DECISIONS 570), so the write's outcome is unknown",
    ),
    cell(K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),), "the default errorFunction hands its fixed text to the model; the TOOL span ends ERROR"),
    cell(K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace"),
    cell(K, "framework_retries", "review", RETRIED, "no tool retry in the SDK: the model asks again, so one write was dispatched twice"),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("write_status_unknown", "requested_not_recorded")),),
        "a call waiting for approval (needsApproval) never approved: the bridge records no span for it, only the model's request shows it",
    ),
    cell(K, "approval_interrupt_resume", "injected", (COMMITTED,), "needsApproval: approved on the run's state and resumed, the write ran once: committed"),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_outcome_unrecorded",)),),
        "MCPServerStdio against a stdio server whose charge answers isError; the SDK drops CallToolResult.isError (agents-core "
        "mcp.ts: the output is the MCP content parts alone) and the span ends OK: on that path (a result of MCP content parts) "
        "OK is no evidence of commit, so the write is held (DECISIONS 780); the mcp_tools listing spans are no calls (571)",
    ),
]
