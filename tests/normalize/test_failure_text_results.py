"""A write's text result that reads as a failure report no framework template knows (a timeout, an exception's text,
an error page, an HTTP 5xx status line, the word for an error in another language) leaves its outcome unknown: the
write is held, ``write_status_unknown`` with the note ``failure_text_in_result`` (docs/DECISIONS.md 1031). Before,
each of these planned ``skip`` (a fresh user's trial). Success texts, and a text saying no error happened, stay
committed; a read replays whatever its text."""

from __future__ import annotations

import json

import pytest

from otlp_json_helpers import plan_one_call

HELD = ("review", [("review", ("write_status_unknown", "failure_text_in_result"))])
COMMITTED = ("injected", [("skip", ("write_committed",))])


def _plan(effect: str, result: object) -> tuple[str | None, list[tuple[str, tuple[str, ...]]]]:
    return plan_one_call(effect, result)


@pytest.mark.parametrize("result", [
    "<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>",
    "java.net.SocketTimeoutException: Read timed out",
    "openai.APITimeoutError: Request timed out.",
    "HTTP/1.1 503",
    "Failed to create invoice: HTTP 500",
    "curl: (28) Operation timed out after 30001 milliseconds with 0 bytes received",
    "upstream connect error or disconnect/reset before headers. reset reason: connection timeout",
    "The request to billing timed out after 30 seconds.",
    "Deadline exceeded while creating the invoice",
    "Zeitüberschreitung bei der Anfrage",
    "Falha ao criar a fatura: tempo esgotado",
    "Ошибка: превышено время ожидания",
    "请求超时",
    "com.acme.billing.LedgerLockedException: ledger is locked",
    "Upstream answered HTTP 502",
    json.dumps("Internal Server Error while charging"),  # a JSON string: read as the text it is
])  # fmt: skip
def test_a_write_whose_text_reads_as_a_failure_is_held(result):
    assert _plan("write", result) == HELD


@pytest.mark.parametrize("result", [
    "Invoice inv_8812 created", "No errors.", "0 errors, 3 warnings", "Cancelled subscription sub_1", "terror alert sent",
    "Error: none", "timeout was not reached", "status='success' result='refunded' error=None",  # a failure word denied
    "Booked B-7. Note: an error occurred earlier and was retried",  # an error mentioned, not reported (402)
])  # fmt: skip
def test_a_write_whose_text_reads_as_success_stays_committed(result):
    assert _plan("write", result) == COMMITTED


def test_a_read_replays_whatever_its_text():
    assert _plan("read", "java.net.SocketTimeoutException: Read timed out") == ("dynamic", [("replay", ("declared_read", "failure_text_in_result"))])
