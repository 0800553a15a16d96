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
# Today no convention reads Logfire's Function span: it is a tool step only by the tracefence.effect label declare puts
# on it, with no tool name (malformed_tool), no arguments and no result read; every cell is held for that. The kind:
UNREAD = "D: Logfire's Function span read by no convention (tool 'name', arguments 'input', result 'output', failure 'error'): review"
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays (Function span: name, input, output)", wrong_today=f"{UNREAD} (malformed_tool): an over-hold"),
    cell(
        K, "write_commits", "injected", (COMMITTED,), "OK Function span with output: committed; the result is injected on replay",
        wrong_today=f"{UNREAD} (malformed_tool, write_outcome_unrecorded: 'output' unread): an over-hold",
    ),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "failure_error_function=None lets the error out: the Function span ends ERROR (error attribute, exception event UserError)",
        wrong_today=f"{UNREAD} (malformed_tool, unrecognized_failure_evidence naming 'error'): held, the tool unnamed",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_error", "error_template_in_result")),),
        "the SDK's own timeout hands its timeout text to the model as the output of an OK Function span: the SDK's timeout "
        "template (kind A, DECISIONS 400)",
        wrong_today=f"{UNREAD} (malformed_tool, write_outcome_unrecorded: the timeout text in 'output' unread): held, the tool unnamed",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error",)),),
        "the default failure_error_function: its text is the output, the error attribute says 'Error running tool (non-fatal)' and the span ends ERROR",
        wrong_today=f"{UNREAD} (malformed_tool, unrecognized_failure_evidence naming 'error'): held, the tool unnamed",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error",))), "the read replays, the failed write holds the trace",
        wrong_today=f"{UNREAD}: both steps unnamed (malformed_tool), the read held too",
    ),
    cell(
        K, "framework_retries", "review", RETRIED, "no tool retry in the SDK: the model asks again, so one write was dispatched twice",
        wrong_today=f"{UNREAD}: two unnamed steps (malformed_tool) sharing a key, idempotency_key_reused_arguments_unavailable",
    ),
    cell(
        K, "requested_never_ran", "review", (("create_invoice", "review", ("effect_unknown", "requested_not_recorded")),),
        "a call waiting for approval (needs_approval) never approved: Logfire opens no Function span for it, only the "
        "model's request shows it (the Responses API span's events / response JSON, with its call id)",
        wrong_today=(
            "C: requested calls in a format not read (Logfire's 'events' attribute, a JSON list of gen_ai.*.message "
            "events whose assistant message holds tool_calls; 'response' the Response as JSON): the request is not seen; "
            "the trace is held only because the 'Agent run: {name!r}' span's 'tools' attribute looks like tool activity "
            "(unrecognized_tool_span, effect_unknown)"
        ),
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "approved and run once after the resume: one Function span, committed (the interrupted run opened none)",
        wrong_today=f"{UNREAD} (malformed_tool, write_outcome_unrecorded), and the first run's 'Agent run' span held as unrecognized tool activity: an over-hold",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_outcome_unrecorded",)),),
        "MCPServerStdio against the billing server: the SDK drops isError (DECISIONS 791), the Function span is OK with the "
        "text part as output (mcp_data names the server): a result of MCP content parts is no evidence of commit (DECISIONS "
        "780); the MCP SDK's client span below it (tools/call, UNSET whatever the server answered) is its dispatch",
        wrong_today=(
            "A: FAIL-OPEN at the step: the Function span unread, the MCP SDK's client span 'MCP send tools/call charge_card' "
            "(UNSET, no result: the MCP SDK records none and keeps UNSET on isError) is the step, planned skip "
            "(write_committed, result_not_recorded); the trace is held only by the two 'MCP: list tools from server {server}' "
            "spans (unrecognized_tool_span, an over-hold)"
        ),
    ),
]
# The MCP tool's body runs in the server process: nothing labels the SDK's span of it, so the operator's rule names it.
TOOL_RULES = [dict(match="charge_card", effect="write")]
NOT_IN_MATRIX = [
    (
        "OpenAI Agents SDK under Logfire, the SDK's content switch off (OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false)",
        "not a row; tests/frameworks/test_openai_agents_logfire_settings.py runs it: Logfire records the Function span's "
        "input and output as the text 'null' (logfire.json_schema type null, Python None); held today (malformed_tool), "
        "expected as the other two rows plan the same runs: every write write_outcome_unrecorded, a raised one write_error",
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
