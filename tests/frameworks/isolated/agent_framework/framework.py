"""Microsoft Agent Framework for Python (agent-framework-core 1.26) under its own OpenTelemetry instrumentation.

The framework's observability (agent_framework/observability.py) makes ``invoke_agent <agent>`` (AgentTelemetryLayer),
``chat <model>`` (ChatTelemetryLayer) and ``execute_tool <tool>`` (FunctionTool.invoke) spans on the GenAI semantic
conventions: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, and with sensitive data on (``enable_instrumentation(
enable_sensitive_data=True)``; off by default) ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result`` and the
model's ``gen_ai.output.messages`` (GenAI parts: ``tool_call``, ``tool_call_response``, text). An exception in a tool
ends its span ERROR with ``error.type`` (and, sensitive, an exception event and the repr as the status message).
MCPStdioTool's call is an ``execute_tool`` span with MAF's own MCP client span ``tools/call <tool>`` below it (ERROR,
``error.type`` ``tool_error``, on ``isError``) and the MCP SDK's ``MCP send tools/call <tool>`` below that.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework(
    "agent_framework", "Microsoft Agent Framework", "agent-framework-core", "native (sensitive data on)", None, module="", isolated="python",
)

K = FRAMEWORK.key
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays (arguments and result on the execute_tool span, sensitive data on)"),
    cell(K, "write_commits", "injected", (COMMITTED,), "UNSET execute_tool span with gen_ai.tool.call.result: committed, the result injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "MAF hands every tool exception to the model; a function middleware raising MiddlewareFailure (its fail-closed "
        "abort) ends the run: the execute_tool span ends ERROR (error.type RuntimeError, exception event)",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),),
        "no timeout for function tools in MAF (MCP tools' request_timeout is its only one): a TimeoutError raised in the "
        "tool, error.type TimeoutError, the error handed to the model",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "MAF's default: the exception becomes the call's result to the model (\"Error: Function failed.\"); the "
        "execute_tool span still ends ERROR",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))),
        "one response's two calls run together (allow_concurrent_invocation); the read replays, the failed write holds the trace",
    ),
    cell(K, "framework_retries", "review", RETRIED, "no tool retry in MAF: the error result goes to the model, which asks again; one write dispatched twice"),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "approval_mode always_require, never answered: the run stops on a function_approval_request, no execute_tool "
        "span; the chat span's tool_call part is the requested call no tool span records",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "approval_mode always_require, approved in the next run of the same session: MAF opens no span for the paused "
        "call, the resumed run's execute_tool span (call id call_w1) is the one run, committed",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error",)),),
        "MCPStdioTool (MAF's own MCP client, mcp 2.3) against the billing server (isError): MAF raises on isError, the "
        "execute_tool span and its tools/call client span end ERROR; the body runs in the server, so the effect is the "
        "operator's tool rule",
    ),
]
# The MCP tools' bodies run in the server process: nothing labels MAF's spans of them, so the operator's rules name them.
TOOL_RULES = [dict(match="charge_card", effect="write"), dict(match="send_payment", effect="write")]
NOT_IN_MATRIX = [
    (
        "Microsoft Agent Framework, default settings (sensitive data off: no gen_ai.tool.call.arguments / .result, no "
        "gen_ai.output.messages); also sensitive on with OTEL_SEMCONV_STABILITY_OPT_IN set without "
        "gen_ai_latest_experimental (the v1.36 conventions: no tool arguments or results on spans)",
        "not a row yet; run by hand (TRACEFENCE_MAF_CONTENT=off): every failed call still ends its span ERROR, so each "
        "cell plans as the row's but for arguments_not_recorded, write_commits and approval_interrupt_resume are "
        "static (result_not_recorded), framework_retries is held idempotency_key_reused_arguments_unavailable, "
        "requested_never_ran is held by the chat span's finish reason (unrecognized_tool_span)",
    ),
    (
        "Microsoft Agent Framework, MCP request_timeout (its own timeout; runner scenario mcp_times_out)",
        "not the matrix's write_times_out: request_timeout bounds every request of the session, initialize too, so a "
        "loaded machine's slow server start can pass it; run by hand it plans send_payment review write_timeout",
    ),
    (
        "Microsoft Agent Framework, a MiddlewareFailure cancelling a sibling call (runner scenarios parallel_abort, "
        "parallel_abort_read)",
        "not a row (pinned in test_agent_framework_settings.py): the cancelled write's execute_tool span ends UNSET with "
        "no result inside an invoke_agent that ended ERROR: held write_outcome_unrecorded (DECISIONS 957; before it, a "
        "fail-open planned skip, the trace static)",
    ),
]
