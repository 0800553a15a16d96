"""LiteLLM (its OpenTelemetry callback) in the conformance matrix: its own environment, its cells.

LiteLLM is a model client: the runner's agent is a plain loop around ``litellm.completion`` that runs the
requested tools under spans it makes itself (as LiteLLM's users do); LiteLLM's callback writes each model call
onto the loop's span (kind C of issue 24)."""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cannot, cell

FRAMEWORK = Framework("litellm", "LiteLLM (a plain agent loop)", "litellm", "its OTel callback (callbacks=[\"otel\"])", None, module="", isolated="python")

K = FRAMEWORK.key
AGENT_ONLY = "LiteLLM is a model client with no agent loop of its own"
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays; the requested call on the loop's span is matched by tool and arguments"),
    cell(K, "write_commits", "injected", (COMMITTED,), "the loop's tool span, OK with a result: committed"),
    cell(K, "write_raises", "review", (("charge_card", "review", ("write_error",)),), "the loop lets the error out of the run; its tool span ends ERROR"),
    cell(K, "write_times_out", "review", (("send_payment", "review", ("write_timeout",)),), "no tool timeout in LiteLLM: a TimeoutError raised in the tool ends the run"),
    cell(K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),), "the loop hands the error text to the model; its tool span ends ERROR"),
    cell(K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "two tool_calls in one response; the failed write holds the trace"),
    cell(
        K, "framework_retries", "review", RETRIED,
        "num_retries retries the MODEL call, never a tool: the write runs again because the model asks again; one write dispatched twice",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "the loop's step budget stops after the model asked: only gen_ai.completion.0.function_call.* on the loop's span shows the request",
    ),
    cannot(K, "approval_interrupt_resume", f"{AGENT_ONLY}: no approval or interrupt API (a loop's own approval step would be the loop's, not LiteLLM's)"),
    cannot(
        K, "mcp_is_error",
        "LiteLLM's MCP client (litellm.mcp_client.call_openai_tool, the mcp extra) opens no span and hands the CallToolResult "
        "to the caller: what a trace says of isError would be this loop's choice, not LiteLLM's (the MCP SDK's row has the SDK's spans)",
    ),
]
