"""Data flow between steps (issue 11): id-like tokens (normalize/tokens.py) and the notes
``consumes_result_of`` / ``result_consumed_by`` (planner/dataflow.py), through hashes only.

The trace is shaped like seed 000's pager incident: six reads, step 7 ``pager.trigger``
returns ``{"status": "paged", "id": "pg_8812"}``, step 8 uses ``pg_8812``. Its spans are
made with the real SDK through :func:`otel_tracefence.agent.instrument.tool_call`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_tracefence.core import reasons
from otel_tracefence.core.config import Limits, TraceFenceConfig
from otel_tracefence.core.model import Decision, Effect, ReplayClass, ToolStatus, ToolStep
from otel_tracefence.normalize.tokens import is_token, text_tokens, token_hash, tokens_of_string, value_tokens
from otel_tracefence.readers.rows import read_rows
from otel_tracefence.core.schema import plan_to_json
from otel_tracefence.planner import plan_trace

REPLAY, SKIP = Decision.REPLAY, Decision.SKIP

from recorded_traces import SEED_PAGER, record  # noqa: F401 - record is used below


def rows(plan):
    return [(d.step.call_id, d.decision, d.reasons, d.related_call_ids) for d in plan.steps]


# -- which values are tokens ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "run",
    ["pg_8812", "pg_9147", "ch_3MtwBw", "TCK-1234", "in_acme_1250", "cus_4f9a21", "inv-acme-1250",
     "3MtwBwLkdIwHu7ix", "4bf92f3577b34da6", "550e8400-e29b-41d4-a716-446655440000", "550E8400-E29B-41D4-A716-446655440000"],
)
def test_id_like_runs_are_tokens(run):
    assert is_token(run)


@pytest.mark.parametrize(
    "run",
    ["8812", "ch_1", "utf-8", "gpt-4o", "v2", "p99", "sha256", "x86_64", "db", "paged", "2026-11-13", "abcdefghijklmnop",
     "123456789012345", "p99_ms", "team-db", "abcdefghijklmnopq_123", "ffffffff-ffff-ffff-ffff-ffffffffffff"],
)
def test_numbers_words_dates_and_short_codes_are_not_tokens(run):
    assert not is_token(run)


def test_tokens_are_whole_runs_inside_strings():
    assert tokens_of_string("https://pager.example/pages/pg_8812. See TCK-1234, not p99.") == ["pg_8812", "TCK-1234"]
    assert tokens_of_string("pg_8812abc") == ["pg_8812abc"]  # a run counts whole or not at all


def test_only_string_values_count_never_keys_or_numbers():
    value = {"pg_1111111": "x", "id": "pg_8812", "n": 123456789012, "nested": [{"page": "pg_8813"}, True, None]}
    assert value_tokens(value, 64) == tuple(sorted({token_hash("pg_8812"), token_hash("pg_8813")}))


def test_result_text_is_read_as_json_when_it_is_json_else_as_text():
    assert text_tokens('{"status": "paged", "id": "pg_8812"}', 64) == (token_hash("pg_8812"),)
    assert text_tokens("paged: pg_8812", 64) == (token_hash("pg_8812"),)
    assert text_tokens('{"pg_8812": 1}', 64) == ()  # a key, not a value
    assert text_tokens(None, 64) == ()


def test_token_hash_is_the_first_8_bytes_of_sha256_and_uuids_are_lower_cased():
    assert token_hash("pg_8812") == int.from_bytes(hashlib.sha256(b"pg_8812").digest()[:8], "big")
    assert token_hash("550E8400-E29B-41D4-A716-446655440000") == token_hash("550e8400-e29b-41d4-a716-446655440000")


def test_tokens_per_value_are_capped_first_in_document_order():
    value = [f"pg_{1000 + i}" for i in range(10)]
    assert value_tokens(value, 3) == tuple(sorted(token_hash(f"pg_{1000 + i}") for i in range(3)))
    assert value_tokens(value, 0) == ()


_TOKEN_TEXTS = st.sampled_from(["pg_8812", "pg_8813", "ch_3MtwBw", "see pg_1001 and pg_1002", "word", "x", "", "utf-8", "4bf92f3577b34da6"])
_FLAT_OR_NOT = st.dictionaries(
    st.text(max_size=3),
    st.recursive(_TOKEN_TEXTS | st.integers() | st.none() | st.booleans(), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3), max_leaves=8),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(_FLAT_OR_NOT, st.integers(min_value=1, max_value=4))
def test_flat_object_tokens_are_those_of_the_walk(obj, limit):
    """An object read without the walk's stack (none of its values an array or object: tokens._flat_object_tokens)
    gives what the walk gives for it (wrapped in a list, which holds no string of its own), cap and order included."""
    assert value_tokens(obj, limit) == value_tokens([obj], limit)


# -- links ------------------------------------------------------------------------------------------


def test_seed_pager_trace_links_step_8_to_step_7_through_the_page_id():
    plan = record(SEED_PAGER)
    assert plan.replay_class is ReplayClass.INJECTED
    assert rows(plan)[6:] == [
        ("c7", SKIP, ("write_committed", "result_consumed_by"), ("c8",)),
        ("c8", SKIP, ("write_committed", "consumes_result_of"), ("c7",)),
    ]
    assert [r[1:3] for r in rows(plan)[:6]] == [(REPLAY, ("declared_read",))] * 6


def test_links_are_made_from_hashes_only():
    """No raw value is kept (store_raw_values off): the steps hold token hashes, and the plan's
    JSON holds neither the token nor its hashes, only the link."""
    plan = record(SEED_PAGER)
    step7, step8 = (d.step for d in plan.steps[6:])
    assert step7.result_value is None and step8.arguments_json is None
    assert step7.result_tokens == (token_hash("pg_8812"),)
    assert step8.argument_tokens == (token_hash("pg_8812"),)
    text = plan_to_json(plan)
    assert "pg_8812" not in text and str(token_hash("pg_8812")) not in text
    assert json.loads(text)["steps"][7]["reasons"] == ["write_committed", "consumes_result_of"]


def test_the_replay_divergence_of_the_seed_regenerated_id_links_nothing():
    """pg_9147 (a regenerated page id) is not what step 7 returned: no link."""
    calls = [list(c) for c in SEED_PAGER]
    calls[7][2] = {"page": "pg_9147", "note": "p99 above 900ms"}
    plan = record(calls)
    assert rows(plan)[6:] == [
        ("c7", SKIP, ("write_committed",), ()),
        ("c8", SKIP, ("write_committed",), ()),
    ]


def test_an_echoed_token_is_not_data_flow():
    """A token the agent had before (in earlier arguments) was not returned by a later result."""
    plan = record([
        ("ticket.get", "read", {"ticket": "TCK-1234"}, {"ticket": "TCK-1234", "state": "open"}),
        ("ticket.update", "write", {"ticket": "TCK-1234", "state": "closed"}, {"ok": True}),
    ])
    assert rows(plan) == [
        ("c1", REPLAY, ("declared_read",), ()),
        ("c2", SKIP, ("write_committed",), ()),
    ]


def test_a_token_is_linked_to_the_result_it_first_appeared_in():
    plan = record([
        ("pager.trigger", "write", {"service": "db"}, {"id": "pg_8812"}),
        ("pager.get", "read", {"service": "db"}, {"pages": ["pg_8812"]}),
        ("pager.annotate", "write", {"page": "pg_8812"}, {"ok": True}),
        ("pager.resolve", "write", {"page": "pg_8812"}, {"ok": True}),
    ])
    assert rows(plan) == [
        ("c1", SKIP, ("write_committed", "result_consumed_by"), ("c3", "c4")),
        ("c2", REPLAY, ("declared_read",), ()),
        ("c3", SKIP, ("write_committed", "consumes_result_of"), ("c1",)),
        ("c4", SKIP, ("write_committed", "consumes_result_of"), ("c1",)),
    ]


def test_an_unrecorded_result_a_later_step_may_have_used_is_said_and_makes_the_trace_static():
    """The shared case pager_static: step 7's result was not recorded, step 8 uses an id nothing
    recorded explains. The trace is static because of step 7, and the plan says which step may
    have used its result."""
    calls = [list(c) for c in SEED_PAGER]
    calls[6][3] = None
    plan = record(calls)
    assert plan.replay_class is ReplayClass.STATIC
    assert rows(plan)[6:] == [
        ("c7", SKIP, ("write_committed", "result_not_recorded", "unrecorded_result_may_be_consumed"), ("c8",)),
        ("c8", SKIP, ("write_committed", "may_consume_unrecorded_result"), ("c7",)),
    ]


def test_links_never_change_a_decision_or_a_class():
    plan = record(SEED_PAGER)
    unlinked = record(SEED_PAGER, TraceFenceConfig(limits=Limits(max_tokens_per_value=0)))
    assert [d.decision for d in plan.steps] == [d.decision for d in unlinked.steps]
    assert plan.replay_class is unlinked.replay_class is ReplayClass.INJECTED
    assert rows(unlinked)[6:] == [("c7", SKIP, ("write_committed",), ()), ("c8", SKIP, ("write_committed",), ())]


def test_rows_link_the_same_way():
    text = "\n".join(
        json.dumps(r)
        for r in (
            {"trace_id": "t", "call_id": "c7", "tool": "pager.trigger", "effect": "write", "status": "ok", "arguments": {"service": "db"}, "result": {"status": "paged", "id": "pg_8812"}},
            {"trace_id": "t", "call_id": "c8", "tool": "pager.annotate", "effect": "write", "status": "ok", "arguments": {"page": "pg_8812"}, "result": "ok"},
        )
    )
    read = read_rows(text, "ndjson", TraceFenceConfig())
    plan = plan_trace("t", read.steps["t"])
    assert rows(plan) == [
        ("c7", SKIP, ("write_committed", reasons.RESULT_CONSUMED_BY), ("c8",)),
        ("c8", SKIP, ("write_committed", reasons.CONSUMES_RESULT_OF), ("c7",)),
    ]


def test_links_are_capped_with_the_related_ids():
    calls = [("pager.trigger", "write", {"service": "db"}, {"id": "pg_8812"})]
    calls += [("pager.annotate", "write", {"page": "pg_8812", "n": i}, {"ok": True}) for i in range(5)]
    plan = record(calls, TraceFenceConfig(limits=Limits(max_related_call_ids=2)))
    first = plan.steps[0]
    assert first.reasons == ("write_committed", "result_consumed_by", "related_call_ids_truncated")
    assert first.related_call_ids == ("c2", "c3")


# -- properties -------------------------------------------------------------------------------------

_POOL = [token_hash(f"pg_{1000 + i}") for i in range(6)]
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(list(Effect)),
        st.sampled_from(list(ToolStatus)),
        st.booleans(),  # result recorded
        st.booleans(),  # result stable
        st.frozensets(st.sampled_from(_POOL), max_size=3),
        st.frozensets(st.sampled_from(_POOL), max_size=3),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(_STEPS)
def test_links_explain_and_never_decide(specs):
    steps = [
        ToolStep(trace_id="t", call_id=f"c{i}", tool=f"tool{i % 3}", effect=effect, status=status, result_recorded=recorded,
                 result_sha256="ab" * 32 if recorded else None, result_stable=stable, start_time_unix_nano=i + 1,
                 argument_tokens=tuple(sorted(arguments)), result_tokens=tuple(sorted(result)) if recorded else ())
        for i, (effect, status, recorded, stable, arguments, result) in enumerate(specs)
    ]
    plan = plan_trace("t", steps)
    bare = plan_trace("t", [replace(s, argument_tokens=(), result_tokens=()) for s in steps])
    assert [d.decision for d in plan.steps] == [d.decision for d in bare.steps]
    assert plan.replay_class is bare.replay_class
    flow_notes = {reasons.CONSUMES_RESULT_OF, reasons.RESULT_CONSUMED_BY, reasons.MAY_CONSUME_UNRECORDED_RESULT, reasons.UNRECORDED_RESULT_MAY_BE_CONSUMED}
    assert not any(flow_notes & set(d.reasons) for d in bare.steps)
    position = {d.step.call_id: i for i, d in enumerate(plan.steps)}
    for i, d in enumerate(plan.steps):
        others = set(d.related_call_ids) - set(bare.steps[i].related_call_ids)
        if reasons.CONSUMES_RESULT_OF in d.reasons or reasons.MAY_CONSUME_UNRECORDED_RESULT in d.reasons:
            assert any(position[o] < i for o in d.related_call_ids)
        if reasons.RESULT_CONSUMED_BY in d.reasons:
            assert d.step.result_recorded and any(position[o] > i for o in d.related_call_ids)
        if reasons.UNRECORDED_RESULT_MAY_BE_CONSUMED in d.reasons:
            assert not d.step.result_recorded and any(position[o] > i for o in d.related_call_ids)
        if not flow_notes & set(d.reasons):
            assert not others


_token_like = st.sampled_from(["pg_8812", "TCK-1234", "3MtwBwLkdIwHu7ix", "123e4567-e89b-12d3-a456-426614174000", "utf-8", "ok", "p99"])
_results = st.recursive(
    st.none() | st.booleans() | st.integers() | _token_like | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_token_like | st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_results, st.sampled_from(["", " ", "\n"]), st.integers(min_value=0, max_value=6), st.sampled_from([1, 2, 64]))
def test_result_tokens_from_the_parsed_result_are_the_text_tokens(value, before, cut, limit):
    """A result recorded as JSON text is parsed once (for its error shape) and its tokens are read from that
    parse (values.result_tokens): the same hashes as text_tokens of its text, cut-off and padded text included."""
    from otel_tracefence.normalize.values import result_from_value, result_tokens

    text = before + json.dumps(value)
    text = text[: len(text) - cut] if cut < len(text) else text
    result = result_from_value(text, Limits())
    assert result_tokens(result, limit) == text_tokens(text, limit)
