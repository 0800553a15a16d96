"""A write is committed only on evidence the normalizer can read (issue 24, section 2): a key that may hold its
result and that no convention reads holds it (docs/DECISIONS.md 953), and so does a dispatch below it that the server
refused (docs/DECISIONS.md 954). Exact plans through ``tracefence plan``'s function on OTLP/JSON text."""

from __future__ import annotations

from typing import Any

import pytest
from test_result_values import TOOL_ID, _decisions, _plan, _span, _write

HELD = ("review", [("invoice.create", "review", ("write_outcome_unrecorded", "result_not_recorded"))])
COMMITTED_NO_RESULT = ("static", [("invoice.create", "skip", ("write_committed", "result_not_recorded"))])


@pytest.mark.parametrize("key", ["gen_ai.tool.response", "mastra.tool.result", "output", "app.call.return_value", "agent.tool_outputs"])
def test_a_write_with_no_result_read_and_a_key_naming_its_result_is_held_naming_the_key(key: str) -> None:
    plan = _plan(_write(**{"gen_ai.tool.call.result": None, key: '{"isError": true}'}))
    assert _decisions(plan) == HELD
    assert plan.steps[0].step.malformed[0].message == (
        f"attribute {key!r} may hold its result, and no convention reads it: whether the write committed cannot be read"
    )


@pytest.mark.parametrize("attributes", [{}, {"gen_ai.response.model": "m"}, {"app.output_format": "json"}, {"output": ""}])
def test_a_write_with_no_result_and_no_key_naming_one_commits_as_before(attributes: dict) -> None:
    assert _decisions(_plan(_write(**{"gen_ai.tool.call.result": None, **attributes}))) == COMMITTED_NO_RESULT


def test_a_write_whose_result_is_read_is_not_asked_for_other_keys() -> None:
    assert _decisions(_plan(_write(output="whatever"))) == ("injected", [("invoice.create", "skip", ("write_committed",))])


def test_a_read_with_a_key_naming_its_result_replays() -> None:
    plan = _plan(_write(**{"tracefence.effect": "read", "gen_ai.tool.call.result": None, "output": "x"}))
    assert _decisions(plan) == ("dynamic", [("invoice.create", "replay", ("declared_read",))])


def _client(span_id: str, method: str, status: int | None, code: int = 0, **extra: Any) -> dict:
    attributes = {"http.request.method": method, "url.full": "https://pay.example/charge", **extra}
    if status is not None:
        attributes["http.response.status_code"] = status
    span = _span(span_id, method, TOOL_ID, **attributes)
    span["kind"], span["status"] = 3, {"code": code}
    return span


@pytest.mark.parametrize("status", [400, 402, 409, 422])
def test_a_dispatch_below_a_write_refused_with_a_4xx_fails_the_write(status: int) -> None:
    plan = _plan(_write(**{"gen_ai.tool.call.result": '"the processor did not take the charge"'}), _client("c1" * 8, "POST", status, code=2))
    assert _decisions(plan) == ("review", [("invoice.create", "review", ("write_error", "dispatch_attempt_failed"))])


def test_a_safe_request_answered_404_below_a_write_leaves_it_committed() -> None:
    plan = _plan(_write(), _client("c1" * 8, "GET", 404, code=2))
    assert _decisions(plan) == ("injected", [("invoice.create", "skip", ("write_committed",))])


def test_a_dispatch_answered_201_leaves_the_write_committed() -> None:
    assert _decisions(_plan(_write(), _client("c1" * 8, "POST", 201))) == ("injected", [("invoice.create", "skip", ("write_committed",))])
