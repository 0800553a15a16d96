"""langchain-mcp-adapters in a LangGraph agent, calling a small MCP server (FastMCP over stdio), under
OpenInference's LangChain instrumentation.

The tool bodies run in the MCP server process, so nothing can label the agent's TOOL spans (the adapters'
tool is a client call; mcp 1.x, the adapters' range, emits no spans of its own, and OpenInference records no
MCP annotations): the effects are the operator's tool rules (``TOOL_RULES``), as a user of this stack would
configure them; every ``declared_read`` below is a rule's.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework(
    "langchain_mcp", "langchain-mcp-adapters (LangGraph agent)", "langchain-mcp-adapters", "OpenInference",
    "openinference-instrumentation-langchain", module="", isolated="python",
)
K = FRAMEWORK.key
TOOL_RULES = [
    dict(match="lookup_customer", effect="read"),
    dict(match="create_invoice", effect="write", idempotency_key_argument="idempotency_key"),
    dict(match="charge_card", effect="write"),
    dict(match="send_payment", effect="write"),
    dict(match="refund_order", effect="write"),
]
IS_ERROR = ("charge_card", "review", ("write_error", "error_in_result"))
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a read (tool rule) replays; the adapters' ToolMessage status=success is the result"),
    cell(K, "write_commits", "injected", (COMMITTED,), "OK TOOL span with the server's text in a ToolMessage status=success: committed"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "load_mcp_tools(handle_tool_errors=False): the isError result is raised as a ToolException, which ToolNode's default lets "
        "out of the run; the TOOL span ends ERROR",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_status_unknown",)),),
        "the adapters have no per-call timeout (the MCP client's read_timeout_seconds also bounds initialize): the tools node's "
        "own timeout (LangGraph add_node(timeout=)) cancels the call, its span ends ERROR with CancelledError; outcome unknown",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error", "error_in_result")),),
        "the server tool raises, FastMCP answers isError, and the adapters' default handle_tool_errors hands it to the model: an "
        "OK TOOL span whose ToolMessage says status=error (kind A, read)",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, IS_ERROR),
        "both calls of the turn run at once on one MCP session; the charge's isError comes back as a ToolMessage status=error",
    ),
    cell(
        K, "framework_retries", "review", RETRIED,
        "handle_tool_errors=False and the tools node's RetryPolicy (retry_on=ToolException): the isError call run again, one "
        "write dispatched twice, the first failed",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("write_status_unknown", "requested_not_recorded")),),
        "recursion_limit=1 stops the graph after the model's step: only llm.output_messages tool_calls show the requested write",
    ),
    cell(
        K, "approval_interrupt_resume", "review", RETRIED,
        "an adapters' tool interceptor calls interrupt() before the MCP call, Command(resume=) runs the tool again from its start: "
        "the interrupted attempt (GraphInterrupt, no result) cannot show it did nothing, so two attempts of one write hold the trace",
    ),
    cell(
        K, "mcp_is_error", "review", (IS_ERROR,),
        "CallToolResult(isError=True) becomes a ToolMessage status=error on an OK TOOL span (the adapters' default "
        "handle_tool_errors): kind A, read as the write's failure",
    ),
]
