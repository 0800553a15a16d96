"""An idempotency key written in the arguments under another spelling or nesting than the configured paths
(``idempotencyKey``, ``headers.Idempotency-Key``, ``options.idempotency_key``) is the key (docs/DECISIONS.md 969): two
writes sharing it with other arguments are a key conflict. Before, with the default path ``idempotency_key`` only,
both passed as two committed writes (a fresh user's trial: the 200 payout beside the 100 one, one key)."""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "7f" * 16
ROOT = "a1" * 8


def _plan(arguments: list[dict], config: TraceFenceConfig | None = None) -> list[tuple]:
    spans = [json_span(TRACE, ROOT, "invoke_agent payouts", **{"gen_ai.operation.name": "invoke_agent"})]
    for index, args in enumerate(arguments):
        spans.append(json_span(TRACE, f"b{index}" * 8, "execute_tool payouts.send", ROOT, **{
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payouts.send", "gen_ai.tool.call.id": f"c{index}",
            "tracefence.effect": "write", "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": '{"payout": "po_1"}'}))  # fmt: skip
    document = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    (plan,), _ = plan_text(document, "otlp-json", config or TraceFenceConfig())
    return [(d.step.call_id, d.step.idempotency_key, d.decision.value, d.reasons) for d in plan.steps]


@pytest.mark.parametrize("place", [
    lambda amount: {"amount": amount, "idempotencyKey": "k-1"},
    lambda amount: {"amount": amount, "headers": {"Idempotency-Key": "k-1"}},
    lambda amount: {"amount": amount, "options": {"idempotency_key": "k-1"}},
], ids=["camel", "header", "nested"])
def test_a_key_under_another_spelling_or_nesting_is_the_key(place):
    assert _plan([place(100), place(200)]) == [
        ("c0", "k-1", "conflict", ("idempotency_key_conflict",)), ("c1", "k-1", "conflict", ("idempotency_key_conflict",)),
    ]


def test_a_tool_rule_naming_the_key_argument_is_the_only_place_read():
    config = TraceFenceConfig(tool_rules=[{"match": "payouts.send", "effect": "write", "idempotency_key_argument": "request_id"}])
    assert _plan([{"amount": 100, "request_id": "r-1", "idempotencyKey": "k-9"}], config) == [("c0", "r-1", "skip", ("write_committed",))]


def test_a_key_field_of_another_type_is_a_key_that_cannot_be_read():
    assert _plan([{"amount": 100, "idempotencyKey": {"v": 1}}]) == [("c0", None, "review", ("malformed_idempotency_key",))]
