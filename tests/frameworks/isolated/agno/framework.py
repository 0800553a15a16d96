"""Agno under OpenInference's Agno instrumentation (openinference-instrumentation-agno) in the conformance matrix.

OpenInference (openinference/instrumentation/agno/_tools_wrapper.py) wraps ``FunctionCall.execute`` / ``aexecute`` in a
TOOL span named for the tool (``tool.name``, ``input.value`` the arguments as JSON, ``output.value`` ``str(result)``
or a ``ToolResult``'s ``content``, no call id): a ``FunctionExecutionResult`` with status ``failure`` (the tool raised;
Agno hands the error text to the model) ends it ERROR with the error as ``output.value``, an exception out of
``execute`` (``StopAgentRun`` / ``RetryAgentRun`` from a tool hook) ends it ERROR with an ``exception`` event. The
model's requests are the LLM span's ``llm.output_messages.0.message.tool_calls.*`` (with the call ids). A call that
Agno never executes (waiting for confirmation, past ``tool_call_limit``) gets no TOOL span. Agno's MCPTools answers an
``isError`` result or a failed request with its own text as a successful ``ToolResult``: the TOOL span is OK; fastmcp
4's client span (``tools/call <tool>``, ``gen_ai.operation.name`` ``execute_tool``) below it records the failure.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework("agno", "Agno", "agno", "OpenInference", "openinference-instrumentation-agno", module="", isolated="python")

K = FRAMEWORK.key
FASTMCP = "fastmcp 4's client span below it (tools/call, gen_ai.operation.name execute_tool)"
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays (TOOL span, arguments in input.value)"),
    cell(K, "write_commits", "injected", (COMMITTED,), "OK TOOL span with output.value: committed; the result is injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "Agno hands every error to the model; a tool hook raising StopAgentRun stops the run: the exception leaves "
        "FunctionCall.execute and OpenInference ends the TOOL span ERROR (exception event StopAgentRun)",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("unrecognized_failure_evidence", "write_error", "error_template_in_result")),),
        "Agno's own tool timeout is MCPTools' timeout_seconds: Agno answers the model with its own text ('MCP tool ... failed: "
        "Request 'tools/call' timed out ...') on an OK TOOL span, one of Agno's error templates (DECISIONS 956); "
        f"{FASTMCP} ends ERROR (error.type -32001) and carries rpc.response.status_code -32001, a key the normalizer does not read",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "Agno's default: the raised error becomes the call's result for the model (FunctionExecutionResult failure); "
        "OpenInference ends the TOOL span ERROR with the error as output.value",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))),
        "arun runs one turn's calls together (asyncio.gather); the read replays, the failed write holds the trace",
    ),
    cell(
        K, "framework_retries", "review", RETRIED,
        "Agno's retry: a tool hook raises RetryAgentRun on the ConnectionError, the model is asked again and calls again; "
        "one key dispatched twice, the first TOOL span ERROR",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "requires_confirmation never confirmed: the run pauses before executing the call, so no TOOL span; only the "
        "LLM span's tool_calls show the request",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "requires_confirmation, confirmed, continue_run: the write runs once in the continued run (its own AGENT span, "
        "billing.continue_run), committed; the paused run made no TOOL span",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error", "error_template_in_result")),),
        "MCPTools (stdio) against the billing server: Agno turns isError into a successful ToolResult ('Error from MCP "
        "tool ...: [TextContent(...)]') on an OK TOOL span, Agno's template for an isError result (DECISIONS 956); "
        f"{FASTMCP} ends ERROR (error.type tool_error) too",
    ),
]
# The MCP tools' bodies run in the server process: nothing labels Agno's span of them, so the operator's rules name them.
TOOL_RULES = [dict(match="charge_card", effect="write"), dict(match="send_payment", effect="write")]
NOT_IN_MATRIX = [
    (
        "Agno, tool_call_limit (a requested call past the limit is answered by Agno's 'Tool call limit reached' text)",
        "not a row of its own: run by hand with this runner (scenario tool_call_limit): no TOOL span for the call, the "
        "LLM span's request shows it (requested_not_recorded), as requested_never_ran",
    ),
    (
        "Agno under OpenInference, the MCP cells from Agno's spans alone (the instrumentor given a tracer provider that is "
        "not the global one, so fastmcp's and the MCP SDK's client spans go elsewhere)",
        "run by hand: write_times_out plans review (write_error, error_template_in_result): Agno's timeout text 'MCP tool "
        "'<name>' failed: ... timed out.' is one of its templates (DECISIONS 956; before it, a fail-open); mcp_is_error "
        "stays review (its 'Error from MCP tool' template)",
    ),
    (
        "Agno under OpenInference with content capture off (OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS)",
        "run by hand: every output is the placeholder '__REDACTED__', a stand-in for a hidden value (DECISIONS 952): "
        "write_commits plans review (write_outcome_unrecorded), and requested_never_ran, whose LLM span's requests are "
        "hidden, is held by its hidden model output (before 952 both were fail-opens)",
    ),
]
