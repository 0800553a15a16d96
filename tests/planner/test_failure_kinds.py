"""Kinds of failure a write's record shows that were planned ``skip`` ``write_committed`` (fail-open), found by a fresh
user's trial (docs/DECISIONS.md 970-974): results, attributes and events of any producer that say the call failed or
that its outcome is not known. Each is a rule for every producer; a result that says the call committed stays
committed. Exact decisions, reasons and classes, planned as ``tracefence plan`` plans them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "4f" * 16
ROOT = "a0" * 8
COMMITTED = ("injected", [("payments.charge", "skip", ("write_committed",))])
ERROR_IN_RESULT = ("review", [("payments.charge", "review", ("write_error", "error_in_result"))])
TEMPLATE = ("review", [("payments.charge", "review", ("write_error", "error_template_in_result"))])
UNRECOGNIZED = ("review", [("payments.charge", "review", ("unrecognized_failure_evidence",))])


def charge(result: Any = None, events: list | None = None, **extra: Any) -> tuple[str, list]:
    """(class, [(tool, decision, reasons)]) of a trace holding one GenAI ``execute_tool payments.charge`` write (status
    unset) whose result is ``result`` (text as given, anything else as JSON) under an ``invoke_agent`` root."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge", "gen_ai.tool.call.id": "c1",
                  "gen_ai.tool.call.arguments": '{"amount": 1}', "tracefence.effect": "write"}  # fmt: skip
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result if isinstance(result, str) else json.dumps(result)
    attributes.update(extra)
    root = json_span(TRACE, ROOT, "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    tool = json_span(TRACE, "b1" * 8, "execute_tool payments.charge", ROOT, events, **attributes)
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [root, tool]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    return trace.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


# -- 970: a status written under another key, or an outcome not known -------------------------------------------------

@pytest.mark.parametrize(
    "result",
    [{"state": "FAILED"}, {"State": "failed"}, {"outcome": "failure"}, {"result": "error"}, {"status": "pending"},
     {"status": "in-progress"}, {"state": "PROCESSING"}, {"outcome": "timed out"}, {"data": {"state": "ABORTED"}}],
    ids=["state_failed", "state_folded_key", "outcome_failure", "result_error", "status_pending", "status_in_progress",
         "state_processing", "outcome_timed_out", "state_under_wrapper"],
)
def test_a_status_under_state_outcome_or_result_or_an_unknown_outcome_is_no_commit(result: Any) -> None:
    assert charge(result) == ERROR_IN_RESULT


@pytest.mark.parametrize("text", ["timeout", "Timed out", "TIMEOUT.", "cancelled", "aborted", "failed", "Error", "pending"])
def test_a_whole_text_that_is_a_failure_or_unknown_outcome_word_is_no_commit(text: str) -> None:
    assert charge(text) == TEMPLATE


# -- 971: an error report under other keys; an HTTP failure's reason phrase; axios's text ------------------------------

@pytest.mark.parametrize(
    "result",
    [{"error_message": "Gateway Timeout"}, {"errorMessage": "boom", "errorType": "Error"}, {"exception": "TimeoutError"},
     {"detail": "Internal Server Error"}, {"message": "Internal server error"}, {"title": "Service Unavailable"},
     {"message": "bad gateway"}, {"response": {"reason": "Too Many Requests"}}],
    ids=["error_message", "lambda_errorMessage", "exception", "detail_500", "message_500_folded", "problem_title_503",
         "message_502", "reason_429_under_wrapper"],
)
def test_an_error_report_key_or_an_http_failure_phrase_is_no_commit(result: Any) -> None:
    assert charge(result) == ERROR_IN_RESULT


@pytest.mark.parametrize(
    "text",
    ["Request failed with status code 500", "Request failed with status code 429", "Request failed with status code 408",
     "Bad Gateway", "504 Gateway Time-out", "Service Unavailable\n"],
)
def test_axios_text_for_a_failing_status_and_a_whole_reason_phrase_are_templates(text: str) -> None:
    assert charge(text) == TEMPLATE


# -- 972: a network error code, a gRPC code name under status.code ------------------------------------------------------

@pytest.mark.parametrize(
    "result",
    [{"code": "ECONNRESET"}, {"code": "ETIMEDOUT", "errno": -110}, {"code": "EAI_AGAIN"}, {"code": "UND_ERR_HEADERS_TIMEOUT"},
     {"code": "ERR_NETWORK", "message": "Network Error"}, {"Status": {"Code": "DeadlineExceeded"}},
     {"status": {"code": "UNAVAILABLE", "message": "upstream connect error"}}],
    ids=["econnreset", "etimedout", "eai_again", "undici_headers_timeout", "axios_err_network", "grpc_status_code_folded",
         "grpc_status_code_unavailable"],
)
def test_a_network_error_code_or_a_grpc_failure_code_is_no_commit(result: Any) -> None:
    assert charge(result) == ERROR_IN_RESULT


@pytest.mark.parametrize("text", ["read ECONNRESET", "connect ECONNREFUSED 10.0.0.1:443", "getaddrinfo ENOTFOUND api.example.com", "ETIMEDOUT"])
def test_a_node_network_error_message_is_a_template(text: str) -> None:
    assert charge(text) == TEMPLATE


# -- 973: where the shapes look: two wrappers deep, a top-level list of one object ---------------------------------------

@pytest.mark.parametrize(
    "result",
    [{"response": {"body": {"status": "error"}}}, {"body": {"error": "upstream"}}, [{"error": "gateway timeout"}],
     [{"data": {"status": 503}}], {"Response": {"Body": {"success": False}}}],
    ids=["response_body", "body", "list_of_one", "list_of_one_wrapper", "folded_wrappers"],
)
def test_a_result_two_wrappers_deep_or_a_list_of_one_object_is_read_as_the_top(result: Any) -> None:
    assert charge(result) == ERROR_IN_RESULT


def test_three_wrappers_deep_or_a_list_of_several_objects_is_not_the_top() -> None:
    # Only "anywhere" shapes look below: a status three wrappers down, or in one item of a batch, is that item's.
    assert charge({"response": {"body": {"data": {"status": "error"}}}}) == COMMITTED
    assert charge([{"id": "ch_1"}, {"status": "failed"}]) == COMMITTED


# -- 974: failure attributes and events ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "extra",
    [{"tool.outcome": "timeout"}, {"cancelled": True}, {"aborted": True}, {"call.canceled": "yes"}, {"interrupted": True},
     # already held before these kinds, for comparison: the same reason
     {"tool.error": "x"}, {"timed_out": True}, {"result.status": "failed"}],
    ids=["outcome_timeout", "cancelled", "aborted", "canceled_text", "interrupted", "tool_error", "timed_out", "result_status"],
)
def test_an_attribute_naming_an_outcome_or_a_cancellation_holds_the_write(extra: dict) -> None:
    assert charge({"id": "ch_1"}, **extra) == UNRECOGNIZED


