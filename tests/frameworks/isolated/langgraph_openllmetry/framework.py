"""LangGraph (the prebuilt ReAct agent, ToolNode) under OpenLLMetry's LangChain instrumentation
(``opentelemetry-instrumentation-langchain``, traceloop): the LangGraph row's runs, traced by OpenLLMetry instead of
OpenInference.

OpenLLMetry's callback handler makes each tool run an ``execute_tool <tool>`` span (``traceloop.span.kind`` ``tool``,
``gen_ai.tool.name``), current around the tool body, so each body labels its own span; no operator rule is needed.
Its arguments (``gen_ai.tool.call.arguments`` = ``traceloop.entity.input``) are the callback's whole call as JSON:
``{"input_str": <the Python repr of the input>, "tags", "metadata", "inputs": <the arguments>, "kwargs":
{"tool_call_id": ...}}``, an envelope taken off (its ``inputs`` are the arguments, its ``kwargs.tool_call_id`` the call id a request is
matched by: DECISIONS 962); no call id is set on the span itself. Its result (``gen_ai.tool.call.result``) is ``{"output": <the
ToolMessage, dumpd>, "kwargs": ...}``. A raised tool error ends the span ERROR with ``error.type`` and
``gen_ai.task.status`` ``failure``; a handled one (the tool's own ``handle_tool_error``) ends it UNSET with
``gen_ai.task.status`` ``success``, its failure only in the ToolMessage's ``status`` (the shared case
``openllmetry_langchain_handled_tool_error_span_unset``). The model's requests are the chat span's
``gen_ai.output.messages`` ``tool_call`` parts (with their ids). OpenLLMetry 0.62.4's handler has no
``on_interrupt`` / ``on_resume`` (langchain-core 1.8 callbacks): langchain-core logs an AttributeError for each
``interrupt()`` and resume; the spans are unaffected.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, U, Framework, cannot, cell, oi

FRAMEWORK = Framework(
    "langgraph_openllmetry", "LangGraph", "langgraph", "OpenLLMetry", "opentelemetry-instrumentation-langchain", module="", isolated="python",
)
K = FRAMEWORK.key
CELLS = [
    cell(K, "read_ok", "dynamic", (oi(READ_OK),), "a declared read replays (matched to the request by the ToolMessage's tool_call_id in its result)"),
    cell(K, "write_commits", "injected", (oi(COMMITTED),), "UNSET execute_tool span, gen_ai.task.status success, a ToolMessage status=success: committed; the result is injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error", U)),),
        "ToolNode's default handle_tool_errors lets the error out: the span ends ERROR (gen_ai.task.status failure, error.type RuntimeError)",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_status_unknown", U)),),
        "the tools node's own timeout (add_node(timeout=0.3)) cancels the tool: its span ends ERROR with error.type CancelledError, "
        "so the write's outcome is unknown",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error", U)),),
        "ToolNode(handle_tool_errors=True): on_tool_error ends the span ERROR before ToolNode hands the error to the model",
    ),
    cell(
        K, "parallel_one_fails", "review", (oi(READ_OK), ("refund_order", "review", ("write_error", U, "error_in_result"))),
        "the refund's ToolException handled by the tool's own handle_tool_error: an UNSET span that says gen_ai.task.status success, "
        "its failure only in the ToolMessage's status=error two levels down in the result (kind A, read)",
    ),
    cell(
        K, "framework_retries", "review", tuple(oi(s) for s in RETRIED),
        "the tools node's RetryPolicy runs call_w1 again: the first span failed (ConnectionError), the second committed; one write dispatched twice",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "recursion_limit=1 stops the graph after the model's step: only the chat span's gen_ai.output.messages tool_call part shows the request",
    ),
    cell(
        K, "approval_interrupt_resume", "review", tuple(oi(s) for s in RETRIED),
        "interrupt() in the tool, then Command(resume=): LangGraph re-runs the tool body, the interrupted span (GraphInterrupt, ERROR) has no "
        "result and may have done what came before interrupt() (DECISIONS 542)",
    ),
    cannot(K, "mcp_is_error", "no MCP server in this row: LangGraph calls MCP servers through langchain-mcp-adapters (the langchain_mcp row)"),
]
