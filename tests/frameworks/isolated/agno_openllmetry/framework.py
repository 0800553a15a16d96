"""Agno under OpenLLMetry's Agno instrumentation (opentelemetry-instrumentation-agno) in the conformance matrix.

OpenLLMetry's ``<tool>.tool`` span (``traceloop.span.kind`` ``tool``, ``gen_ai.tool.name``, ``traceloop.entity.input``
the arguments as JSON) records ``str()`` of Agno's ``FunctionExecutionResult`` as ``traceloop.entity.output``
(``status='success' result='...' error=None ...``, pydantic's repr, not JSON) and ends the span OK whenever
``execute`` returns: a tool that raised is a returned ``status='failure'`` result, so its span is OK and only the repr
says it failed. An exception out of ``execute`` (``StopAgentRun`` / ``RetryAgentRun`` from a tool hook) ends the span
ERROR, and then the wrapper's ``dont_throw`` swallows it and returns None to Agno, whose run fails with
``'NoneType' object has no attribute 'status'`` (the instrumentation changes the run: Agno's retry never happens).
No model span (OpenLLMetry leaves the model to provider instrumentations; the scripted model has none), so a call
that never ran is in no span; ``continue_run`` is not wrapped (the resumed run's tool span sits under the session).
"""

from tests.frameworks.isolated.agno.framework import TOOL_RULES  # noqa: F401 - the same operator rules (the MCP tools)
from tests.frameworks.matrix_table import COMMITTED, READ_OK, Framework, cell

FRAMEWORK = Framework(
    "agno_openllmetry", "Agno", "agno", "OpenLLMetry", "opentelemetry-instrumentation-agno", module="", isolated="python",
)

K = FRAMEWORK.key
FASTMCP = "fastmcp 4's client span below it (tools/call, gen_ai.operation.name execute_tool)"
CELLS = [
    cell(K, "read_ok", "dynamic", (READ_OK,), "a declared read replays (tool span, arguments in traceloop.entity.input)"),
    cell(
        K, "write_commits", "injected", (COMMITTED,),
        "OK tool span with a result (the FunctionExecutionResult repr, status='success'): committed; what is injected on "
        "replay is that repr, not the tool's return",
    ),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error",)),),
        "a tool hook raises StopAgentRun: the tool span ends ERROR; OpenLLMetry's dont_throw then swallows the exception "
        "and Agno's run fails on the None it returns",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("unrecognized_failure_evidence", "write_timeout", "dispatch_attempt_failed")),),
        f"MCPTools' timeout_seconds: Agno's own timeout text in a status='success' result on an OK tool span; {FASTMCP} ends "
        "ERROR (error.type -32001) and carries rpc.response.status_code, a key the normalizer does not read",
    ),
    cell(
        K, "tool_error_to_model", "review", (("refund_order", "review", ("write_error", "error_template_in_result")),),
        "Agno's default hands the error to the model as a failure result; OpenLLMetry ends the span OK and records "
        "the result's Python text, status='failure' error='refund refused: ...': a result object's text whose status "
        "says failure is an error template (DECISIONS 956)",
    ),
    cell(
        K, "parallel_one_fails", "review", (READ_OK, ("refund_order", "review", ("write_error", "error_template_in_result"))),
        "arun runs the turn's calls together; the failed refund is an OK span whose output's Python text says "
        "status='failure' (DECISIONS 956)",
    ),
    cell(
        K, "framework_retries", "review", (("create_invoice", "review", ("write_error",)),),
        "a tool hook raises RetryAgentRun: the tool span ends ERROR, then OpenLLMetry's dont_throw swallows the exception, "
        "Agno's run fails on the None returned ('NoneType' object has no attribute 'status') and the model is never "
        "asked again: one failed write (a bug of the instrumentation, which changes the run)",
    ),
    cell(
        K, "requested_never_ran", "review", (("billing.agent", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded")),),
        "requires_confirmation never confirmed: no tool span, and OpenLLMetry records no model output; the agent span's "
        "output is Agno's text for a paused run ('I have tools to execute, but I need confirmation.'), with no tool step "
        "after it: the waiting calls cannot be read, so the agent span is held (DECISIONS 958). OpenLLMetry would have to "
        "record the run's requirements (or a model span with the requested calls) for the call to be named",
    ),
    cell(
        K, "approval_interrupt_resume", "injected", (COMMITTED,),
        "requires_confirmation, confirmed, continue_run (not wrapped by OpenLLMetry: the tool span sits under the "
        "session span): the write ran once, committed",
    ),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_outcome_unrecorded", "write_error", "dispatch_attempt_failed")),),
        "MCPTools: Agno's 'Error from MCP tool ...: [TextContent(...)]' in a status='success' result on an OK tool span "
        f"(content parts without isError, DECISIONS 801); {FASTMCP} ends ERROR (error.type tool_error)",
    ),
]
NOT_IN_MATRIX = [
    (
        "Agno under OpenLLMetry, streaming (agent.run(stream=True))",
        "run by hand: the agent span is not current while the stream is consumed, so each tool span is the root of a "
        "trace of its own and the run's trace plans tool-free (fail-open: its calls are in other traces)",
    ),
    (
        "Agno under OpenLLMetry with content capture off (TRACELOOP_TRACE_CONTENT=false)",
        "tests/frameworks/test_agno_openllmetry_settings.py: every write with no result is held write_outcome_unrecorded "
        "(the tool span is OK whatever the call did, DECISIONS 981); a call waiting for confirmation is in no span "
        "(the paused run's text is not recorded): the trace plans tool-free, a finding for OpenLLMetry",
    ),
]
