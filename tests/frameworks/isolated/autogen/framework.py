"""AutoGen AgentChat (autogen-agentchat 0.7) under autogen-core's native OpenTelemetry tracing.

autogen-core's ``trace_tool_span`` (autogen_core/_telemetry/_genai.py, used by ``BaseTool.run_json``) makes one
``execute_tool <tool>`` span per call with ``gen_ai.operation.name``, ``gen_ai.system=autogen``,
``gen_ai.tool.name``, ``gen_ai.tool.description`` and ``gen_ai.tool.call.id``: no arguments and no result, ever
(no content-capture switch exists), and no model span records what the model requested (a toolless trace's agent
run is held for it, DECISIONS 1010). A raised tool error ends
the span ERROR with ``error.type`` and an exception event; the workbench then hands it to the model
(``FunctionExecutionResult(is_error=True)``), which no span records.
"""

from tests.frameworks.matrix_table import Framework, cannot, cell

FRAMEWORK = Framework("autogen", "AutoGen AgentChat", "autogen-agentchat", "native (autogen-core gen_ai spans)", None, module="", isolated="python")

K = "arguments_not_recorded"  # AutoGen's execute_tool spans record no arguments
NOT_RECORDED = ("write_committed", "result_not_recorded", K)

# AutoGen runs its handoff as a tool of its own (transfer_to_<target>, the Handoff's FunctionTool), whose body no user
# can declare: the operator names it a read, as smolagents' final_answer is named (what an AutoGen user configures).
# An MCP server's tools run in the server, which (mcp 1.x) makes no span: the operator names them writes.
TOOL_RULES = [dict(match="transfer_to_user", effect="read"), dict(match="charge_card", effect="write"), dict(match="capture_payment", effect="write")]

WRITE_RAISES = (
    "AutoGen's workbench catches every tool exception and hands it to the model as the call's result "
    "(FunctionExecutionResult is_error): tool_error_to_model is that path"
)

CELLS = [
    cell("autogen", "read_ok", "dynamic", (("lookup_customer", "replay", ("declared_read", K)),), "a declared read replays (AutoGen records no arguments)"),
    cell(
        "autogen", "write_commits", "static", (("create_invoice", "skip", NOT_RECORDED),),
        "UNSET span, no error: committed; AutoGen records no result on any tool span (the gen_ai default: no content), so static",
    ),
    cannot("autogen", "write_raises", WRITE_RAISES),
    cell(
        "autogen", "write_times_out", "review", (("send_payment", "review", ("write_timeout", K)),),
        "no tool timeout in AutoGen (a CancellationToken only): a TimeoutError raised in the tool, error.type TimeoutError",
    ),
    cell(
        "autogen", "tool_error_to_model", "review", (("refund_order", "review", ("write_error", K)),),
        "the raised error is handed to the model (is_error); trace_tool_span ends the span ERROR first",
    ),
    cell(
        "autogen", "parallel_one_fails", "review", (("lookup_customer", "replay", ("declared_read", K)), ("refund_order", "review", ("write_error", K))),
        "one turn's two calls run together (asyncio.gather); the read replays, the failed write holds the trace",
    ),
    cell(
        "autogen", "framework_retries", "review",
        (
            ("create_invoice", "review", ("idempotency_key_reused_arguments_unavailable", "result_not_recorded", K)),
            ("create_invoice", "review", ("idempotency_key_reused_arguments_unavailable", "write_error", K)),
        ),
        "no tool retry in AutoGen: the model asks again (max_tool_iterations=3); one key dispatched twice, and with no "
        "arguments recorded the two cannot be shown the same call",
    ),
    cell(
        "autogen", "requested_never_ran", "review", (("invoke_agent billing", "review", ("requested_call_unread", "effect_unknown", K)),),
        "AutoGen runs every call a turn requests (max_tool_iterations and termination conditions act between turns); a call "
        "to a tool the agent lacks never runs, and no span records it (the error result fed back to the model is in no span "
        "either): the trace is create_agent and invoke_agent, neither with input or output, and no model span. The agent "
        "run, whose requests are in no span, is held (DECISIONS 1010). AutoGen would have to record the model's output "
        "(a chat span with gen_ai.output.messages, or the run's gen_ai.output.messages) for the call to be named",
    ),
    cell(
        "autogen", "approval_interrupt_resume", "static",
        (("create_invoice", "skip", NOT_RECORDED), ("transfer_to_user", "replay", ("declared_read", K))),
        "Swarm + HandoffTermination: the agent hands off to the user (the run stops), the user's HandoffMessage resumes "
        "it, the write runs once: committed (transfer_to_user named a read by a tool rule)",
    ),
    cell(
        "autogen", "mcp_is_error", "review", (("charge_card", "review", ("write_outcome_unrecorded", "result_not_recorded", K)),),
        "McpWorkbench (stdio, FastMCP answering isError) catches the isError result and any error inside its execute_tool "
        "span, which stays UNSET with no result (autogen_ext/tools/mcp/_workbench.py, call_tool), and opens it without the "
        "gen_ai.tool.description of the FunctionTool path, whose failures end ERROR: on that path UNSET is no evidence of "
        "commit, so the write is held (DECISIONS 780). AutoGen would have to end the span ERROR on isError (or record the result)",
    ),
]
