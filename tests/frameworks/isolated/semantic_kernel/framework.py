"""Semantic Kernel for Python (semantic-kernel 1.45) under its own OpenTelemetry model diagnostics.

Switched on by SK's environment variables ``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS(_SENSITIVE)``:
``KernelFunction.invoke`` makes one ``execute_tool <plugin>-<function>`` span per call (semantic_kernel/utils/telemetry/
model_diagnostics/function_tracer.py) with ``gen_ai.tool.call.id``, and, sensitive, ``gen_ai.tool.call.arguments`` and
``gen_ai.tool.call.result``; an exception ends it ERROR with ``error.type``. The chat spans (``trace_chat_completion``)
carry the finish reason (``gen_ai.response.finish_reason``, SK's enum text) but write the model's output, the
requested calls included, only as log records, never on a span. ``AutoFunctionInvocationLoop`` is SK's span around
one request's calls: no execute_tool, no call.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cannot, cell

FRAMEWORK = Framework("semantic_kernel", "Semantic Kernel", "semantic-kernel", "native (model diagnostics)", None, module="", isolated="python")


def sk(step: tuple) -> tuple:
    """The step as SK names its tool: ``<plugin>-<function>`` (KernelFunction.fully_qualified_name)."""
    return (f"billing-{step[0]}", *step[1:])


CELLS = [
    cell("semantic_kernel", "read_ok", "dynamic", (sk(READ_OK),), "a declared read replays (arguments and result recorded, sensitive on)"),
    cell("semantic_kernel", "write_commits", "injected", (sk(COMMITTED),), "UNSET span with a result: committed; the result is injected on replay"),
    cannot(
        "semantic_kernel", "write_raises",
        "SK's auto function invocation catches every function exception and hands it to the model as the call's result "
        "(\"An error occurred while invoking the function ...\"): tool_error_to_model is that path",
    ),
    cell(
        "semantic_kernel", "write_times_out", "review", (("billing-send_payment", "review", ("write_timeout",)),),
        "no function timeout in SK: a TimeoutError raised in the tool, error.type TimeoutError",
    ),
    cell(
        "semantic_kernel", "tool_error_to_model", "review", (("billing-refund_order", "review", ("write_error",)),),
        "the raised error is handed to the model as the function's result; the execute_tool span ends ERROR",
    ),
    cell(
        "semantic_kernel", "parallel_one_fails", "review", (sk(READ_OK), ("billing-refund_order", "review", ("write_error",))),
        "one response's two calls run together (asyncio.gather); the read replays, the failed write holds the trace",
    ),
    cell("semantic_kernel", "framework_retries", "review", tuple(sk(s) for s in RETRIED), "no function retry in SK: the model asks again, one write dispatched twice"),
    cell(
        "semantic_kernel", "requested_never_ran", "review", (("chat scripted-model", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded")),),
        "an auto function invocation filter denies the write (never calls next): no execute_tool span, and SK writes the "
        "requested call only to log records; the chat span's finish reason (FinishReason.TOOL_CALLS) holds the trace "
        "(DECISIONS 560). SK would have to record the output on the span (gen_ai.output.messages) to name the call",
    ),
    cell(
        "semantic_kernel", "approval_interrupt_resume", "injected", (sk(COMMITTED),),
        "the auto function invocation filter approves (SK's human-in-the-loop hook; blocking, no resume needed): the write ran once",
    ),
    cell(
        "semantic_kernel", "mcp_is_error", "review", (("billing-charge_card", "review", ("result_truncated", "write_outcome_unrecorded")),),
        "MCPStdioPlugin (SK's own MCP client) against the billing server (FastMCP, isError): SK keeps the content parts and "
        "drops isError (its execute_tool span UNSET, the result its Python repr of the parts, [TextContent(...)]), so the "
        "write is held as write_outcome_unrecorded (DECISIONS 800 and 801); the repr starts as a JSON array and does not "
        "parse, read as cut off (DECISIONS 340). SK would have to end the span ERROR on isError",
    ),
]
# The MCP tool's body runs in the server process: nothing labels SK's span of it, so the operator's rule names it
# (SK names a function <plugin>-<function>).
TOOL_RULES = [dict(match="billing-charge_card", effect="write")]
