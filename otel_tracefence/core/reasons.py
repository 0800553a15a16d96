"""Reason codes: the stable snake_case strings every decision carries.

One name per rule of DESIGN.md's decision table, in the table's order, then the
notes that explain a plan without deciding it. Scripts and dashboards match on
these strings; renaming one is a breaking change of the plan's schema.
"""

# Decision rules (DESIGN.md "Decisions", first rule that applies decides).
MALFORMED_PREFIX = "malformed_"  # + the field at fault: malformed_effect, malformed_tool, ...
# Spans that could not be read whole hold their step with a code of their own (model.MalformedField.reason):
ARGUMENTS_TRUNCATED = "arguments_truncated"  # JSON arguments cut off (an attribute length limit)
RESULT_TRUNCATED = "result_truncated"  # a JSON result cut off
UNRECOGNIZED_TOOL_SPAN = "unrecognized_tool_span"  # tool activity no known convention reads
REQUESTED_CALL_UNREAD = "requested_call_unread"  # a model's recorded output holds a tool call that could not be read
SPAN_DATA_DROPPED = "span_data_dropped"  # the span says it dropped attributes or events (a span limit): not read as complete
STATUS_EVIDENCE_CONFLICT = "status_evidence_conflict"  # tracefence.status=ok declared on a span whose own record says it failed
EFFECT_HINTS_CONFLICT = "effect_hints_conflict"  # hints that give different effects (readOnlyHint=true, method POST)
EFFECT_CONTRADICTED_BY_DISPATCH = "effect_contradicted_by_dispatch"  # a hinted or rule-given read with an unsafe HTTP request below it
CHILD_SPAN_UNREAD = "child_span_unread"  # a span refused for its trace id names a span of this trace as its parent
LATE_REQUEST_UNTIED = "late_request_untied"  # a late HTTP/RPC dispatch or failure whose parent is no remembered step span
UNRECOGNIZED_FAILURE_EVIDENCE = "unrecognized_failure_evidence"  # a write span's attribute the normalizer does not read whose key names a status, error, failure or timeout and whose value is no success value (docs/DECISIONS.md 400)
TRACE_ROOT_MISSING = "trace_root_missing"  # a step that is not a read, in a trace decided partial with no root span (docs/DECISIONS.md 301)
IDEMPOTENCY_KEY_CONFLICT = "idempotency_key_conflict"
CALL_ID_EXECUTED_MORE_THAN_ONCE = "call_id_executed_more_than_once"
IDEMPOTENCY_KEY_REUSED_ARGUMENTS_UNAVAILABLE = "idempotency_key_reused_arguments_unavailable"
EFFECT_UNKNOWN = "effect_unknown"
WRITE_TIMEOUT = "write_timeout"
WRITE_STATUS_UNKNOWN = "write_status_unknown"
WRITE_ERROR = "write_error"
# A write recorded ok (or unset) with no result, where its producer records results (another tool span of the trace
# has one, or the conventions table says the producer records them by default): its outcome went where the trace
# does not show (a cancelled task, an error sent only to the model), so it is not shown committed (docs/DECISIONS.md 401);
# or a write recorded ok on a producer path known not to carry a failure in its status (status_paths.STATUS_EVIDENCE_PATHS,
# DECISIONS 780).
WRITE_OUTCOME_UNRECORDED = "write_outcome_unrecorded"
WRITE_DISPATCHED_MORE_THAN_ONCE = "write_dispatched_more_than_once"
REPEATS_EARLIER_WRITE = "repeats_earlier_write"
# Two or more writes of one tool whose arguments could not be compared (too large, too deep, not I-JSON: no canonical
# hash): they may be one call made twice, so each is held, naming the others (docs/DECISIONS.md 501).
REPEAT_ARGUMENTS_UNCOMPARED = "repeat_arguments_uncompared"
# A tool span that arrived after its trace was decided (and its other spans exported): the
# trace was decided before it was complete, so this step fails closed. Applied by the shared
# engine (otel_tracefence/pipeline/trace_buffer.py), not by the planner: the planner sees no time.
DECIDED_BEFORE_COMPLETE = "decided_before_complete"
# A trace whose spans were acknowledged but could not be read or planned before a stop's deadline: handed on
# fail closed (class review, every span), with a review item naming the trace only. A trace-level reason
# (tracefence.trace.reasons), applied by the fence (otel_tracefence/pipeline/fence.py), not by the planner.
NOT_PLANNED_AT_SHUTDOWN = "not_planned_at_shutdown"
# A trace whose planning raised (a bug, or something the engine could not handle): handed on the same way, fail
# closed, with its review item; the error is logged and counted (tracefence.errors, error.type plan).
NOT_PLANNED_ERROR = "not_planned_error"
# Across traces (the write index, planner/cross_trace.py, docs/DECISIONS.md 590-594): applied after a trace is
# planned alone, against the writes of traces the same door planned before it. A retry is usually another trace.
IDEMPOTENCY_KEY_REUSED_ACROSS_TRACES = "idempotency_key_reused_across_traces"  # the key of an earlier trace's write of this tool, other arguments: conflict
RETRY_OF_HELD_WRITE = "retry_of_held_write"  # the same write (key, or arguments without a key) as an earlier trace's write held for review, not resolved
WRITE_COMMITTED = "write_committed"
UNSTABLE_RESULT = "unstable_result"  # a read whose results differ between executions: skip, inject the recorded one (seed 000)
DECLARED_READ = "declared_read"  # a read declared by the producer (tracefence.effect) or the operator (tool_rules)
HINTED_READ = "hinted_read"  # a read only hints say (MCP readOnlyHint, a safe HTTP method): nobody declared it

