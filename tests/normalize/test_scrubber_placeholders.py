"""Scrubber placeholders as stand-ins for hidden values (``framework_texts.REDACTED_VALUES``, folded for case, and a
JSON object field whose whole value is one; docs/DECISIONS.md 979): a write's hidden result is no evidence it
committed (``write_outcome_unrecorded``), hidden arguments are not compared (``arguments_hidden``), never injected."""

from __future__ import annotations

import json

import pytest

from otel_tracefence.normalize.evidence import redacted
from tests.normalize.test_redacted_values import plan_of, root, tool

PLACEHOLDERS = ["<redacted>", "***REDACTED***", "<omitted>", "[MASKED]", "[removed]", "[content omitted]", "<REDACTED>", "[Masked]", "<Omitted>"]
IN_FIELDS = ['{"id": "****"}', '{"charge": "ch_1", "card": "<redacted>"}', '{"a": {"token": "[MASKED]"}}', '[{"id": "[Removed]"}]',
             '{"id":"\\u003credacted\\u003e"}', '{"k": "REDACTED", "n": 2}']  # fmt: skip


@pytest.mark.parametrize("stand_in", PLACEHOLDERS + [json.dumps(p) for p in PLACEHOLDERS[:2]] + IN_FIELDS)
def test_a_write_whose_result_is_a_placeholder_is_held_never_injected(stand_in: str) -> None:
    cls, steps, messages = plan_of(root(), tool("e1" * 8, "payments.charge", "write", '{"amount": 5}', stand_in))
    assert (cls, steps) == ("review", [("payments.charge", "review", ("write_outcome_unrecorded", "result_not_recorded"))])
    assert len(messages) == 1 and messages[0].endswith("is its producer's stand-in for a hidden value: whether the write committed cannot be read")


@pytest.mark.parametrize("stand_in", ["[content omitted]", "[MASKED]", "<redacted>", '{"id": "****"}', '{"card": "<Redacted>", "amount": 5}'])
def test_two_writes_whose_arguments_are_placeholders_are_not_compared(stand_in: str) -> None:
    cls, steps, _ = plan_of(root(), tool("e1" * 8, "payments.charge", "write", stand_in, '"ch_1"'), tool("e2" * 8, "payments.charge", "write", stand_in, '"ch_2"'))
    assert (cls, [reasons for _, _, reasons in steps]) == ("review", [("repeat_arguments_uncompared", "arguments_hidden")] * 2)


@pytest.mark.parametrize("value", ['{"id": "ch_1"}', '{"id": "**** and more"}', '{"note": "[removed] 2 items"}', "[1, 2]", "masked", "<b>ok</b>",
                                   '{"stars": "*****"}', "redacted text", '{"id": "ch_1", "tags": ["[MASKED]"]}'])  # fmt: skip
def test_a_value_that_only_contains_a_placeholder_is_shown(value: str) -> None:
    assert redacted(value) is False


def test_a_write_whose_result_is_shown_commits() -> None:
    cls, steps, _ = plan_of(root(), tool("e1" * 8, "payments.charge", "write", '{"amount": 5}', '{"id": "ch_1", "status": "<b>ok</b>"}'))
    assert (cls, steps) == ("injected", [("payments.charge", "skip", ("write_committed",))])
