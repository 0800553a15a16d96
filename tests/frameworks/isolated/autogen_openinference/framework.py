"""AutoGen AgentChat (autogen-agentchat 0.7) under OpenInference's autogen-agentchat instrumentation, the one Arize
Phoenix documents for AutoGen; autogen-core's own ``execute_tool`` spans stay beside it (they go to the global
tracer provider whatever the user instruments).

OpenInference (openinference/instrumentation/autogen_agentchat/_wrappers.py) makes an LLM span per
``BaseOpenAIChatCompletionClient.create`` with the model's output messages and tool calls, and a TOOL span
``<agent>.<tool>`` per ``AssistantAgent._execute_tool_call`` with ``tool.parameters`` and the
``FunctionExecutionResult``'s text as ``output.value``. It records no call id on the TOOL span, and never
``is_error``: a failed call is an OK TOOL span whose output is the error text handed to the model. autogen-core's
``execute_tool`` span runs inside it (for a FunctionTool or an MCP tool; a tool the agent lacks gets none), carries
the call id and ends ERROR when the tool raised: that inner span, an attempt of the step, is what shows the failure.
"""

from tests.frameworks.isolated.autogen.framework import TOOL_RULES, WRITE_RAISES  # noqa: F401 - the same operator rules
from tests.frameworks.matrix_table import READ_OK, Framework, cannot, cell

FRAMEWORK = Framework(
    "autogen_openinference", "AutoGen AgentChat", "autogen-agentchat", "OpenInference (autogen-core spans beside)",
    "openinference-instrumentation-autogen-agentchat", module="", isolated="python",
)

K = "autogen_openinference"
FAILED = ("write_error", "dispatch_attempt_failed")
INNER = "autogen-core's execute_tool span inside it ends ERROR"

CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "the TOOL span records arguments and result; autogen-core's span inside it is the same call's attempt"),
    cell(K, "write_commits", "injected", (("create_invoice", "skip", ("write_committed",)),), "OK TOOL span with a result, its inner span UNSET: committed; the result is injected on replay"),
    cannot(K, "write_raises", WRITE_RAISES),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout", "dispatch_attempt_failed")),),
        f"no tool timeout in AutoGen: a TimeoutError raised in the tool; the TOOL span is OK with the error text, {INNER} (TimeoutError)",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", FAILED),),
        f"the error handed to the model is an OK TOOL span's output (is_error not recorded) and {INNER}; OpenInference "
        "would have to end its TOOL span ERROR on is_error (alone it reads as a committed write)",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", FAILED)),
        f"one turn's two calls run together; the read replays, the failed write holds the trace ({INNER})",
    ),
    cell(
        K, "framework_retries", "review",
        (("create_invoice", "review", ("repeats_earlier_write",)), ("create_invoice", "review", ("write_error", "repeated_later", "dispatch_attempt_failed"))),
        f"no tool retry in AutoGen: the model asks again (max_tool_iterations=3), one key dispatched twice, the first failed ({INNER})",
    ),
    cell(
        K, "requested_never_ran", "review", (("delete_customer", "review", ("effect_unknown", "error_template_in_result")),),
        "the call to a tool the agent lacks never runs; OpenInference still wraps it in a TOOL span (OK, output AutoGen's "
        "'not found in any workbench' text, a template): held as an unknown effect. The native row (no model output "
        "recorded) cannot see it",
    ),
    cell(
        K, "approval_interrupt_resume", "injected",
        (("create_invoice", "skip", ("write_committed",)), ("transfer_to_user", "replay", ("declared_read",))),
        "Swarm + HandoffTermination: handed off to the user, resumed by the user's HandoffMessage, the write ran once: committed",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_outcome_unrecorded", "write_error", "error_template_in_result")),),
        "McpWorkbench: the TOOL span is OK with the FastMCP server's error text as output (the MCP server's template, "
        "DECISIONS 802); autogen-core's span inside it is UNSET with no result (DECISIONS 780)",
    ),
]
