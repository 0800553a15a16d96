"""A recorded result the normalizer cannot look into is no evidence of success (docs/DECISIONS.md 486): JSON text over
``limits.max_argument_bytes`` (1 MB by default), JSON nested past what the parser follows, or bytes. Such a result on a
span that says OK gives the status ``unknown`` and the note ``result_unread``: a write is held
(``write_status_unknown``), a read still replays. Before, an error inside a 1.1 MB or 1,000-deep result passed the
write as committed (a break-it trial's finding)."""

from __future__ import annotations

import base64
import json

import pytest

from otlp_json_helpers import json_span
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ERROR_BIG = json.dumps({"error": {"message": "upstream timeout"}, "x": "y" * 1_100_000})
ERROR_DEEP = '{"error": {"message": "upstream timeout"}, "x": ' + "[" * 1000 + "]" * 1000 + "}"
# An integer past the digits Python converts (4,300: CVE-2020-10735): the whole text is unread, its error too (1030).
ERROR_LONG_NUMBER = '{"error": "timeout", "n": ' + "1" * 4301 + "}"


def _plan(effect: str, result_value: dict) -> tuple[str, list[tuple[str, tuple[str, ...]]]]:
    tool = json_span(TRACE, "00f067aa0ba902b7", "execute_tool invoice.create", parent="a3ce929d0e0e4736", **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "c1",
        "tracefence.effect": effect, "gen_ai.tool.call.arguments": '{"amount": 1250}',
    })  # fmt: skip
    tool["attributes"].append({"key": "gen_ai.tool.call.result", "value": result_value})
    tool["status"] = {"code": 1}
    root = json_span(TRACE, "a3ce929d0e0e4736", "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    text = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, tool]}]}]})
    (plan,), errors = plan_text(text, "otlp-json", TraceFenceConfig())
    assert errors == []
    return plan.replay_class.value, [(d.decision.value, d.reasons) for d in plan.steps]


@pytest.mark.parametrize(
    "value",
    [{"stringValue": ERROR_BIG}, {"stringValue": ERROR_DEEP}, {"bytesValue": base64.b64encode(b'{"error": "boom"}').decode()}, {"stringValue": ERROR_LONG_NUMBER}],
    ids=["over_max_argument_bytes", "nested_past_the_parser", "bytes", "number_past_the_digit_limit"],
)
def test_a_write_whose_result_cannot_be_read_is_held(value):
    assert _plan("write", value) == ("review", [("review", ("write_status_unknown", "result_unread"))])


@pytest.mark.parametrize("value", [{"stringValue": ERROR_BIG}, {"stringValue": ERROR_DEEP}], ids=["over_max_argument_bytes", "nested_past_the_parser"])
def test_a_read_whose_result_cannot_be_read_still_replays(value):
    assert _plan("read", value) == ("dynamic", [("replay", ("declared_read", "result_unread"))])


def test_a_large_plain_text_result_is_read_as_text_and_commits():
    assert _plan("write", {"stringValue": "invoice in_1250 created " + "y" * 1_100_000}) == ("injected", [("skip", ("write_committed",))])


@pytest.mark.parametrize(("result", "expected"), [
    (json.dumps(json.dumps({"error": "timeout"})), ("review", [("review", ("write_error", "error_in_result"))])),
    (json.dumps(json.dumps({"id": "inv_1"})), ("injected", [("skip", ("write_committed",))])),
], ids=["error_inside", "success_inside"])  # fmt: skip
def test_json_text_inside_a_json_string_is_read_once_more(result, expected):
    # A result encoded twice (a framework that serialises a tool's JSON answer as a string) is read as the JSON it
    # holds, one level down (docs/DECISIONS.md 1030): before, its error passed the write as committed.
    assert _plan("write", {"stringValue": result}) == expected

