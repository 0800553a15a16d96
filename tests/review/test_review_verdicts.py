"""Verdicts in the review queue (issue 25): a resolution carries a verdict, a verdict follows the issue's rules,
on a SQLite file and on the real PostgreSQL server the suite starts; through the gRPC review API and the CLI."""

from __future__ import annotations

import logging

import pytest

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.reconcile import Verdict
from otel_tracefence.review import ReviewEvent, open_review_store
from otel_tracefence.review.events import event_from_proto, event_to_proto
from otel_tracefence.review.verdicts import parse_verdict

from test_review_store import T0, Clock, review_plan

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _store(target: str):
    store = open_review_store(target, clock=Clock(T0))
    store.upsert(review_plan(TRACE), service_name="billing")
    return store


@pytest.mark.parametrize("verdict", [Verdict.FOUND_ONCE, Verdict.ABSENT])
def test_found_once_and_absent_resolve_the_item_with_the_evidence(target: str, verdict: Verdict):
    with _store(target) as store:
        item = store.record_verdict(TRACE, actor="billing_checks:find_invoice", verdict=verdict, evidence="invoice inv-9: 1 found")
        assert item.state == pb.REVIEW_STATE_RESOLVED
        assert item.resolved_by == "billing_checks:find_invoice"
        assert (item.verdict_by, item.verdict_evidence) == ("billing_checks:find_invoice", "invoice inv-9: 1 found")
        assert item.verdict == pb.Verdict.Value("VERDICT_" + verdict.name)
        assert not item.duplicate_effect_found
        last = store.history(TRACE)[-1]
        assert (last.kind, last.actor, last.verdict, last.evidence, last.state) == (
            "resolved", "billing_checks:find_invoice", verdict.value, "invoice inv-9: 1 found", pb.REVIEW_STATE_RESOLVED,
        )  # fmt: skip
        assert store.get(TRACE) == item


def test_found_twice_keeps_it_open_marks_it_logs_a_warning(target: str, caplog: pytest.LogCaptureFixture):
    with _store(target) as store, caplog.at_level(logging.WARNING, logger="otel_tracefence.review.verdicts"):
        item = store.record_verdict(TRACE, actor="checks", verdict="found_twice", evidence="2 invoices with key inv-9")
        assert item.state == pb.REVIEW_STATE_OPEN
        assert item.duplicate_effect_found
        assert item.verdict == pb.VERDICT_FOUND_TWICE
        assert [(e.kind, e.verdict, e.evidence) for e in store.history(TRACE)][-1] == ("verdict", "found_twice", "2 invoices with key inv-9")
    assert [r.getMessage() for r in caplog.records] == [
        f"review item {TRACE}: checks found the effect twice (2 invoices with key inv-9): the item stays open, marked duplicate_effect_found"
    ]


def test_a_person_resolving_found_twice_is_logged_as_resolved(target: str, caplog: pytest.LogCaptureFixture):
    with _store(target) as store, caplog.at_level(logging.WARNING, logger="otel_tracefence.review.verdicts"):
        item = store.resolve(TRACE, resolved_by="ada", note="two invoices", verdict="found_twice")
        assert (item.state, item.duplicate_effect_found) == (pb.REVIEW_STATE_RESOLVED, True)
    assert [r.getMessage() for r in caplog.records] == [
        f"review item {TRACE}: ada found the effect twice (two invoices): the item is resolved, marked duplicate_effect_found"
    ]


def test_undetermined_keeps_it_open_with_the_evidence(target: str):
    with _store(target) as store:
        item = store.record_verdict(TRACE, actor="checks", verdict=Verdict.UNDETERMINED, evidence="billing answered 503")
        assert (item.state, item.verdict, item.verdict_evidence, item.duplicate_effect_found) == (
            pb.REVIEW_STATE_OPEN, pb.VERDICT_UNDETERMINED, "billing answered 503", False,
        )  # fmt: skip
        assert store.history(TRACE)[-1].kind == "verdict"


def test_a_person_overrules_a_verdict_and_resolves_with_a_verdict_of_their_own(target: str):
    with _store(target) as store:
        store.record_verdict(TRACE, actor="checks", verdict=Verdict.FOUND_TWICE, evidence="2 invoices")
        item = store.resolve(TRACE, resolved_by="ada", note="second invoice voided by hand", verdict="found-once")
        assert (item.state, item.resolved_by, item.verdict, item.verdict_by, item.verdict_evidence) == (
            pb.REVIEW_STATE_RESOLVED, "ada", pb.VERDICT_FOUND_ONCE, "ada", "second invoice voided by hand",
        )  # fmt: skip
        assert item.duplicate_effect_found  # what was found stays on record
        assert [(e.kind, e.actor, e.verdict) for e in store.history(TRACE)][-2:] == [("verdict", "checks", "found_twice"), ("resolved", "ada", "found_once")]
        plain = store.resolve(TRACE, resolved_by="bob", note="checked again")  # no verdict: the latest one stays
        assert (plain.verdict, plain.verdict_by) == (pb.VERDICT_FOUND_ONCE, "ada")
        assert store.history(TRACE)[-1].verdict == ""


