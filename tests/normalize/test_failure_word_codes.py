"""A status-like field whose string value is a code made of words that name a failure (docs/DECISIONS.md 1020):
exact plans through ``tracefence plan``'s function (``plan_text``) on OTLP/JSON text, as test_result_values does."""

from __future__ import annotations

import json

import pytest
from test_result_values import TOOL_ID, ROOT_ID, _decisions, _plan, _span, _write

from otel_tracefence.core.config import ResultErrorShape
from otel_tracefence.normalize.result_errors import DEFAULT_SHAPES, error_shape, failure_word_code

COMMITTED = ("injected", [("invoice.create", "skip", ("write_committed",))])
ERROR_IN_RESULT = ("review", [("invoice.create", "review", ("write_error", "error_in_result"))])

# The four shapes (a write planned skip, write_committed, before 1020), then codes of other APIs and forms.
FAILING = [
    {"code": "INTERNAL_SERVER_ERROR"},
    {"status": "INTERNAL_SERVER_ERROR"},
    {"extensions": {"code": "INTERNAL_SERVER_ERROR"}},
    {"errors": None, "extensions": {"code": "INTERNAL_SERVER_ERROR"}},
    {"data": None, "extensions": {"code": "SERVICE_UNAVAILABLE"}},
    {"extensions": {"success": False}},  # extensions a wrapper: every top shape reads under it (1021)
    {"code": "SERVICE_UNAVAILABLE"},
    {"status": "PAYMENT_FAILED"},
    {"error_code": "card_declined"},
    {"errorCode": "card_declined"},
    {"code": "request_timeout"},
    {"code": "upstream_error"},
    {"state": "RequestTimedOut"},
    {"outcome": "deadline-exceeded"},
    {"result": "charge.failed"},
    {"Status": "Gateway Timeout Error"},
    {"status": {"code": "QUOTA_EXCEEDED"}},
    {"response": {"body": {"code": "rate_limit_exceeded"}}},
    {"code": "PERMISSION_DENIED"},
    {"code": "FAILED_PRECONDITION"},
    {"code": "NO_ERROR_HANDLER_FAILED"},
    {"code": "non_retryable_error"},
]
SUCCEEDING = [
    {"code": "ch_1"},
    {"status": "ok"},
    {"state": "SUCCEEDED"},
    {"code": "NO_ERROR"},
    {"status": "error_free"},
    {"status": "not_failed"},
    {"code": "err_7f3a"},
    {"code": "INV-504"},
    {"code": "NOT_FOUND"},
    {"status": "timed"},
    {"code": "internal_transfer"},
    {"result": "inv_1"},
    {"extensions": {"cost": {"requestedQueryCost": 3}}, "data": {"id": "inv_1"}},
    {"items": [{"code": "INTERNAL_SERVER_ERROR"}, {"code": "ok"}]},  # a batch: its items are results of their own (973)
    {"message": "PAYMENT_FAILED", "id": "ch_1"},  # not a status-like key: only those keys' values are read as codes
    {"type": "card_declined_notice", "id": "ntc_1"},
]


@pytest.mark.parametrize("result", FAILING, ids=json.dumps)
def test_a_write_whose_status_like_field_is_a_failure_word_code_is_held(result: dict) -> None:
    assert _decisions(_plan(_write(**{"gen_ai.tool.call.result": json.dumps(result)}))) == ERROR_IN_RESULT


@pytest.mark.parametrize("result", SUCCEEDING, ids=json.dumps)
def test_a_write_whose_code_names_no_failure_or_a_negated_one_is_committed(result: dict) -> None:
    assert _decisions(_plan(_write(**{"gen_ai.tool.call.result": json.dumps(result)}))) == COMMITTED


@pytest.mark.parametrize("result", FAILING[:4], ids=json.dumps)
def test_a_read_with_a_failure_word_code_is_replayed_as_before(result: dict) -> None:
    # A read is safe to run again whatever its outcome (issue 24, section 2): replayed as before, its step noting the
    # error in its result as every other shape's does ({"status": "error"} on a read).
    read = _span(TOOL_ID, "execute_tool invoice.get", ROOT_ID, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.get",
                 "tracefence.effect": "read", "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": json.dumps(result)})  # fmt: skip
    assert _decisions(_plan(read)) == ("dynamic", [("invoice.get", "replay", ("declared_read", "error_in_result"))])


@pytest.mark.parametrize(("value", "expected"), [("INTERNAL_SERVER_ERROR", True), ("requestTimeout", True), ("timed out", True),
                                                 ("HTTPError", True), ("Cancelled", True), ("NO_ERROR", False), ("error_free", False),
                                                 ("Timeout-free", False), ("not timed out", False), ("err_7f3a", False), ("", False),
                                                 ("no errors, one failure", True)])  # fmt: skip
def test_failure_word_code_reads_the_words_and_their_negation(value: str, expected: bool) -> None:
    # "not timed out": "not" negates the pair "timed out" as it negates one word; "no errors, one failure" names one.
    assert failure_word_code(value) is expected


def test_the_word_code_shape_names_its_key() -> None:
    # Result.error is the shape's key: the key the code was found under, folded as the other shapes' keys are.
    shape = error_shape({"extensions": {"errorCode": "card_declined"}}, DEFAULT_SHAPES)
    assert shape is not None and shape.key == "error_code"


def test_the_word_codes_hold_beside_an_operators_shapes() -> None:
    # With result_error_shapes configured the shapes are indexed afresh and asked without the per-value cache.
    shapes = DEFAULT_SHAPES + (ResultErrorShape(key="outcome_code", equals="E42"),)
    found = [error_shape(result, shapes) for result in ({"code": "card_declined"}, {"code": "NO_ERROR"}, {"outcome_code": "e42"})]
    assert [None if shape is None else shape.key for shape in found] == ["code", None, "outcome_code"]