@pytest.mark.parametrize("name", ["error", "failure", "tool.error", "Timeout", "cancelled"])
def test_an_event_named_for_a_failure_holds_the_write(name: str) -> None:
    events = [{"name": name, "timeUnixNano": "1700000000050000000", "attributes": []}]
    assert charge({"id": "ch_1"}, events) == UNRECOGNIZED


def test_the_event_message_names_the_event() -> None:
    from otel_tracefence.normalize.evidence import failure_event
    from otel_tracefence.normalize.span_view import SpanEvent

    found = failure_event((SpanEvent("gen_ai.choice", {}, 0), SpanEvent("failure", {}, 0)))
    assert (found.reason, found.message) == (
        "unrecognized_failure_evidence",
        "span event 'failure' names the call's error, and only the 'exception' event is read: whether the write committed cannot be known")
    assert failure_event((SpanEvent("exception", {}, 0), SpanEvent("retry", {}, 0), SpanEvent("cancel_requested", {}, 0))) is None


# -- what says the write committed stays committed -----------------------------------------------------------------------

@pytest.mark.parametrize(
    "result",
    [{"status": "ok"}, {"state": "SUCCEEDED"}, {"result": "inv_1"}, {"message": "Charged"}, {"code": "ch_1"}, {"detail": "ok"},
     {"outcome": "success"}, {"state": "CA", "id": "ch_1"}, {"message": "Bad Gateway retried, charged ch_1"}, {"exception": None},
     {"error_message": ""}, {"code": "ENOENT_NOT_LISTED"}, "Request failed with status code 404", "charged ch_1",
     "timeout was not reached", {"response": {"body": {"status": "ok", "id": "ch_1"}}}, [{"id": "ch_1"}]],
)
def test_a_result_that_says_the_write_committed_stays_committed(result: Any) -> None:
    assert charge(result) == COMMITTED


@pytest.mark.parametrize(
    "extra",
    [{"tool.outcome": "success"}, {"cancelled": False}, {"aborted": False}, {"interrupted": "no"}, {"cancel_url": "https://x/c"}],
)
def test_an_attribute_that_says_no_failure_leaves_the_write_committed(extra: dict) -> None:
    assert charge({"id": "ch_1"}, **extra) == COMMITTED


@pytest.mark.parametrize("name", ["retry", "gen_ai.content.completion", "cancel_requested"])
def test_an_event_that_names_no_failure_leaves_the_write_committed(name: str) -> None:
    events = [{"name": name, "timeUnixNano": "1700000000050000000", "attributes": []}]
    assert charge({"id": "ch_1"}, events) == COMMITTED
