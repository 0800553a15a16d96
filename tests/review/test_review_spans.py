"""What a review item keeps of its trace for the item page (issue 26): spans, bounded by ``review_spans_max``; each
step's times; a SHA-256 per argument field, values only under ``store_raw_values`` and redacted. Both stores, written
by the span processor and by ``tracefence serve``; an older database migrated on open, its items still read."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from otel_tracefence.core.config import TraceFenceConfig, load_config
from otel_tracefence.review import open_review_store
from otel_tracefence.review.sqlite_schema import DDL_EVENTS, DDL_ITEMS, VERDICT_COLUMNS
from otel_tracefence.review.store import SQLiteReviewStore
from span_queue import CONFLICT, INVOICE, MARKERS, MS, SECRET_MARKERS, T0, write_through_processor


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fields_of(kept, call_id: str) -> dict[str, tuple[str, str | None]]:
    (step,) = [s for s in kept.steps if s.call_id == call_id]
    assert not step.fields_unavailable
    return {f.name: (f.sha256, f.value_json if f.HasField("value_json") else None) for f in step.fields}


def test_the_processor_keeps_spans_step_times_and_field_hashes_in_both_stores(target):
    write_through_processor(target)
    with open_review_store(target, create=False) as store:
        kept = store.spans(INVOICE)
        assert [(s.name, s.kind, s.status, s.call_id) for s in kept.spans] == [
            ("invoke_agent billing-agent", "internal", "unset", ""),
            ("chat gpt-4o", "client", "unset", ""),
            ("execute_tool customer.lookup", "internal", "unset", "call-lookup"),
            ("execute_tool invoice.create", "internal", "error", "call-invoice"),
            ("POST /invoices", "client", "unset", ""),
        ]
        by_name = {s.name: s for s in kept.spans}
        tool = by_name["execute_tool invoice.create"]
        assert (tool.start_time_unix_nano - T0, tool.end_time_unix_nano - T0) == (120 * MS, 30_120 * MS)
        assert by_name["POST /invoices"].parent_span_id == tool.span_id
        assert tool.parent_span_id == by_name["invoke_agent billing-agent"].span_id
        assert kept.spans_left_out == 0
        assert [(s.call_id, s.span_id, s.start_time_unix_nano - T0, s.end_time_unix_nano - T0) for s in kept.steps] == [
            ("call-lookup", by_name["execute_tool customer.lookup"].span_id, 112 * MS, 118 * MS),
            ("call-invoice", tool.span_id, 120 * MS, 30_120 * MS),
        ]
        assert fields_of(kept, "call-invoice") == {
            "amount_cents": (sha("990"), None), "card_number": (sha(f'"{SECRET_MARKERS[0]}"'), None), "customer": (sha(f'"{MARKERS[0]}"'), None),
        }  # fmt: skip
        one, two = fields_of(store.spans(CONFLICT), "call-ticket-1"), fields_of(store.spans(CONFLICT), "call-ticket-2")
        assert one["ticket"] == two["ticket"] == (sha("7"), None)
        assert (one["state"][0], two["state"][0]) == (sha(f'"{MARKERS[1]}"'), sha(f'"{MARKERS[2]}"'))
        assert (one["api_key"][0], two["api_key"][0]) == (sha(f'"{SECRET_MARKERS[1]}"'), sha(f'"{SECRET_MARKERS[2]}"'))
        assert store.get(INVOICE).plan.steps[1].step.arguments_json == ""  # the item itself: hashes only, as before
        assert store.spans("not-a-trace") is None


def test_values_are_kept_only_under_store_raw_values_and_redacted(tmp_path):
    db = str(tmp_path / "review.db")
    write_through_processor(db, store_raw_values=True)
    with SQLiteReviewStore(db, create=False) as store:
        assert fields_of(store.spans(INVOICE), "call-invoice") == {
            "amount_cents": (sha("990"), "990"),
            "card_number": (sha(f'"{SECRET_MARKERS[0]}"'), '"[REDACTED]"'),  # the hash is the original's, the value redacted
            "customer": (sha(f'"{MARKERS[0]}"'), f'"{MARKERS[0]}"'),
        }


def test_review_spans_max_keeps_the_tool_spans_first_and_counts_the_rest(tmp_path):
    db = str(tmp_path / "review.db")
    write_through_processor(db, review_spans_max=3)
    with SQLiteReviewStore(db, create=False) as store:
        kept = store.spans(INVOICE)
        assert [s.name for s in kept.spans] == ["invoke_agent billing-agent", "execute_tool customer.lookup", "execute_tool invoice.create"]
        assert kept.spans_left_out == 2
        assert [s.call_id for s in kept.steps] == ["call-lookup", "call-invoice"]  # every step's times, whatever the bound
    db0 = str(tmp_path / "none.db")
    write_through_processor(db0, review_spans_max=0)
    with SQLiteReviewStore(db0, create=False) as store:
        kept = store.spans(INVOICE)
        assert (len(kept.spans), kept.spans_left_out, len(kept.steps)) == (0, 5, 2)


def test_review_spans_max_from_the_environment_and_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_REVIEW_SPANS_MAX", "42")
    assert load_config().review_spans_max == 42
    monkeypatch.delenv("OTEL_TRACEFENCE_REVIEW_SPANS_MAX")
    path = tmp_path / "tracefence.yaml"
    path.write_text("review_spans_max: 7\n", encoding="utf-8")
    assert load_config(path).review_spans_max == 7
    assert load_config().review_spans_max == 500
    with pytest.raises(ValueError, match="review_spans_max"):
        TraceFenceConfig(review_spans_max=-1)


def test_a_version_3_sqlite_file_is_migrated_and_its_items_read_without_spans(tmp_path, caplog):
    db = tmp_path / "old.db"
    write_through_processor(str(tmp_path / "new.db"))
    with SQLiteReviewStore(tmp_path / "new.db", create=False) as new:
        blob = new.get(INVOICE).SerializeToString()
    conn = sqlite3.connect(db)
    for statement in DDL_ITEMS + DDL_EVENTS + VERDICT_COLUMNS:
        conn.execute(statement)
    conn.execute("INSERT INTO review_items VALUES (?, 1, 4, 'billing', 1, 2, ?)", (INVOICE, blob))
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with caplog.at_level("WARNING"):
        with SQLiteReviewStore(db, create=False) as store:
            assert store.get(INVOICE).trace_id == INVOICE
            assert store.spans(INVOICE) is None
    assert "migrated from schema version 3 to 4" in caplog.text
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 4


def test_a_version_3_postgresql_schema_is_migrated(pg_url, caplog):
    import psycopg

    with open_review_store(pg_url):
        pass
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE review_spans")
        conn.execute("UPDATE review_schema SET version = 3")
    with caplog.at_level("WARNING"):
        write_through_processor(pg_url)
    assert "migrated from schema version 3 to 4" in caplog.text
    with open_review_store(pg_url, create=False) as store:
        assert len(store.spans(INVOICE).spans) == 5


def test_serve_keeps_the_same_spans_as_the_processor(tmp_path, upstream, target):
    """The same spans over OTLP/gRPC to ``tracefence serve`` (its review queue on each store) keep what the processor
    keeps, byte for byte."""
    from otel_tracefence.service.server import TraceFenceService
    from service_helpers import Client, service_config, wait_for
    from span_queue import FixedTraceIds, emit_traces

    service = TraceFenceService(service_config(upstream, target))
    service.start()
    try:
        client = Client(service.port)
        client.provider.id_generator = FixedTraceIds()
        emit_traces(client.provider.get_tracer("agent"))
        client.shutdown()
        upstream.wait_spans(8)
        wait_for(lambda: service.store.spans(CONFLICT) is not None, 10, what="the conflict's spans in the review queue")
        served = {t: service.store.spans(t).SerializeToString(deterministic=True) for t in (INVOICE, CONFLICT)}
    finally:
        service.stop(0)
    processed = tmp_path / "processor.db"
    write_through_processor(str(processed))
    with SQLiteReviewStore(processed, create=False) as store:
        assert served == {t: store.spans(t).SerializeToString(deterministic=True) for t in (INVOICE, CONFLICT)}


def test_kept_spans_that_cannot_be_read_leave_the_item_readable(tmp_path, caplog):
    db = tmp_path / "review.db"
    write_through_processor(str(db))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE review_spans SET spans = x'ff00ff' WHERE trace_id = ?", (INVOICE,))
    conn.execute("UPDATE review_spans SET spans = 'text' WHERE trace_id = ?", (CONFLICT,))
    conn.commit()
    conn.close()
    with caplog.at_level("WARNING"), SQLiteReviewStore(db, create=False) as store:
        assert (store.spans(INVOICE), store.spans(CONFLICT)) == (None, None)
        assert store.get(INVOICE).trace_id == INVOICE
    assert f"the spans kept with review item {INVOICE} cannot be read" in caplog.text
    assert f"the spans kept with review item {CONFLICT} are stored as str, not bytes" in caplog.text


def test_spans_waiting_for_their_items_write_are_bounded_oldest_dropped():
    from otel_tracefence.core.model import TracePlan
    from otel_tracefence.pipeline.review_spans import KEPT_TRACES_MAX, SpanKeeper

    keeper = SpanKeeper(TraceFenceConfig())
    for n in range(KEPT_TRACES_MAX + 1):
        keeper.keep(TracePlan(trace_id=f"t{n}", replay_class=None), [])
    assert (keeper.of(["t0"]), sorted(keeper.of(["t1", f"t{KEPT_TRACES_MAX}"]))) == ({}, ["t1", f"t{KEPT_TRACES_MAX}"])
    kept = keeper.of(["t1"])
    keeper.keep(TracePlan(trace_id="t1", replay_class=None), [])  # a newer one replaces it before the write ends
    keeper.written(kept)
    assert list(keeper.of(["t1"])) == ["t1"]  # the newer one stays for the next write
    keeper.written(keeper.of(["t1"]))
    assert keeper.of(["t1"]) == {}