def test_bad_verdicts_are_refused_naming_the_four(target: str):
    with _store(target) as store:
        with pytest.raises(ValueError, match="verdict 'maybe' is not one of found_once, absent, found_twice, undetermined"):
            store.record_verdict(TRACE, actor="checks", verdict="maybe", evidence="")
        with pytest.raises(ValueError, match="a verdict is required"):
            store.record_verdict(TRACE, actor="checks", verdict="", evidence="")
        with pytest.raises(ValueError, match="actor must name"):
            store.record_verdict(TRACE, actor=" ", verdict="absent", evidence="")
        with pytest.raises(KeyError):
            store.record_verdict("0" * 32, actor="checks", verdict="absent", evidence="")
        with pytest.raises(ValueError, match="verdict 'yes'"):
            store.resolve(TRACE, resolved_by="ada", note="", verdict="yes")
        assert [e.kind for e in store.history(TRACE)] == ["plan_written"]


def test_a_reopened_item_drops_its_verdict():
    from otel_tracefence.review import transitions

    item = pb.ReviewItem(trace_id=TRACE, state=pb.REVIEW_STATE_RESOLVED, resolved_by="checks", verdict=pb.VERDICT_ABSENT, verdict_by="checks", duplicate_effect_found=True)
    item.plan.CopyFrom(transitions.prepare_plan(review_plan(TRACE), store_raw_values=False))
    other = transitions.prepare_plan(review_plan(TRACE), store_raw_values=False)
    other.steps[1].step.status = pb.TOOL_STATUS_ERROR
    change = transitions.apply_upsert(item, T0, other, service_name="", now_ns=T0 + 5)
    assert (change.item.state, change.item.verdict, change.item.verdict_by, change.item.duplicate_effect_found) == (pb.REVIEW_STATE_OPEN, 0, "", True)


def test_events_carry_the_verdict_through_the_proto():
    event = ReviewEvent("verdict", T0, "checks", "", pb.REVIEW_STATE_OPEN, pb.REPLAY_CLASS_REVIEW, "undetermined", "billing answered 503")
    message = event_to_proto(event)
    assert (message.verdict, message.evidence) == (pb.VERDICT_UNDETERMINED, "billing answered 503")
    assert event_from_proto(message) == event
    assert parse_verdict("FOUND-TWICE") is Verdict.FOUND_TWICE and str(Verdict.ABSENT) == "absent"


def test_cli_resolve_takes_a_verdict_and_show_prints_it(tmp_path):
    from test_cli_review import tracefence

    db = tmp_path / "queue.db"
    _store(str(db)).close()
    proc = tracefence("resolve", TRACE[:8], "--db", str(db), "--by", "ada", "--note", "one invoice in billing", "--verdict", "found-once")
    assert proc.returncode == 0, proc.stderr
    assert "verdict      found_once by ada: one invoice in billing" in proc.stdout
    shown = tracefence("show", TRACE, "--db", str(db))
    assert shown.stdout.rstrip().splitlines()[-1].split()[1:] == ["resolved", "ada", "resolved", "review", "found_once", "one", "invoice", "in", "billing"]
    bad = tracefence("resolve", TRACE, "--db", str(db), "--by", "ada", "--note", "x", "--verdict", "maybe")
    assert bad.returncode == 2 and "invalid choice: 'maybe'" in bad.stderr


def test_the_review_api_resolves_and_records_verdicts(tmp_path):
    from concurrent import futures

    import grpc

    from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc
    from otel_tracefence.cli.review import ApiSource
    from otel_tracefence.service.review_api import ReviewService

    store = _store(str(tmp_path / "queue.db"))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_ReviewServiceServicer_to_server(ReviewService(store), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    source = ApiSource(f"127.0.0.1:{port}")
    try:
        item = source.record_verdict(TRACE, actor="checks", verdict="found_twice", evidence="2 invoices")
        assert (item.state, item.duplicate_effect_found) == (pb.REVIEW_STATE_OPEN, True)
        item = source.resolve(TRACE, resolved_by="ada", note="voided one", verdict="found-once")
        assert (item.state, item.verdict, item.verdict_by) == (pb.REVIEW_STATE_RESOLVED, pb.VERDICT_FOUND_ONCE, "ada")
        assert [(e.kind, e.verdict, e.evidence) for e in source.history(TRACE)][1:] == [("verdict", "found_twice", "2 invoices"), ("resolved", "found_once", "")]
        with pytest.raises(ValueError, match="a verdict is required"):
            source.record_verdict(TRACE, actor="checks", verdict="", evidence="")
        with pytest.raises(KeyError):
            source.record_verdict("0" * 32, actor="checks", verdict="absent", evidence="")
    finally:
        source.close()
        server.stop(None)
        store.close()


def test_a_version_2_database_gains_the_verdict_columns_on_open(target: str):
    _store(target).close()
    statements = ["ALTER TABLE review_events DROP COLUMN verdict", "ALTER TABLE review_events DROP COLUMN evidence", "DROP TABLE review_spans"]  # version 2: no spans table either
    if target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            for statement in [*statements, "UPDATE review_schema SET version = 2"]:
                conn.execute(statement)
    else:
        import sqlite3

        with sqlite3.connect(target) as conn:
            for statement in [*statements, "PRAGMA user_version = 2"]:
                conn.execute(statement)
    with open_review_store(target) as store:
        assert [(e.kind, e.verdict, e.evidence) for e in store.history(TRACE)] == [("plan_written", "", "")]
        store.record_verdict(TRACE, actor="checks", verdict="absent", evidence="no invoice")
        assert store.history(TRACE)[-1].verdict == "absent"
