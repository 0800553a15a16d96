"""The planner (DESIGN.md, "Decisions" and "Replay class"), on ToolStep values built directly.

One test per row of the decision table and per replay class, then the cross-cutting
promises: key order never matters, keys are scoped by tool, uncomparable keys are held,
repeated reads are linked, the input order never changes the plan, no input schedules
a write, and related call ids are capped.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_tracefence.core import reasons
from otel_tracefence.core.config import Limits
from otel_tracefence.core.model import Decision, Effect, MalformedField, ReplayClass, ToolStatus, ToolStep
from otel_tracefence.normalize.values import arguments_from_value
from otel_tracefence.planner import plan_trace

LIMITS = Limits()
TRACE = "0af7651916cd43dd8448eb211c80319c"

READ, WRITE, UNKNOWN = Effect.READ, Effect.WRITE, Effect.UNKNOWN
OK, ERROR, TIMEOUT, STATUS_UNKNOWN = ToolStatus.OK, ToolStatus.ERROR, ToolStatus.TIMEOUT, ToolStatus.UNKNOWN
REPLAY, SKIP, REVIEW, CONFLICT = Decision.REPLAY, Decision.SKIP, Decision.REVIEW, Decision.CONFLICT


def step(
    call_id: str,
    tool: str = "invoice.create",
    effect: Effect = WRITE,
    status: ToolStatus = OK,
    *,
    arguments=None,
    key: str | None = None,
    result: bool = True,
    at: int | None = None,
    **fields,
) -> ToolStep:
    """A step as a row or span would give it; ``arguments`` is a JSON value or JSON text (canonicalized)."""
    if arguments is not None:
        canonical = arguments_from_value(arguments, LIMITS)
        assert canonical.sha256 is not None, canonical
        fields.update(arguments_json=canonical.json, arguments_sha256=canonical.sha256, arguments_unavailable=None)
    return ToolStep(
        trace_id=TRACE,
        call_id=call_id,
        tool=tool,
        effect=effect,
        status=status,
        idempotency_key=key,
        result_recorded=result,
        result_sha256="ab" * 32 if result else None,
        start_time_unix_nano=int(call_id.strip("abcdefghijklmnopqrstuvwxyz-_") or 0) if at is None else at,
        **fields,
    )


def decided(*steps: ToolStep, limits: Limits = LIMITS):
    plan = plan_trace(TRACE, steps, limits=limits)
    return plan, {d.step.call_id: d for d in plan.steps}


def only(*steps: ToolStep):
    plan, by_id = decided(*steps)
    assert len(plan.steps) == 1
    return plan, plan.steps[0]


# --- one test per row of the decision table, in its order ---------------------------------


def test_malformed_step_is_review_with_malformed_field_reason():
    bad = step("c1", effect=UNKNOWN, arguments={"n": 1}, malformed=(MalformedField("effect", "effect 'delete' is not one of read, write, unknown"),))
    plan, d = only(bad)
    assert d.decision is REVIEW
    assert d.reasons == ("malformed_effect", "effect_unknown")
    assert d.related_call_ids == ()
    assert plan.replay_class is ReplayClass.REVIEW


def test_malformed_wins_even_over_a_committed_write_and_lists_every_field():
    bad = step(
        "c1",
        arguments={"n": 1},
        malformed=(MalformedField("status", "status 'done' ..."), MalformedField("idempotency_key", "not a string")),
    )
    _, d = only(bad)
    assert d.decision is REVIEW
    assert d.reasons == ("malformed_status", "malformed_idempotency_key")


def test_idempotency_key_conflict_fences_every_call_and_names_the_others():
    a = step("c1", "ticket.update", arguments={"ticket": 7, "state": "closed"}, key="tk-1")
    b = step("c2", "ticket.update", arguments={"ticket": 7, "state": "reopened"}, key="tk-1")
    c = step("c3", "ticket.update", arguments={"ticket": 7, "state": "merged"}, key="tk-1")
    plan, by_id = decided(a, b, c)
    assert {cid: d.decision for cid, d in by_id.items()} == {"c1": CONFLICT, "c2": CONFLICT, "c3": CONFLICT}
    assert by_id["c1"].reasons == ("idempotency_key_conflict",)
    assert by_id["c1"].related_call_ids == ("c2", "c3")
    assert by_id["c2"].related_call_ids == ("c1", "c3")
    assert by_id["c3"].related_call_ids == ("c1", "c2")
    assert plan.replay_class is ReplayClass.REVIEW


def test_key_conflict_applies_to_reads_too():
    a = step("c1", "kv.get", READ, arguments={"k": "a"}, key="k-1")
    b = step("c2", "kv.get", READ, arguments={"k": "b"}, key="k-1")
    _, by_id = decided(a, b)
    assert [by_id[c].decision for c in ("c1", "c2")] == [CONFLICT, CONFLICT]
    assert by_id["c2"].reasons == ("idempotency_key_conflict",)
    assert by_id["c2"].related_call_ids == ("c1",)


def test_same_call_id_executed_twice_is_conflict_on_every_execution():
    first = step("c1", "email.send", arguments={"to": "a@example.invalid"}, span_id="1111111111111111", at=1)
    second = step("c1", "email.send", arguments={"to": "a@example.invalid"}, span_id="2222222222222222", at=2)
    plan, _ = decided(first, second)
    assert [(d.step.span_id, d.decision, d.reasons, d.related_call_ids) for d in plan.steps] == [
        ("1111111111111111", CONFLICT, ("call_id_executed_more_than_once", "repeated_later"), ("c1",)),
        ("2222222222222222", CONFLICT, ("call_id_executed_more_than_once", "repeats_earlier_write"), ("c1",)),
    ]
    assert plan.replay_class is ReplayClass.REVIEW


def test_same_call_id_executed_twice_with_unknown_effect_is_conflict():
    first = step("c1", "mystery", UNKNOWN, span_id="1111111111111111", at=1)
    second = step("c1", "mystery", UNKNOWN, span_id="2222222222222222", at=2)
    plan, _ = decided(first, second)
    assert [(d.decision, d.reasons) for d in plan.steps] == [
        (CONFLICT, ("call_id_executed_more_than_once", "effect_unknown", "arguments_not_recorded")),
    ] * 2


def test_same_call_id_executed_twice_as_a_declared_read_is_not_fenced():
    first = step("c1", "kv.get", READ, arguments={"k": "a"}, span_id="1111111111111111", at=1)
    second = step("c1", "kv.get", READ, arguments={"k": "a"}, span_id="2222222222222222", at=2)
    plan, _ = decided(first, second)
    assert [(d.decision, d.reasons) for d in plan.steps] == [
        (REPLAY, ("declared_read", "repeated_later")),
        (REPLAY, ("declared_read", "repeated_read")),
    ]
    assert plan.replay_class is ReplayClass.DYNAMIC


def test_call_ids_that_are_span_ids_or_requests_are_never_counted_as_executions():
    # Two spans without a tool-call id each get their span id, which cannot repeat;
    # a requested-only step shares the call id of the step that records it only by accident.
    a = step("c1", "email.send", arguments={"to": "a"}, span_id="1111111111111111", call_id_from_span=True, at=1)
    b = step("c1", "email.send", arguments={"to": "b"}, requested_only=True, status=STATUS_UNKNOWN, result=False, at=2)
    plan, _ = decided(a, b)
    assert [(d.decision, d.reasons) for d in plan.steps] == [
        (SKIP, ("write_committed",)),
        (REVIEW, ("write_status_unknown", "requested_not_recorded")),
    ]


def test_effect_unknown_is_review():
    plan, d = only(step("c1", "mystery.tool", UNKNOWN, arguments={"q": 1}))
    assert d.decision is REVIEW
    assert d.reasons == ("effect_unknown",)
    assert plan.replay_class is ReplayClass.REVIEW


@pytest.mark.parametrize(
    "status,reason",
    [(TIMEOUT, "write_timeout"), (STATUS_UNKNOWN, "write_status_unknown"), (ERROR, "write_error")],
)
@pytest.mark.parametrize("key", [None, "invoice-17"])
def test_uncertain_write_is_review_even_with_an_idempotency_key(status, reason, key):
    plan, d = only(step("call-17", arguments={"invoice": "demo-17"}, status=status, key=key, result=False))
    assert d.decision is REVIEW
    assert d.reasons == (reason,)
    assert d.step.idempotency_key == key
    assert plan.replay_class is ReplayClass.REVIEW


def test_write_dispatched_more_than_once_is_review():
    plan, d = only(step("c1", arguments={"amount": 5}, attempts=2))
    assert d.decision is REVIEW
    assert d.reasons == ("write_dispatched_more_than_once",)
    assert plan.replay_class is ReplayClass.REVIEW


def test_read_dispatched_more_than_once_still_replays():
    _, d = only(step("c1", "kv.get", READ, arguments={"k": 1}, attempts=3))
    assert (d.decision, d.reasons) == (REPLAY, ("declared_read",))


def test_write_repeating_an_earlier_write_is_review_and_the_earlier_is_linked():
    earlier = step("c1", "pager.trigger", arguments={"service": "db", "severity": "high"})
    later = step("c2", "pager.trigger", arguments={"severity": "high", "service": "db"})
    plan, by_id = decided(earlier, later)
    assert (by_id["c1"].decision, by_id["c1"].reasons, by_id["c1"].related_call_ids) == (SKIP, ("write_committed", "repeated_later"), ("c2",))
    assert (by_id["c2"].decision, by_id["c2"].reasons, by_id["c2"].related_call_ids) == (REVIEW, ("repeats_earlier_write",), ("c1",))
    assert plan.replay_class is ReplayClass.REVIEW


def test_third_repeat_names_every_earlier_write():
    a, b, c = (step(f"c{i}", "pager.trigger", arguments={"service": "db"}) for i in (1, 2, 3))
    _, by_id = decided(a, b, c)
    assert by_id["c1"].related_call_ids == ("c2", "c3")
    assert by_id["c2"].reasons == ("repeats_earlier_write", "repeated_later")
    assert by_id["c2"].related_call_ids == ("c1", "c3")
    assert by_id["c3"].related_call_ids == ("c1", "c2")


def test_same_tool_key_and_arguments_repeated_is_repeats_earlier_write_not_conflict():
    # The seed's charge retry: same key, same arguments; the first timed out.
    first = step("call_1", "payments.charge", arguments={"amount": 1250, "card": "c-1"}, key="ch-1", status=TIMEOUT, result=False)
    retry = step("call_2", "payments.charge", arguments={"card": "c-1", "amount": 1250}, key="ch-1")
    _, by_id = decided(first, retry)
    assert (by_id["call_1"].decision, by_id["call_1"].reasons) == (REVIEW, ("write_timeout", "repeated_later"))
    assert (by_id["call_2"].decision, by_id["call_2"].reasons, by_id["call_2"].related_call_ids) == (
        REVIEW,
        ("repeats_earlier_write",),
        ("call_1",),
    )


def test_writes_with_the_same_arguments_on_different_tools_do_not_repeat():
    _, by_id = decided(step("c1", "a.create", arguments={"x": 1}), step("c2", "b.create", arguments={"x": 1}))
    assert [by_id[c].decision for c in ("c1", "c2")] == [SKIP, SKIP]


def test_write_ok_is_skip_write_committed():
    plan, d = only(step("c1", arguments={"amount": 5}))
    assert (d.decision, d.reasons, d.related_call_ids) == (SKIP, ("write_committed",), ())
    assert plan.replay_class is ReplayClass.INJECTED


@pytest.mark.parametrize("status", [OK, ERROR, TIMEOUT, STATUS_UNKNOWN])
def test_declared_read_replays_whatever_its_status(status):
    plan, d = only(step("c1", "query_metrics", READ, status, arguments={"metric": "p99"}, result=False))
    assert (d.decision, d.reasons, d.related_call_ids) == (REPLAY, ("declared_read",), ())
    assert plan.replay_class is ReplayClass.DYNAMIC


# --- replay classes ---------------------------------------------------------------------------


def test_class_dynamic_when_every_step_is_a_declared_read():
    plan, _ = decided(step("c1", "read_file", READ, arguments={"p": "a"}), step("c2", "get_config", READ, TIMEOUT, arguments={"k": "b"}))
    assert plan.replay_class is ReplayClass.DYNAMIC


def test_class_injected_when_every_write_committed_with_its_result_recorded():
    plan, _ = decided(step("c1", "read_file", READ, arguments={"p": "a"}), step("c2", "pager.annotate", arguments={"page": "pg_1"}))
    assert plan.replay_class is ReplayClass.INJECTED


def test_class_static_when_a_committed_write_result_was_not_recorded():
    plan, by_id = decided(
        step("c1", "read_file", READ, arguments={"p": "a"}),
        step("c3", "pager.trigger", arguments={"service": "db"}, result=False),
        step("c4", "pager.annotate", arguments={"page": "pg_1"}),
    )
    assert plan.replay_class is ReplayClass.STATIC
    assert by_id["c3"].reasons == ("write_committed", "result_not_recorded")
    assert by_id["c4"].reasons == ("write_committed",)


def test_class_review_is_the_most_restrictive():
    plan, _ = decided(
        step("c1", "read_file", READ, arguments={"p": "a"}),
        step("c2", "pager.trigger", arguments={"service": "db"}, result=False),
        step("c3", "mystery", UNKNOWN, arguments={}),
    )
    assert plan.replay_class is ReplayClass.REVIEW


def test_class_none_for_a_trace_with_no_tool_step():
    plan = plan_trace(TRACE, [], limits=LIMITS)
    assert plan.replay_class is None
    assert plan.steps == ()
    assert plan.trace_id == TRACE
    assert plan.schema_version == "1"


# --- arguments, keys and links -------------------------------------------------------------------


def test_key_order_and_white_space_in_arguments_are_ignored():
    a = step("c1", "ticket.update", arguments='{"ticket": 7, "state": "closed", "tags": {"b": 1, "a": 2}}', key="tk-1")
    b = step("c2", "ticket.update", arguments='{"tags":{"a":2,"b":1},"state":"closed","ticket":7}', key="tk-1")
    assert a.arguments_sha256 == b.arguments_sha256
    _, by_id = decided(a, b)
    # Not a conflict: the same write repeated (a possible second effect), linked both ways.
    assert (by_id["c1"].decision, by_id["c1"].reasons) == (SKIP, ("write_committed", "repeated_later"))
    assert (by_id["c2"].decision, by_id["c2"].reasons, by_id["c2"].related_call_ids) == (REVIEW, ("repeats_earlier_write",), ("c1",))


def test_idempotency_keys_are_scoped_by_tool():
    a = step("a1", "ticket.update", arguments={"ticket": 7}, key="tk-1")
    b = step("a3", "email.send", arguments={"to": "ops@example.invalid"}, key="tk-1")
    plan, by_id = decided(a, b)
    assert [(by_id[c].decision, by_id[c].reasons) for c in ("a1", "a3")] == [(SKIP, ("write_committed",))] * 2
    assert plan.replay_class is ReplayClass.INJECTED


@pytest.mark.parametrize("effect,status", [(WRITE, OK), (READ, OK)])
def test_same_tool_and_key_with_arguments_unavailable_is_review_and_linked(effect, status):
    a = step("c1", "ticket.update", effect, status, arguments={"ticket": 7}, key="tk-1")
    b = step("c2", "ticket.update", effect, status, key="tk-1")  # arguments not recorded
    c = step("c3", "ticket.update", effect, status, key="tk-1", arguments_unavailable="arguments_too_large")
    plan, by_id = decided(a, b, c)
    assert {cid: d.decision for cid, d in by_id.items()} == {"c1": REVIEW, "c2": REVIEW, "c3": REVIEW}
    assert by_id["c1"].reasons == ("idempotency_key_reused_arguments_unavailable",)
    assert by_id["c2"].reasons == ("idempotency_key_reused_arguments_unavailable", "arguments_not_recorded")
    assert by_id["c3"].reasons == ("idempotency_key_reused_arguments_unavailable", "arguments_too_large")
    assert by_id["c1"].related_call_ids == ("c2", "c3")
    assert by_id["c2"].related_call_ids == ("c1", "c3")
    assert by_id["c3"].related_call_ids == ("c1", "c2")
    assert plan.replay_class is ReplayClass.REVIEW


def test_same_tool_and_key_with_no_arguments_at_all_is_never_assumed_equal():
    _, by_id = decided(step("c1", "ticket.update", key="tk-1"), step("c2", "ticket.update", key="tk-1"))
    assert [(by_id[c].decision, by_id[c].reasons[0], by_id[c].related_call_ids) for c in ("c1", "c2")] == [
        (REVIEW, "idempotency_key_reused_arguments_unavailable", ("c2",)),
        (REVIEW, "idempotency_key_reused_arguments_unavailable", ("c1",)),
    ]


def test_writes_without_arguments_are_never_taken_for_repeats():
    _, by_id = decided(step("c1", "pager.trigger"), step("c2", "pager.trigger"))
    assert [(by_id[c].decision, by_id[c].reasons) for c in ("c1", "c2")] == [(SKIP, ("write_committed", "arguments_not_recorded"))] * 2


def test_repeated_reads_are_linked_not_fenced():
    reads = [step(f"r{i}", "read_file", READ, arguments={"path": "a.txt"}) for i in (1, 2, 3)]
    plan, by_id = decided(*reads)
    assert [(by_id[c].decision, by_id[c].reasons, by_id[c].related_call_ids) for c in ("r1", "r2", "r3")] == [
        (REPLAY, ("declared_read", "repeated_later"), ("r2", "r3")),
        (REPLAY, ("declared_read", "repeated_later", "repeated_read"), ("r3", "r1")),
        (REPLAY, ("declared_read", "repeated_read"), ("r1", "r2")),
    ]
    assert plan.replay_class is ReplayClass.DYNAMIC


def test_requested_only_step_says_so():
    _, d = only(step("call_9", "read_file", READ, STATUS_UNKNOWN, arguments={"p": "a"}, result=False, requested_only=True))
    assert (d.decision, d.reasons) == (REPLAY, ("declared_read", "requested_not_recorded"))


# --- order, safety and bounds ---------------------------------------------------------------------------


def _mixed_trace() -> list[ToolStep]:
    return [
        step("c1", "read_file", READ, arguments={"p": "a"}),
        step("c2", "read_file", READ, arguments={"p": "a"}),
        step("c3", "ticket.update", arguments={"t": 1, "s": "closed"}, key="tk-1"),
        step("c4", "ticket.update", arguments={"t": 1, "s": "open"}, key="tk-1"),
        step("c5", "pager.trigger", arguments={"service": "db"}, result=False),
        step("c6", "pager.trigger", arguments={"service": "db"}),
        step("c7", "invoice.create", arguments={"i": 1}, status=TIMEOUT, key="inv-1"),
        step("c8", "invoice.create", key="inv-1"),
        step("c9", "mystery", UNKNOWN),
        step("c10", "email.send", arguments={"to": "x"}, span_id="1111111111111111", at=10),
        step("c10", "email.send", arguments={"to": "x"}, span_id="2222222222222222", at=10),
        step("c11", "charge", arguments={"a": 1}, attempts=2),
        step("c12", "charge", status=ERROR, malformed=(MalformedField("status", "bad"),)),
        # Same start time: the source position, then the ids, order them.
        step("c13", "read_file", READ, arguments={"p": "b"}, at=13, sequence=2),
        step("c14", "read_file", READ, arguments={"p": "b"}, at=13, sequence=1),
    ]


@pytest.mark.parametrize("seed", range(8))
def test_shuffled_input_gives_an_identical_plan(seed):
    steps = _mixed_trace()
    expected = plan_trace(TRACE, steps, limits=LIMITS)
    shuffled = list(steps)
    random.Random(seed).shuffle(shuffled)
    assert plan_trace(TRACE, shuffled, limits=LIMITS) == expected


def test_mixed_trace_plan():
    plan, _ = decided(*_mixed_trace())
    got = [(d.step.call_id, d.decision.value, d.reasons, d.related_call_ids) for d in plan.steps]
    assert got == [
        ("c1", "replay", ("declared_read", "repeated_later"), ("c2",)),
        ("c2", "replay", ("declared_read", "repeated_read"), ("c1",)),
        ("c3", "conflict", ("idempotency_key_conflict",), ("c4",)),
        ("c4", "conflict", ("idempotency_key_conflict",), ("c3",)),
        ("c5", "skip", ("write_committed", "repeated_later", "result_not_recorded"), ("c6",)),
        ("c6", "review", ("repeats_earlier_write",), ("c5",)),
        ("c7", "review", ("idempotency_key_reused_arguments_unavailable", "write_timeout"), ("c8",)),
        ("c8", "review", ("idempotency_key_reused_arguments_unavailable", "arguments_not_recorded"), ("c7",)),
        ("c9", "review", ("effect_unknown", "arguments_not_recorded"), ()),
        ("c10", "conflict", ("call_id_executed_more_than_once", "repeated_later"), ("c10",)),
        ("c10", "conflict", ("call_id_executed_more_than_once", "repeats_earlier_write"), ("c10",)),
        ("c11", "review", ("write_dispatched_more_than_once",), ()),
        ("c12", "review", ("malformed_status", "write_error", "arguments_not_recorded"), ()),
        ("c14", "replay", ("declared_read", "repeated_later"), ("c13",)),
        ("c13", "replay", ("declared_read", "repeated_read"), ("c14",)),
    ]
    assert plan.replay_class is ReplayClass.REVIEW


def test_steps_equal_in_time_position_and_ids_are_still_ordered_the_same_whatever_the_input_order():
    # Built directly, steps need not carry a span id or a distinct position.
    a = step("c1", "email.send", arguments={"to": "a"}, at=5)
    b = step("c1", "email.send", arguments={"to": "b"}, at=5)
    first = plan_trace(TRACE, [a, b], limits=LIMITS)
    assert plan_trace(TRACE, [b, a], limits=LIMITS) == first
    assert [d.decision for d in first.steps] == [CONFLICT, CONFLICT]


def test_no_decision_value_schedules_a_write():
    assert {d.value for d in Decision} == {"replay", "skip", "review", "conflict"}


_STEPS = st.builds(
    lambda i, tool, effect, status, args, key, result, attempts, dup, malformed, requested: step(
        f"c{i % 7}" if dup else f"c{i}",
        tool,
        effect,
        status,
        arguments=args,
        key=key,
        result=result,
        attempts=attempts,
        at=i % 4,
        span_id=f"{i:016x}",
        malformed=(MalformedField("effect", "bad"),) if malformed else (),
        requested_only=requested,
    ),
    st.integers(0, 40),
    st.sampled_from(["pay", "mail", "read_file"]),
    st.sampled_from(list(Effect)),
    st.sampled_from(list(ToolStatus)),
    st.one_of(st.none(), st.fixed_dictionaries({"n": st.integers(0, 2)})),
    st.sampled_from([None, "k1", "k2"]),
    st.booleans(),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_STEPS, max_size=12), st.randoms(use_true_random=False))
def test_no_input_schedules_a_write_and_order_never_matters(steps, rnd):
    plan = plan_trace(TRACE, steps, limits=LIMITS)
    assert len(plan.steps) == len(steps)
    for d in plan.steps:
        assert d.decision in (REPLAY, SKIP, REVIEW, CONFLICT)
        assert d.reasons, d
        if d.step.effect is not READ:
            assert d.decision is not REPLAY
        if d.step.effect is WRITE and d.step.status is not OK:
            assert d.decision in (REVIEW, CONFLICT)
        if d.step.effect is WRITE and d.step.attempts > 1:
            assert d.decision in (REVIEW, CONFLICT)
        if d.step.malformed:
            assert d.decision is REVIEW
        if d.decision is SKIP:
            assert (d.step.effect, d.step.status) == (WRITE, OK)
            assert d.reasons[0] == reasons.WRITE_COMMITTED
    fenced = any(d.decision in (REVIEW, CONFLICT) for d in plan.steps)
    assert (plan.replay_class is ReplayClass.REVIEW) == fenced
    shuffled = list(steps)
    rnd.shuffle(shuffled)
    assert plan_trace(TRACE, shuffled, limits=LIMITS) == plan


# --- related call ids are capped ----------------------------------------------------------------


def test_related_call_ids_are_capped_and_say_so():
    limits = Limits(max_related_call_ids=3)
    group = [step(f"c{i}", "ticket.update", arguments={"n": i}, key="tk-1") for i in range(1, 7)]
    plan, by_id = decided(*group, limits=limits)
    assert by_id["c1"].decision is CONFLICT
    assert by_id["c1"].reasons == ("idempotency_key_conflict", "related_call_ids_truncated")
    assert by_id["c1"].related_call_ids == ("c2", "c3", "c4")
    assert by_id["c6"].related_call_ids == ("c1", "c2", "c3")
    assert all(len(d.related_call_ids) == 3 for d in plan.steps)


def test_related_call_ids_exactly_at_the_cap_are_not_truncated():
    limits = Limits(max_related_call_ids=3)
    group = [step(f"c{i}", "ticket.update", arguments={"n": i}, key="tk-1") for i in range(1, 5)]
    _, by_id = decided(*group, limits=limits)
    assert by_id["c1"].reasons == ("idempotency_key_conflict",)
    assert by_id["c1"].related_call_ids == ("c2", "c3", "c4")
    assert by_id["c4"].related_call_ids == ("c1", "c2", "c3")


def test_repeated_reads_beyond_the_cap_are_truncated():
    limits = Limits(max_related_call_ids=2)
    reads = [step(f"r{i}", "read_file", READ, arguments={"path": "a"}) for i in range(1, 6)]
    _, by_id = decided(*reads, limits=limits)
    assert (by_id["r5"].decision, by_id["r5"].reasons, by_id["r5"].related_call_ids) == (
        REPLAY,
        ("declared_read", "repeated_read", "related_call_ids_truncated"),
        ("r1", "r2"),
    )
    assert by_id["r1"].related_call_ids == ("r2", "r3")


def test_the_same_step_object_given_twice_is_planned_as_two_equal_steps():
    a = step("c1", "pager.trigger", arguments={"service": "db"})
    copy = step("c1", "pager.trigger", arguments={"service": "db"})
    plan = plan_trace(TRACE, [a, copy, a], limits=LIMITS)
    assert plan == plan_trace(TRACE, [a, step("c1", "pager.trigger", arguments={"service": "db"}), copy], limits=LIMITS)
    assert [(d.decision, d.reasons, d.related_call_ids) for d in plan.steps] == [
        (CONFLICT, ("call_id_executed_more_than_once", "repeated_later"), ("c1",)),
        (CONFLICT, ("call_id_executed_more_than_once", "repeats_earlier_write", "repeated_later"), ("c1",)),
        (CONFLICT, ("call_id_executed_more_than_once", "repeats_earlier_write"), ("c1",)),
    ]


def test_groups_hold_only_what_more_than_one_step_shares():
    from otel_tracefence.planner.groups import TraceGroups

    w1 = step("c1", "invoice.create", arguments={"n": 1}, key="k1")
    w2 = step("c2", "invoice.create", arguments={"n": 2}, key="k1")
    w3 = step("c3", "invoice.create", arguments={"n": 1}, key="k2")
    r1 = step("c3", "read_file", READ, arguments={"path": "a"})
    r2 = step("r2", "read_file", READ, arguments={"path": "a"})
    r3 = step("r3", "read_file", READ, arguments={"path": "b"})
    groups = TraceGroups.build([w1, w2, w3, r1, r2, r3], 7)
    assert groups.by_key == {("invoice.create", "k1"): [w1, w2]}
    assert groups.by_call_id == {"c3": [w3, r1]}
    assert groups.repeats == {id(w1): ([w1, w3], 0), id(w3): ([w1, w3], 1), id(r1): ([r1, r2], 0), id(r2): ([r1, r2], 1)}
    assert groups.repeats[id(w1)][0] is groups.repeats[id(w3)][0]
    assert (groups.conflicting_keys, groups.uncomparable_keys, groups.max_related, groups.flow) == ({("invoice.create", "k1")}, set(), 7, None)


def test_a_step_of_unknown_effect_is_seen_against_the_reads_with_its_arguments():
    # Unknown effect: in no group of its own, but linked to the later of the reads with its tool and arguments
    # (position 0 among them), as the planner has always done.
    reads = [step(f"r{i}", "read_file", READ, arguments={"path": "a"}) for i in (1, 2)]
    unknown = step("u1", "read_file", UNKNOWN, arguments={"path": "a"})
    alone = step("u2", "read_file", UNKNOWN, arguments={"path": "b"})
    _, by_id = decided(*reads, unknown, alone)
    assert (by_id["u1"].decision, by_id["u1"].reasons, by_id["u1"].related_call_ids) == (REVIEW, ("effect_unknown", "repeated_later"), ("r2",))
    assert (by_id["u2"].reasons, by_id["u2"].related_call_ids) == (("effect_unknown",), ())
    assert (by_id["r1"].reasons, by_id["r1"].related_call_ids) == (("declared_read", "repeated_later"), ("r2",))
    assert (by_id["r2"].reasons, by_id["r2"].related_call_ids) == (("declared_read", "repeated_read"), ("r1",))


_EFFECTS = st.sampled_from([READ, WRITE, UNKNOWN])
_STEP_FIELDS = st.fixed_dictionaries({
    "call_id": st.sampled_from(["c1", "c2", "c3"]),
    "tool": st.sampled_from(["invoice.create", "read_file"]),
    "effect": _EFFECTS,
    "status": st.sampled_from([OK, ERROR, TIMEOUT, STATUS_UNKNOWN]),
    "arguments": st.sampled_from([{"n": 1}, {"n": 2}]),
    "key": st.sampled_from([None, "k1"]),
    "result": st.booleans(),
    "attempts": st.integers(min_value=1, max_value=3),
    "requested_only": st.booleans(),
    "call_id_from_span": st.booleans(),
    "result_stable": st.booleans(),
})


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP_FIELDS, min_size=1, max_size=6))
def test_a_rule_finds_nothing_for_the_effects_it_is_not_declared_for(fields):
    """rules.only_for: the planner does not call a rule for a step of an effect the rule is declared to find nothing
    for; every declaration is checked here against the rule itself, in traces with repeats, shared keys and call ids."""
    from otel_tracefence.planner.groups import TraceGroups
    from otel_tracefence.planner.rules import _ONLY_FOR

    steps = [step(at=i, **f) for i, f in enumerate(fields)]
    groups = TraceGroups.build(steps, 7)
    assert len(_ONLY_FOR) == 12  # write_outcome_unrecorded (docs/DECISIONS.md 401), repeat_arguments_uncompared (501)
    for rule, effects in _ONLY_FOR.items():
        for s in steps:
            if s.effect not in effects:
                assert not rule(s, groups), (rule.__name__, s)


def test_the_rules_called_for_each_effect():
    from otel_tracefence.planner import _RULES, _rules_for

    names = lambda effect: [rule.__name__ for rule in _rules_for(step("c1", effect=effect))]  # noqa: E731
    assert names(READ) == ["malformed", "idempotency_key_conflict", "idempotency_key_reused_arguments_unavailable", "unstable_result", "declared_read",
                           "repeated_later", "repeated_read", "requested_not_recorded", "arguments_unavailable", "normalizer_notes", "data_flow"]
    assert names(WRITE) == ["malformed", "idempotency_key_conflict", "call_id_executed_more_than_once", "idempotency_key_reused_arguments_unavailable",
                            "write_outcome_uncertain", "write_dispatched_more_than_once", "repeats_earlier_write", "repeat_arguments_uncompared", "write_outcome_unrecorded", "write_committed", "repeated_later",
                            "result_not_recorded", "requested_not_recorded", "arguments_unavailable", "normalizer_notes", "data_flow"]
    assert names(UNKNOWN) == ["malformed", "idempotency_key_conflict", "call_id_executed_more_than_once", "idempotency_key_reused_arguments_unavailable",
                              "effect_unknown", "repeated_later", "requested_not_recorded", "arguments_unavailable", "normalizer_notes", "data_flow"]
    assert _rules_for(step("c1", effect="read")) is _RULES  # not the enum: every rule, as each tests the effect by identity