# Notes: they explain, never decide.
REPEATED_LATER = "repeated_later"  # an earlier write or read that a later call repeats
REPEATED_READ = "repeated_read"
RESULT_NOT_RECORDED = "result_not_recorded"
REQUESTED_NOT_RECORDED = "requested_not_recorded"
RELATED_CALL_IDS_TRUNCATED = "related_call_ids_truncated"
ERROR_IN_RESULT = "error_in_result"  # status error read from the recorded result (result_errors.py)
RESULT_UNREAD = "result_unread"  # a result too large or too deep to check for an error: a write's status is unknown, not ok
FAILURE_TEXT_IN_RESULT = "failure_text_in_result"  # a text result that reads as a failure report no template knows (normalize/failure_words.py): status unknown
ERROR_TEMPLATE_IN_RESULT = "error_template_in_result"  # the result is a framework's own error or timeout text (framework_texts.FRAMEWORK_ERROR_TEMPLATES)
FRAMEWORK_STATUS_ERROR = "framework_status_error"  # status error read from a framework's own status attribute (conventions.FRAMEWORK_STATUS_KEYS)
DISPATCH_ATTEMPT_FAILED = "dispatch_attempt_failed"  # status taken from a failed dispatch attempt of an ok step
ARGUMENTS_UNWRAPPED = "arguments_unwrapped"  # a framework's wrapper ({"kwargs": ...}) taken off the arguments
RESPONSE_REPLAYED = "response_replayed"  # a request's response says the server replayed a stored one (Idempotent-Replayed: true)
REPEATS_COMMITTED_WRITE = "repeats_committed_write"  # the same key and arguments as an earlier trace's committed write: the key did its job
RETRIES_UNCHECKED = "retries_unchecked"  # the write index was unavailable: this write was not checked against earlier traces' writes (docs/DECISIONS.md 722)
# Pending records (normalize/pending.py, docs/DECISIONS.md 600): a call a framework held for human approval.
APPROVAL_PENDING = "approval_pending"  # the result is the framework's answer that the call waits for approval (framework_texts.APPROVAL_PENDING_RESULTS): its body did not run
RESUMES_PENDING_CALL = "resumes_pending_call"  # an earlier span recorded this call pending and its run stopped there; this step is the call's run after the resume
# Data flow between steps (planner/dataflow.py), seen through hashes of id-like tokens (normalize/tokens.py).
CONSUMES_RESULT_OF = "consumes_result_of"  # this step's arguments hold a token an earlier recorded result returned
RESULT_CONSUMED_BY = "result_consumed_by"  # this step's recorded result returned a token later arguments hold
MAY_CONSUME_UNRECORDED_RESULT = "may_consume_unrecorded_result"  # a token first seen in these arguments; an earlier result a replay needs was not recorded
UNRECORDED_RESULT_MAY_BE_CONSUMED = "unrecorded_result_may_be_consumed"  # the other side: this unrecorded result may be where it came from
# Why arguments are unavailable (also ToolStep.arguments_unavailable).
ARGUMENTS_NOT_RECORDED = "arguments_not_recorded"
ARGUMENTS_TOO_LARGE = "arguments_too_large"
ARGUMENTS_TOO_DEEP = "arguments_too_deep"
ARGUMENTS_NOT_I_JSON = "arguments_not_i_json"
ARGUMENTS_HIDDEN = "arguments_hidden"  # the producer recorded its stand-in for hidden arguments (framework_texts.REDACTED_VALUES)


# Codes that explain without fencing (never decide): a later fencing code, such as
# ``decided_before_complete``, goes before them.
NOTES = frozenset(
    {
        REPEATED_LATER,
        REPEATED_READ,
        RESULT_NOT_RECORDED,
        REQUESTED_NOT_RECORDED,
        RELATED_CALL_IDS_TRUNCATED,
        ERROR_IN_RESULT,
        ERROR_TEMPLATE_IN_RESULT,
        RESULT_UNREAD,
        FAILURE_TEXT_IN_RESULT,
        FRAMEWORK_STATUS_ERROR,
        DISPATCH_ATTEMPT_FAILED,
        ARGUMENTS_UNWRAPPED,
        RESPONSE_REPLAYED,
        REPEATS_COMMITTED_WRITE,
        RETRIES_UNCHECKED,
        APPROVAL_PENDING,
        RESUMES_PENDING_CALL,
        CONSUMES_RESULT_OF,
        RESULT_CONSUMED_BY,
        MAY_CONSUME_UNRECORDED_RESULT,
        UNRECORDED_RESULT_MAY_BE_CONSUMED,
        ARGUMENTS_NOT_RECORDED,
        ARGUMENTS_TOO_LARGE,
        ARGUMENTS_TOO_DEEP,
        ARGUMENTS_NOT_I_JSON,
        ARGUMENTS_HIDDEN,
    }
)
# Codes of the replay and skip rules: listed only when they decide (docs/DECISIONS.md 1).
NOT_FENCING = frozenset({DECLARED_READ, HINTED_READ, WRITE_COMMITTED, UNSTABLE_RESULT})
# Codes of a whole trace (``tracefence.trace.reasons``), never of a step: it was handed on without a plan.
TRACE_CODES = frozenset({NOT_PLANNED_AT_SHUTDOWN, NOT_PLANNED_ERROR})


def malformed(field: str) -> str:
    """The reason code for a malformed field, e.g. ``malformed_effect``."""
    return MALFORMED_PREFIX + field
