"""LangGraph (the prebuilt ReAct agent, ToolNode) under OpenInference's LangChain instrumentation.

The tool bodies label their own TOOL spans: OpenInference's LangChain tracer attaches no OpenTelemetry
context around a tool, so each body finds its span with OpenInference's ``get_current_span()`` (the run's
callback manager) and makes it current for ``declare`` (runner.py); no operator tool rule is needed.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cannot, cell

FRAMEWORK = Framework("langgraph", "LangGraph", "langgraph", "OpenInference", "openinference-instrumentation-langchain", module="", isolated="python")
K = FRAMEWORK.key
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays (its one-parameter input is recorded as a bare value, matched to the request)"),
    cell(K, "write_commits", "injected", (COMMITTED,), "OK TOOL span with a ToolMessage status=success: committed; the result is injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "ToolNode's default handle_tool_errors hands only argument errors to the model: the error ends the run; the TOOL span ends ERROR",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_status_unknown",)),),
        "the tools node's own timeout (add_node(timeout=0.3), LangGraph >= 1.2) cancels the tool: its span ends ERROR with "
        "CancelledError (NodeTimeoutError is on the graph span), so the write's outcome is unknown",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "ToolNode(handle_tool_errors=True) hands the error to the model as a ToolMessage status=error; the TOOL span "
        "(on_tool_error runs before ToolNode catches) ends ERROR",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error", "error_in_result"))),
        "the turn's calls run in parallel; the refund's ToolException is handed to the model by the tool's own handle_tool_error: "
        "an OK TOOL span whose ToolMessage says status=error (kind A, read), so the write failed",
    ),
    cell(
        K, "framework_retries", "review", RETRIED,
        "the tools node's RetryPolicy (retry_on=ConnectionError) runs the node again: one call (call_w1) dispatched twice, the first failed",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "recursion_limit=1 stops the graph after the model's step: only the model span's llm.output_messages tool_calls show the request",
    ),
    cell(
        K, "approval_interrupt_resume", "review", RETRIED,
        "interrupt() in the tool, then Command(resume=) through MemorySaver: LangGraph re-runs the tool body from its start, so the "
        "interrupted attempt (GraphInterrupt, no result) may have done what came before interrupt(); to be injected LangGraph would "
        "have to record that the pause came before any effect",
    ),
    cannot(K, "mcp_is_error", "no MCP server in this row: LangGraph calls MCP servers through langchain-mcp-adapters (the langchain_mcp row)"),
]
