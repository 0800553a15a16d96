"""DSPy (its ReAct module) under OpenInference's DSPy instrumentation (``openinference-instrumentation-dspy``).

OpenInference wraps ``dspy.Tool.__call__`` / ``Tool.acall`` in a TOOL span named ``<tool>.__call__`` / ``<tool>.acall``
(``openinference.span.kind`` ``TOOL``; no ``tool.name``, no call id), current around the tool body, so each body
labels its own span; its arguments are ``input.value`` ``{"kwargs": {...}}`` (unwrapped), its result ``output.value``.
A tool that raises ends its span ERROR with the exception event; ReAct catches it and hands the model
``Execution error in <tool>: <traceback>`` as the observation. The model's requests are DSPy's own: ReAct's
``next_tool_name`` / ``next_tool_args`` output fields, in the LM span's text (``[[ ## next_tool_name ## ]]`` sections
of the ChatAdapter) and, once parsed, in the ``Predict`` CHAIN span's ``output.value``; no ``tool_calls`` anywhere. They are
read as requested calls with no call id, every record of one turn one request (DECISIONS 963).

ReAct ends every run by calling its own ``finish`` tool (args ``{}``, result ``Completed.``), which no user code can
label: the operator's rule names it a read, as smolagents' ``final_answer`` is. The MCP tool's body runs in the server,
so its effect is the operator's rule too.
"""

from tests.frameworks.matrix_table import COMMITTED, READ_OK, RETRIED, U, Framework, cannot, cell, oi

FRAMEWORK = Framework("dspy", "DSPy (ReAct)", "dspy", "OpenInference", "openinference-instrumentation-dspy", module="", isolated="python")
TOOL_RULES = [dict(match="finish", effect="read"), dict(match="charge_card", effect="write")]
K = FRAMEWORK.key
FINISH = ("finish", "replay", ("declared_read", U))  # ReAct's own last tool (the operator's rule names it a read)
CELLS = [
    cell(
        K, "read_ok", "dynamic", (oi(READ_OK), FINISH), "a declared read replays; ReAct's finish is a read by the operator's rule",
    ),
    cell(
        K, "write_commits", "injected", (oi(COMMITTED), FINISH), "OK TOOL span with output.value: committed; the result is injected on replay",
    ),
    cell(
        K, "write_raises", "review", (("charge_card", "review", ("write_error", U)), FINISH),
        "ReAct catches the error and hands the model 'Execution error in charge_card: ...'; the TOOL span ends ERROR",
    ),
    cell(
        K, "write_times_out", "review", (("send_payment", "review", ("write_timeout", U)), FINISH),
        "no tool timeout in DSPy: a TimeoutError raised in the tool (ReAct hands it to the model); the TOOL span records it",
    ),
    cannot(
        K, "tool_error_to_model",
        "DSPy's ReAct has one failure path: every exception a tool raises is caught and handed to the model as the observation "
        "(write_raises is that path); no tool option lets the error out or shapes it",
    ),
    cannot(K, "parallel_one_fails", "DSPy's ReAct requests one tool per turn (next_tool_name / next_tool_args): no parallel calls"),
    cell(
        K, "framework_retries", "review", (*(oi(s) for s in RETRIED), FINISH),
        "no tool retry in DSPy: the first create_invoice raises (handed to the model), the model asks again; one write dispatched twice",
    ),
    cell(
        K, "requested_never_ran", "review", (("delete_customer", "review", ("effect_unknown", "requested_not_recorded")),),
        "a call to a tool the agent lacks: next_tool_name is a Literal of ReAct's tools, the ChatAdapter and its JSONAdapter fallback "
        "cannot parse the turn, and the AdapterParseError (no ValueError in DSPy 3.4, so ReAct does not catch it) ends the run "
        "before any tool ran; the request is only in the LM spans' text ([[ ## next_tool_name ## ]] delete_customer), once per adapter "
        "attempt: one request (DECISIONS 963)",
    ),
    cannot(K, "approval_interrupt_resume", "no human-approval or interrupt API in DSPy 3.4 (ReAct runs each requested tool at once)"),
    cell(
        K, "mcp_is_error", "review", (("charge_card", "review", ("write_error", U)), FINISH),
        "dspy.Tool.from_mcp_tool (an mcp ClientSession over stdio) against the billing server: DSPy raises RuntimeError on "
        "isError ('Failed to call a MCP tool: card declined') inside Tool.acall, so the TOOL span ends ERROR; ReAct hands it to the model",
    ),
]
