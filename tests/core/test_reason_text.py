"""The one table of reason explanations (core/reason_text.py), shared by the review page, ``review show`` and
``plan --format table``."""

from __future__ import annotations

from otel_tracefence.core import reasons
from otel_tracefence.core.reason_text import EXPLANATIONS, explain, legend

CODES = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str) and k != "MALFORMED_PREFIX"}


def test_every_reason_code_is_explained_and_nothing_else():
    assert set(EXPLANATIONS) == CODES
    assert all(e.meaning for e in EXPLANATIONS.values())


def test_every_fencing_code_says_what_to_check_in_the_owning_system():
    fencing = CODES - reasons.NOTES - reasons.NOT_FENCING - {reasons.REQUESTED_NOT_RECORDED}
    assert [code for code in sorted(fencing) if not EXPLANATIONS[code].check] == []


def test_a_timed_out_write_is_explained():
    e = explain("write_timeout")
    assert e.meaning == "a write timed out: the caller stopped hearing back, so the outcome is unknown"
    assert e.check.startswith("look the call up in the owning system") and "once, not at all, or twice" in e.check


def test_a_malformed_field_is_named_and_an_unknown_code_is_not_left_blank():
    assert explain("malformed_effect").meaning == "the span's effect could not be read"
    unknown = explain("new_rule_of_a_later_engine")
    assert unknown.meaning == "reason 'new_rule_of_a_later_engine' is not known to this version of tracefence"
    assert "upgrade tracefence" in unknown.check


def test_the_legend_lists_each_code_once_in_first_seen_order():
    assert [code for code, _ in legend(["write_timeout", "declared_read", "write_timeout"])] == ["write_timeout", "declared_read"]
