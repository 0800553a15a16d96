"""LangGraph (the prebuilt ReAct agent, ToolNode) under LangSmith's OpenTelemetry export (langsmith 0.14,
``LANGSMITH_TRACING_MODE=otel``): the LangGraph row's runs, traced by LangSmith instead of OpenInference.

LangSmith makes one span per LangChain run once the run has ended (langsmith/_internal/otel/_otel_exporter.py): a
tool run is ``langsmith.span.kind`` ``tool`` with ``gen_ai.operation.name`` ``execute_tool``, ``gen_ai.tool.name``
and ``gen_ai.tool.call.id``, its inputs and outputs as JSON text in ``gen_ai.prompt`` / ``gen_ai.completion``
(the ToolMessage under ``output``); a model run is ``llm``, its ``LLMResult`` in ``gen_ai.completion``. An error
is the span's ERROR status and an exception event typed ``Exception`` (the message names the real class); a
cancelled run ends OK with that event. No tool body can reach its span (it does not exist yet), so the operator
names the tools' effects; the idempotency keys come from the calls' ``idempotency_key`` argument (the default).
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, Framework, cannot, cell

FRAMEWORK = Framework("langgraph_langsmith", "LangGraph", "langgraph", "LangSmith's OTel export", "langsmith", module="", isolated="python")
TOOL_RULES = [
    dict(match="lookup_customer", effect="read"),
    dict(match="create_invoice", effect="write"),
    dict(match="charge_card", effect="write"),
    dict(match="refund_order", effect="write"),
    dict(match="send_payment", effect="write"),
]
K = FRAMEWORK.key
# LangSmith records the call id on each attempt: one call run twice is two spans of one call id
TWICE = (
    ("create_invoice", "conflict", ("call_id_executed_more_than_once", "repeats_earlier_write")),
    ("create_invoice", "conflict", ("call_id_executed_more_than_once", "write_error", "repeated_later")),
)
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a read (by the operator's rule) replays; its arguments are gen_ai.prompt"),
    cell(K, "write_commits", "injected", (COMMITTED,), "OK tool span with a ToolMessage status=success in gen_ai.completion: committed"),
    cell(K, "write_raises", "review", (("charge_card", "review", ("write_error",)),), "the error ends the run; the tool span ends ERROR"),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_error",)),),
        "the tools node's timeout cancels the tool: LangSmith ends its span OK with an exception event typed Exception "
        "(message CancelledError()), read as an error, not as a cancellation; either way the write's outcome is unknown",
    ),
    cell(K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),), "ToolNode(handle_tool_errors=True): the tool run ends ERROR before ToolNode hands the error to the model"),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error", "error_in_result"))),
        "the refund's ToolException handed to the model by the tool's own handle_tool_error: an OK span whose ToolMessage says status=error",
    ),
    cell(
        K, "framework_retries", "review", TWICE,
        "the tools node's RetryPolicy runs call_w1 again: two tool spans of one call id, the first failed (a call run twice)",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("write_status_unknown", "requested_not_recorded")),),
        "recursion_limit=1 stops the graph after the model's step: the model span's gen_ai.completion (LangChain's LLMResult, "
        "its AIMessage's tool_calls) shows the request (DECISIONS 803)",
    ),
    cell(
        K, "approval_interrupt_resume", "review", TWICE,
        "interrupt() in the tool, then Command(resume=): LangGraph re-runs the tool body, two spans of one call id, the "
        "interrupted one (GraphInterrupt) failed with no result",
    ),
    cannot(K, "mcp_is_error", "no MCP server in this row: LangGraph calls MCP servers through langchain-mcp-adapters (the langchain_mcp row)"),
]
