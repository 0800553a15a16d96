"""Reconcilers' answers recorded as verdicts (issue 25 section 2), on a SQLite file and on the real PostgreSQL
server the suite starts: each verdict, the four failure modes, several held calls on one item, and what is not
written again."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import Decision, Effect, EffectSource, RelatedTrace, ReplayClass, StepDecision, ToolStatus, ToolStep, TracePlan
from otel_tracefence.reconcile import ReconcileRequest, ReconcileResult, RelatedCall, Verdict
from otel_tracefence.reconcile.registry import Reconciler
from otel_tracefence.reconcile.runner import ReconcileRunner, held_requests, open_items, reconcile_items
from otel_tracefence.review import open_review_store

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER = "5bf92f3577b34da6a3ce929d0e0e4737"
T0 = 1_700_000_000_000_000_000
ARGS_SHA = "95ea3adad0f5a1dfbc893c81031692d97e8bb570ea8f670dd856c002f6644db1"  # SHA-256 of {"amount_cents":1250}




def _step(trace_id: str, call_id: str, tool: str, key: str | None) -> ToolStep:
    return ToolStep(
        trace_id=trace_id, call_id=call_id, span_id="00f067aa0ba902b7", tool=tool, effect=Effect.WRITE, effect_source=EffectSource.DECLARED,
        status=ToolStatus.TIMEOUT, idempotency_key=key, arguments_json='{"amount_cents":1250}', arguments_sha256=ARGS_SHA, arguments_unavailable=None,
        start_time_unix_nano=T0,
    )  # fmt: skip


def held(trace_id: str = TRACE, *calls: tuple[str, str, str | None]) -> TracePlan:
    """A review-class plan whose steps (call id, tool, key) are all held for a timeout, beside one committed read."""
    calls = calls or (("call_1", "invoice.create", "inv-9"),)
    read = StepDecision(ToolStep(trace_id=trace_id, call_id="call_0", span_id="", tool="customer.lookup", effect=Effect.READ,
                                 effect_source=EffectSource.DECLARED, status=ToolStatus.OK, idempotency_key=None,
                                 arguments_json=None, arguments_sha256=None, arguments_unavailable="not recorded"),
                        Decision.REPLAY, ("declared_read",))  # fmt: skip
    steps = tuple(StepDecision(_step(trace_id, c, t, k), Decision.REVIEW, ("write_timeout",)) for c, t, k in calls)
    return TracePlan(trace_id, ReplayClass.REVIEW, (read, *steps))


def answering(verdict: Verdict, evidence: str = "checked"):
    return lambda request: ReconcileResult(verdict, f"{evidence} {request.idempotency_key}")


def runner(checks: dict, **kw) -> tuple[ReconcileRunner, list]:
    counted: list = []
    reconcilers = {tool: Reconciler(tool, f"checks:{getattr(check, '__name__', 'check')}", "config", check) for tool, check in checks.items()}
    return ReconcileRunner(reconcilers, count=lambda kind, attributes: counted.append((kind, attributes)), **kw), counted


def _store(target: str, *plans: TracePlan):
    store = open_review_store(target)
    for plan in plans or (held(),):
        store.upsert(plan, service_name="billing")
    return store


@pytest.mark.parametrize(
    "verdict, action, state, duplicate",
    [
        (Verdict.FOUND_ONCE, "resolved", pb.REVIEW_STATE_RESOLVED, False),
        (Verdict.ABSENT, "resolved", pb.REVIEW_STATE_RESOLVED, False),
        (Verdict.FOUND_TWICE, "kept_open", pb.REVIEW_STATE_OPEN, True),
        (Verdict.UNDETERMINED, "kept_open", pb.REVIEW_STATE_OPEN, False),
    ],
)
def test_each_verdict_is_recorded_with_its_evidence_and_the_reconciler_as_actor(target, verdict, action, state, duplicate):
    run, counted = runner({"invoice.create": answering(verdict, "billing says")})
    with _store(target) as store:
        [outcome] = reconcile_items(store, list(open_items(store)), run)
        item = store.get(TRACE)
        history = store.history(TRACE)
    assert (outcome.action, outcome.verdict, outcome.actor, outcome.evidence) == (action, verdict, "checks:<lambda>", "billing says inv-9")
    assert (item.state, item.duplicate_effect_found, item.verdict_by, item.verdict_evidence) == (state, duplicate, "checks:<lambda>", "billing says inv-9")
    assert (history[-1].kind, history[-1].actor, history[-1].verdict, history[-1].evidence) == (
        "resolved" if state == pb.REVIEW_STATE_RESOLVED else "verdict", "checks:<lambda>", verdict.value, "billing says inv-9",
    )  # fmt: skip
    assert counted == [("verdict", {"tracefence.reconciler": "checks:<lambda>", "tracefence.verdict": verdict.value})]


def test_the_request_carries_what_the_item_holds_of_the_call(tmp_path):
    plan = held(TRACE, ("call_1", "invoice.create", "inv-9"), ("call_2", "invoice.void", None))
    first = plan.steps[1]
    linked = StepDecision(first.step, Decision.CONFLICT, ("idempotency_key_reused_across_traces",), related_traces=(RelatedTrace(OTHER, "call_9", "idempotency_key_reused_across_traces"),))
    plan = TracePlan(TRACE, ReplayClass.REVIEW, (plan.steps[0], linked, plan.steps[2]))
    with open_review_store(tmp_path / "raw.db", store_raw_values=True) as raw, open_review_store(tmp_path / "hashes.db") as hashes:
        kept, stripped = raw.upsert(plan), hashes.upsert(plan)
    assert held_requests(kept) == [
        ReconcileRequest(TRACE, "call_1", "invoice.create", "inv-9", {"amount_cents": 1250}, ARGS_SHA, T0, ("idempotency_key_reused_across_traces",),
                         "conflict", (RelatedCall(OTHER, "call_9", "idempotency_key_reused_across_traces"),)),
        ReconcileRequest(TRACE, "call_2", "invoice.void", None, {"amount_cents": 1250}, ARGS_SHA, T0, ("write_timeout",), "review", ()),
    ]  # fmt: skip
    assert [(r.arguments, r.arguments_sha256) for r in held_requests(stripped)] == [(None, ARGS_SHA), (None, ARGS_SHA)]


def _hangs(request: ReconcileRequest) -> ReconcileResult:
    time.sleep(5)
    return ReconcileResult(Verdict.FOUND_ONCE, "too late")


def _raises(request: ReconcileRequest) -> ReconcileResult:
    raise ConnectionError("billing API unreachable")


@pytest.mark.parametrize(
    "check, kind, evidence",
    [
        (_raises, "raised", "checks:_raises raised ConnectionError: billing API unreachable"),
        (_hangs, "timeout", "checks:_hangs did not answer within 0.3 s"),
        (lambda request: "found it", "bad_return", "checks:<lambda> returned str 'found it', not a ReconcileResult(verdict, evidence)"),
        (lambda request: None, "bad_return", "checks:<lambda> returned NoneType None, not a ReconcileResult(verdict, evidence)"),
        (lambda request: ReconcileResult("maybe", "x"), "bad_return",  # type: ignore[arg-type]
         "checks:<lambda> returned a ReconcileResult whose verdict 'maybe' is not one of found_once, absent, found_twice, undetermined"),
        (lambda request: ReconcileResult(Verdict.ABSENT, None), "bad_return",  # type: ignore[arg-type]
         "checks:<lambda> returned a ReconcileResult whose evidence is a NoneType, not a str"),
    ],
)
def test_a_reconciler_that_fails_gives_undetermined_with_the_error_the_item_stays_open(target, check, kind, evidence, caplog):
    run, counted = runner({"invoice.create": check}, timeout_s=0.3)
    with _store(target, held(TRACE), held(OTHER)) as store, caplog.at_level(logging.DEBUG, logger="otel_tracefence.reconcile.runner"):
        outcomes = reconcile_items(store, list(open_items(store)), run)
        items = [store.get(t) for t in (TRACE, OTHER)]
    assert [(o.action, o.verdict, o.evidence) for o in outcomes] == [("kept_open", Verdict.UNDETERMINED, evidence)] * 2
    assert [(i.state, i.verdict, i.verdict_evidence) for i in items] == [(pb.REVIEW_STATE_OPEN, pb.VERDICT_UNDETERMINED, evidence)] * 2
    name = evidence.split(" ", 1)[0]
    assert counted == [("failure", {"tracefence.reconciler": name, "error.type": kind})] * 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]  # once per reconciler and kind
    assert warnings == [f"reconciler {name} (tool invoice.create): {evidence}; the item stays open"]


def test_calls_past_their_timeout_keep_their_slot_and_the_next_call_is_not_asked(tmp_path):
    release = threading.Event()
    run, counted = runner({"invoice.create": lambda request: release.wait(10) and ReconcileResult(Verdict.ABSENT, "late")}, timeout_s=0.2, max_concurrent=1)
    with _store(str(tmp_path / "review.db"), held(TRACE)) as store:
        [first] = [run.check(r) for r in held_requests(store.get(TRACE))]
        [second] = [run.check(r) for r in held_requests(store.get(TRACE))]
        release.set()
        time.sleep(0.3)
        [third] = [run.check(r) for r in held_requests(store.get(TRACE))]
    assert (first.verdict, first.evidence) == (Verdict.UNDETERMINED, "checks:<lambda> did not answer within 0.2 s")
    assert (second.verdict, second.evidence) == (
        Verdict.UNDETERMINED, "not asked: all 1 reconciler slots stayed busy for 0.2 s (checks running past their timeout)",
    )  # fmt: skip
    assert (third.verdict, third.evidence) == (Verdict.ABSENT, "late")
    assert [attributes["error.type"] for kind, attributes in counted if kind == "failure"] == ["timeout", "busy"]


@pytest.mark.parametrize(
    "answers, verdict, state",
    [
        ({"call_1": Verdict.FOUND_ONCE, "call_2": Verdict.ABSENT}, Verdict.FOUND_ONCE, pb.REVIEW_STATE_RESOLVED),
        ({"call_1": Verdict.ABSENT, "call_2": Verdict.ABSENT}, Verdict.ABSENT, pb.REVIEW_STATE_RESOLVED),
        ({"call_1": Verdict.FOUND_ONCE, "call_2": Verdict.UNDETERMINED}, Verdict.UNDETERMINED, pb.REVIEW_STATE_OPEN),
        ({"call_1": Verdict.UNDETERMINED, "call_2": Verdict.FOUND_TWICE}, Verdict.FOUND_TWICE, pb.REVIEW_STATE_OPEN),
    ],
)
def test_an_item_of_several_held_calls_takes_the_least_settled_answer(tmp_path, answers, verdict, state):
    run, _ = runner({"invoice.create": lambda request: ReconcileResult(answers[request.call_id], f"said {request.call_id}")})
    with _store(str(tmp_path / "review.db"), held(TRACE, ("call_1", "invoice.create", "a"), ("call_2", "invoice.create", "b"))) as store:
        [outcome] = reconcile_items(store, list(open_items(store)), run)
        item = store.get(TRACE)
    evidence = f"call_1 (invoice.create): {answers['call_1'].value}: said call_1; call_2 (invoice.create): {answers['call_2'].value}: said call_2"
    assert (outcome.verdict, item.state, item.verdict_evidence) == (verdict, state, evidence)


def test_a_held_call_without_a_reconciler_keeps_the_item_open_and_an_item_with_none_is_left_alone(tmp_path):
    run, _ = runner({"invoice.create": answering(Verdict.FOUND_ONCE)})
    mixed = held(TRACE, ("call_1", "invoice.create", "a"), ("call_2", "ticket.update", "tk-7"))
    tickets = held(OTHER, ("call_7", "ticket.update", "tk-7"))
    with _store(str(tmp_path / "review.db"), mixed, tickets) as store:
        outcomes = {o.trace_id: o for o in reconcile_items(store, list(open_items(store)), run)}
        assert (store.get(TRACE).state, store.get(TRACE).verdict_evidence) == (
            pb.REVIEW_STATE_OPEN, "call_1 (invoice.create): found_once: checked a; call_2 (ticket.update): undetermined: no reconciler is registered for tool 'ticket.update'",
        )  # fmt: skip
        assert [e.kind for e in store.history(OTHER)] == ["plan_written"]
    assert (outcomes[OTHER].action, outcomes[OTHER].verdict, outcomes[OTHER].evidence) == ("no_reconciler", None, "no reconciler for ticket.update")


def test_the_same_answer_again_is_not_written_twice_and_a_dry_run_writes_nothing(tmp_path):
    run, _ = runner({"invoice.create": answering(Verdict.UNDETERMINED, "still pending")})
    with _store(str(tmp_path / "review.db")) as store:
        [dry] = reconcile_items(store, list(open_items(store)), run, dry_run=True)
        assert (dry.action, [e.kind for e in store.history(TRACE)]) == ("would_record", ["plan_written"])
        actions = [reconcile_items(store, list(open_items(store)), run)[0].action for _ in range(3)]
        assert actions == ["kept_open", "unchanged", "unchanged"]
        assert [e.kind for e in store.history(TRACE)] == ["plan_written", "verdict"]


def test_an_item_a_person_resolved_while_its_check_ran_is_not_touched(tmp_path):
    with _store(str(tmp_path / "review.db")) as store:
        items = list(open_items(store))

        def person_first(request: ReconcileRequest) -> ReconcileResult:
            store.resolve(TRACE, resolved_by="ada", note="checked the ledger")
            return ReconcileResult(Verdict.FOUND_TWICE, "two invoices")

        run, _ = runner({"invoice.create": person_first})
        [outcome] = reconcile_items(store, items, run)
        item = store.get(TRACE)
    assert outcome.action == "skipped"
    assert (item.resolved_by, item.verdict, item.duplicate_effect_found) == ("ada", pb.VERDICT_UNSPECIFIED, False)
