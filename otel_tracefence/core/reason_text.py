"""Reason codes in words: what each means and what to check in the owning system.

One table, shared by the review page (``tracefence ui``), ``tracefence review show`` and
``tracefence plan --format table``. A code the table does not know (a newer engine's) is
explained as unknown, never left blank: fail closed, and say which code was not understood.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from otel_tracefence.core import reasons as r


class Explanation(NamedTuple):
    meaning: str  # what the code says about the step
    check: str  # what to check in the system that owns the effect ("" for a note that asks nothing)


_OWNER = "look the call up in the owning system (by its idempotency key, else its arguments and time)"
EXPLANATIONS: dict[str, Explanation] = {
    r.ARGUMENTS_TRUNCATED: Explanation("the call's JSON arguments were cut off (a span attribute length limit)", f"{_OWNER}; raise the attribute length limit of the producer"),
    r.RESULT_TRUNCATED: Explanation("the call's JSON result was cut off (a span attribute length limit)", f"{_OWNER} to see whether it took effect"),
    r.UNRECOGNIZED_TOOL_SPAN: Explanation("a span records tool activity that no known convention reads", f"{_OWNER}; tell the producer's convention to the operator"),
    r.REQUESTED_CALL_UNREAD: Explanation("the model's output holds a tool call that could not be read", f"{_OWNER}: it may have run"),
    r.SPAN_DATA_DROPPED: Explanation("the span dropped attributes or events (a span limit): it is not read as complete", f"{_OWNER} to see whether it took effect"),
    r.STATUS_EVIDENCE_CONFLICT: Explanation("the producer declared ok, but the span's own record says the call failed", f"{_OWNER} to see whether it took effect"),
    r.EFFECT_HINTS_CONFLICT: Explanation("hints give different effects (a read-only hint, an unsafe HTTP method)", "ask the tool's owner whether it writes; declare it in the tool rules"),
    r.EFFECT_CONTRADICTED_BY_DISPATCH: Explanation("a call taken for a read sent an unsafe HTTP request below it", "ask the tool's owner whether it writes; check the request's target for the change"),
    r.CHILD_SPAN_UNREAD: Explanation("a span under this step was refused (its trace id could not be read)", f"{_OWNER} to see whether it took effect"),
    r.LATE_REQUEST_UNTIED: Explanation("a late HTTP/RPC dispatch or failure could not be tied to a step", f"{_OWNER}: a request reached it after the trace was decided"),
    r.UNRECOGNIZED_FAILURE_EVIDENCE: Explanation("an attribute the normalizer does not read names a status, error or timeout", f"{_OWNER} to see whether it took effect"),
    r.TRACE_ROOT_MISSING: Explanation("the trace was decided before its root span arrived", f"{_OWNER}: later spans may show what happened"),
    r.IDEMPOTENCY_KEY_CONFLICT: Explanation("two calls of this tool carry one idempotency key with different arguments", "look the key up in the owning system: which of the two calls it recorded, and whether the other was refused"),
    r.CALL_ID_EXECUTED_MORE_THAN_ONCE: Explanation("one tool-call id ran more than once", "look the call up in the owning system: count how many times it took effect"),
    r.IDEMPOTENCY_KEY_REUSED_ARGUMENTS_UNAVAILABLE: Explanation("an idempotency key is reused and the arguments cannot be compared", "look the key up in the owning system: compare what each call sent"),
    r.EFFECT_UNKNOWN: Explanation("nobody declared whether the tool reads or writes", "ask the tool's owner; declare the effect in the tool rules (tool_rules) or on the span"),
    r.WRITE_TIMEOUT: Explanation("a write timed out: the caller stopped hearing back, so the outcome is unknown", f"{_OWNER}: did it take effect once, not at all, or twice"),
    r.WRITE_STATUS_UNKNOWN: Explanation("a write was cancelled, never ended, or its end was never recorded", f"{_OWNER}: did it take effect"),
    r.WRITE_ERROR: Explanation("a write returned an error: it may have taken effect before failing", f"{_OWNER}: did part of it take effect"),
    r.WRITE_OUTCOME_UNRECORDED: Explanation("a write recorded ok but no result, where its producer records results", f"{_OWNER}: did it take effect"),
    r.WRITE_DISPATCHED_MORE_THAN_ONCE: Explanation("a write was dispatched more than once (retries below the tool call)", f"{_OWNER}: count how many times it took effect"),
    r.REPEATS_EARLIER_WRITE: Explanation("this write repeats an earlier write of the trace (same tool and arguments)", f"{_OWNER}: count how many times it took effect"),
    r.REPEAT_ARGUMENTS_UNCOMPARED: Explanation("writes of one tool whose arguments could not be compared: maybe one call made twice", f"{_OWNER}: count how many times it took effect"),
    r.DECIDED_BEFORE_COMPLETE: Explanation("this tool span arrived after its trace was decided", f"{_OWNER} to see whether it took effect"),
    r.NOT_PLANNED_AT_SHUTDOWN: Explanation("the trace could not be planned before a stop's deadline", "check every write of the trace in its owning system"),
    r.NOT_PLANNED_ERROR: Explanation("planning the trace failed (see the service's error log)", "check every write of the trace in its owning system"),
    r.IDEMPOTENCY_KEY_REUSED_ACROSS_TRACES: Explanation("an earlier trace's write of this tool used this idempotency key with other arguments", "look the key up in the owning system: which call it recorded"),
    r.RETRY_OF_HELD_WRITE: Explanation("the same write as an earlier trace's write that is held for review, not resolved", "resolve the earlier trace first; look the call up in the owning system: count how many times it took effect"),
    r.WRITE_COMMITTED: Explanation("a write recorded ok with its result: never re-fire it, inject its result", ""),
    r.UNSTABLE_RESULT: Explanation("a read whose results differ between executions: inject the recorded one", ""),
    r.DECLARED_READ: Explanation("a read declared by the producer or the operator: safe to re-execute", ""),
    r.HINTED_READ: Explanation("a read only hints say (MCP readOnlyHint, a safe HTTP method)", ""),
    r.REPEATED_LATER: Explanation("a later call repeats this one", ""),
    r.REPEATED_READ: Explanation("a read made more than once", ""),
    r.RESULT_NOT_RECORDED: Explanation("the call's result was not recorded", ""),
    r.REQUESTED_NOT_RECORDED: Explanation("the model asked for this call; no tool span records it", "check whether the call ran at all"),
    r.RELATED_CALL_IDS_TRUNCATED: Explanation("more calls are related than are listed", ""),
    r.ERROR_IN_RESULT: Explanation("the recorded result says the call failed", ""),
    r.RESULT_UNREAD: Explanation("the result was too large or deep to check for an error", ""),
    r.FAILURE_TEXT_IN_RESULT: Explanation("the result is text that reads as a failure report (timed out, an exception, a 5xx page)", ""),
    r.ERROR_TEMPLATE_IN_RESULT: Explanation("the result is a framework's own error or timeout text", ""),
    r.FRAMEWORK_STATUS_ERROR: Explanation("the framework's own status attribute says the call failed", ""),
    r.DISPATCH_ATTEMPT_FAILED: Explanation("a dispatch attempt below the call failed", ""),
    r.ARGUMENTS_UNWRAPPED: Explanation("a framework's wrapper was taken off the arguments", ""),
    r.RESPONSE_REPLAYED: Explanation("the server said it replayed a stored response (Idempotent-Replayed)", ""),
    r.REPEATS_COMMITTED_WRITE: Explanation("same key and arguments as an earlier trace's committed write: the key did its job", ""),
    r.RETRIES_UNCHECKED: Explanation("the write index could not answer (its database down or locked): this write was not compared with earlier traces' writes", "if it may be a retry, look its key or arguments up in the owning system for an earlier call"),
    r.APPROVAL_PENDING: Explanation("the call waits for human approval: its body did not run", ""),
    r.RESUMES_PENDING_CALL: Explanation("this step is the run, after approval, of a call recorded pending earlier", ""),
    r.CONSUMES_RESULT_OF: Explanation("the arguments hold a token an earlier result returned", ""),
    r.RESULT_CONSUMED_BY: Explanation("the result returned a token later arguments hold", ""),
    r.MAY_CONSUME_UNRECORDED_RESULT: Explanation("the arguments hold a token first seen here; an earlier result was not recorded", ""),
    r.UNRECORDED_RESULT_MAY_BE_CONSUMED: Explanation("this unrecorded result may be where a later call's token came from", ""),
    r.ARGUMENTS_NOT_RECORDED: Explanation("the arguments were not recorded", ""),
    r.ARGUMENTS_TOO_LARGE: Explanation("the arguments are too large to hash", ""),
    r.ARGUMENTS_TOO_DEEP: Explanation("the arguments nest too deep to hash", ""),
    r.ARGUMENTS_NOT_I_JSON: Explanation("the arguments are not I-JSON (RFC 7493): no canonical hash", ""),
    r.ARGUMENTS_HIDDEN: Explanation("the producer hid the arguments (it recorded its stand-in for a hidden value): they cannot be compared", ""),
}


def explain(code: str) -> Explanation:
    """``code`` in words; ``malformed_<field>`` names the field; an unknown code says it is not understood."""
    if code in EXPLANATIONS:
        return EXPLANATIONS[code]
    if code.startswith(r.MALFORMED_PREFIX):
        field = code.removeprefix(r.MALFORMED_PREFIX)
        return Explanation(f"the span's {field} could not be read", f"{_OWNER} to see whether it took effect")
    return Explanation(f"reason {code!r} is not known to this version of tracefence", f"{_OWNER}; upgrade tracefence to read it")


def legend(codes: Iterable[str]) -> list[tuple[str, Explanation]]:
    """The distinct ``codes`` in first-seen order, each with its explanation: the key below a table."""
    return [(code, explain(code)) for code in dict.fromkeys(codes)]


def legend_lines(codes: Iterable[str]) -> list[str]:
    """:func:`legend` as text lines (``code: meaning; check: ...``) for the terminal tables."""
    return [f"{code}: {e.meaning}" + (f"; check: {e.check}" if e.check else "") for code, e in legend(codes)]
