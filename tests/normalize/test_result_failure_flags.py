"""A write's result whose top holds a field naming an error, a timeout, a cancellation or a success by its key's words
(``hasError``, ``failed``, ``cancelled``, ``timedOut``, ``errorCode``, ``err``, SOAP's ``fault``, ``success``) with a
value that says the call did not succeed fails the step, ``error_in_result`` (docs/DECISIONS.md 1032). Before, each
planned ``skip`` (a fresh user's trial). A field deeper in what the call returned, a "none" value, a number under a
timeout (a setting) and a time under a cancellation (a timestamp) change nothing; a read replays."""

from __future__ import annotations

import json

import pytest

from otlp_json_helpers import plan_one_call

HELD = ("review", [("review", ("write_error", "error_in_result"))])
COMMITTED = ("injected", [("skip", ("write_committed",))])


def _plan(effect: str, result: object) -> tuple[str | None, list[tuple[str, tuple[str, ...]]]]:
    return plan_one_call(effect, json.dumps(result))


@pytest.mark.parametrize("result", [
    {"hasError": True}, {"failed": True}, {"cancelled": True}, {"timedOut": True}, {"success": 0}, {"success": "no"},
    {"errorCode": "E1234"}, {"err": "ECONNRESET"}, {"fault": {"faultcode": "soap:Server", "faultstring": "ledger locked"}},
    {"data": {"createInvoice": None}, "hasErrors": "true"}, {"response": {"Failed": True, "id": "inv_1"}},
])  # fmt: skip
def test_a_write_whose_result_flags_a_failure_fails(result):
    assert _plan("write", result) == HELD


@pytest.mark.parametrize("result", [
    {"id": "inv_1", "status": "draft"}, {"id": "sub_1", "cancelled_at": 1700000000}, {"error": None, "id": "inv_1"},
    {"errors": []}, {"timeout_ms": 30000}, {"success": True}, {"failure_reason": None}, {"error_count": 0},
    {"id": "inv_1", "lines": [{"failed": True}]},  # deeper: a part of what the call returned, not its outcome
    {"hasError": False, "id": "inv_1"}, {"errorCode": "none"},
])  # fmt: skip
def test_a_write_whose_result_flags_no_failure_stays_committed(result):
    assert _plan("write", result) == COMMITTED


def test_a_read_replays_whatever_its_flags():
    assert _plan("read", {"hasError": True}) == ("dynamic", [("replay", ("declared_read", "error_in_result"))])
