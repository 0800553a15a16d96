"""The OpenAI Agents SDK under Pydantic Logfire (``logfire.instrument_openai_agents()``) in the conformance matrix.

The SDK's runs are the OpenLLMetry and OpenInference rows' (``../openai_agents_scripted.py``); Logfire wraps the SDK's
trace provider and makes each SDK span a Logfire span (logfire/_internal/integrations/openai_agents.py): the span's
name is Logfire's message template, not the tool (``Function: {name}``; ``logfire.msg`` ``Function: create_invoice``),
the span data's fields are plain attributes (``name`` the tool, ``input`` the arguments as the model's JSON text,
``output`` the result, ``mcp_data``), with no ``gen_ai.operation.name``, no ``gen_ai.tool.*`` key and no call id; a
failure is an ``error`` attribute (JSON ``{"message": "Error running tool ...", "data": {"tool_name", "error"}}``),
``logfire.level_num`` 17 and status ERROR, with an ``exception`` event only when the exception escapes. The model's
requested calls are the ``Responses API`` span's ``events`` attribute (JSON: ``gen_ai.assistant.message`` with
``tool_calls``, their call ids) and ``response`` (the ``Response`` as JSON).
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, Framework, cell

FRAMEWORK = Framework(
    "openai_agents_logfire", "OpenAI Agents SDK", "openai-agents", "Logfire (instrument_openai_agents, send_to_logfire=False)", "logfire",
    module="", isolated="python",
)

K = FRAMEWORK.key
# Logfire's Function span is read as a tool span by its message template (docs/DECISIONS.md 991-994): the tool in
# 'name', the arguments in 'input', the result in 'output' (the text "null" its schema types null: none), 'error' read
# as the failure the span's ERROR status records; the model's requests in the Responses API span's 'response'.
# The SDK opens a Function span for a call held for approval and ends it with no output (None, typed null: none
# recorded), unlabelled (the body never ran), under its 'Agent run' span: the pending record of DECISIONS 600, as under
# the OpenLLMetry and OpenInference rows, once the 'Agent run' span is read as an agent's (DECISIONS 1000).
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays (Function span: name, input, output)"),
    cell(K, "write_commits", "injected", (COMMITTED,), "OK Function span with output: committed; the result is injected on replay"),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "failure_error_function=None lets the error out: the Function span ends ERROR (error attribute, exception event UserError)",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_error", "error_template_in_result")),),
        "the SDK's own timeout hands its timeout text to the model as the output of an OK Function span: the SDK's timeout "
        "template (kind A, DECISIONS 400)",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "the default failure_error_function: its text is the output, the error attribute says 'Error running tool (non-fatal)' and the span ends ERROR",
    ),
    cell(K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace"),
    cell(K, "framework_retries", "review", RETRIED, "no tool retry in the SDK: the model asks again, so one write was dispatched twice"),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown",)),),
        "a call waiting for approval (needs_approval) never approved: its Function span has the arguments, output None "
        "(typed null: none recorded), no label; no later run supersedes it, so it stays a step of unknown effect (DECISIONS 600)",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (("create_invoice", "skip", ("write_committed", "resumes_pending_call")),),
        "approved and run once after the resume: the interrupted Agent run's pending Function span (arguments, output None "
        "typed null, its run stopped there) is superseded by the resumed run's, one committed write (DECISIONS 600, 1000)",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_outcome_unrecorded",)),),
        "MCPServerStdio against the billing server: the SDK drops isError (DECISIONS 791), the Function span is OK with the "
        "text part as output (mcp_data names the server): a result of MCP content parts is no evidence of commit (DECISIONS "
        "780); the MCP SDK's client span below it (tools/call, UNSET whatever the server answered) is its dispatch",
    ),
]
# The MCP tool's body runs in the server process: nothing labels the SDK's span of it, so the operator's rule names it.
TOOL_RULES = [dict(match="charge_card", effect="write")]
NOT_IN_MATRIX = [
    (
        "OpenAI Agents SDK under Logfire, the SDK's content switch off (OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false)",
        "not a row; tests/frameworks/test_openai_agents_logfire_settings.py runs it: Logfire records the Function span's "
        "input and output as the text 'null' (logfire.json_schema type null, Python None): read as none recorded "
        "(DECISIONS 992)",
    ),
    (
        "OpenAI Agents SDK under Logfire's default scrubbing",
        "not a row; the settings test runs a write whose arguments, result, idempotency key and tool name hold words "
        "Logfire scrubs: each becomes '[Scrubbed due to <word>]' and logfire.scrubbed names its path; the "
        "tracefence.idempotency_key label is read as the marker today",
    ),
    (
        "OpenAI Agents SDK under Logfire, streamed runs (Runner.run_streamed)",
        "not run: the scripted model answers get_response only (no stream_response)",
    ),
]
