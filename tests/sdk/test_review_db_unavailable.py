"""The agent starts whatever the disk says (issue 30, item 7): a review database that cannot be opened when the
span processor or the zero-code exporter is built is logged once; spans are handed on annotated as always; the
review items are held in memory and written once the database opens, or counted and logged as lost at shutdown."""

from __future__ import annotations

import logging

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.agent.instrument import tool_call
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.sdk.exporter import TraceFenceSpanExporter


def _run_timed_out_write(provider: TracerProvider) -> str:
    """One trace: a write that timed out (class review, one review item). Returns its trace id (hex)."""
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent billing") as root:
        try:
            with tool_call("invoice.create", effect="write", arguments={"amount": 1250}, call_id="c1", tracer_provider=provider):
                raise TimeoutError("billing API did not answer within 10 s")
        except TimeoutError:
            pass
    return format(root.get_span_context().trace_id, "032x")


def _blocked_path(tmp_path):
    """A review database path whose directory is a regular file: no process, root included, can create it."""
    (tmp_path / "state").write_text("not a directory")
    return tmp_path / "state" / "review.db"


def test_the_processor_starts_holds_the_item_and_writes_it_once_the_path_is_writable(tmp_path, caplog):
    db = _blocked_path(tmp_path)
    exported = InMemorySpanExporter()
    caplog.set_level(logging.WARNING)
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exported), review_db=str(db))  # does not raise
    provider = TracerProvider()
    provider.add_span_processor(processor)
    trace_id = _run_timed_out_write(provider)
    classes = {span.attributes["tracefence.replay.class"] for span in exported.get_finished_spans()}
    assert classes == {"review"}  # handed on annotated, as always
    assert processor._fence.pending_reviews() == 1
    opened = [r.getMessage() for r in caplog.records if "cannot open the review database" in r.getMessage()]
    assert len(opened) == 1 and "review items are held in memory" in opened[0]

    (tmp_path / "state").unlink()
    (tmp_path / "state").mkdir()  # the volume is writable now
    provider.force_flush()  # a flush writes the held items (the retry thread would, within 5 s)
    assert processor._fence.pending_reviews() == 0
    provider.shutdown()
    with SQLiteReviewStore(db) as store:
        item = store.get(trace_id)
    assert item is not None and item.plan.replay_class == 4  # REPLAY_CLASS_REVIEW
    assert [s.reasons for s in item.plan.steps] == [["write_timeout"]]
    with SQLiteReviewStore(db) as store:  # the spans the page draws waited with the item and were written with it
        assert [(s.call_id, bool(s.span_id)) for s in store.spans(trace_id).steps] == [(item.plan.steps[0].step.call_id, True)]
    assert processor._fence.reviews.spans.of([trace_id]) == {}
    assert any("is open now" in r.getMessage() for r in caplog.records)


def test_items_still_unwritable_at_shutdown_are_counted_and_logged_as_lost(tmp_path, caplog):
    db = _blocked_path(tmp_path)
    exported = InMemorySpanExporter()
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exported), review_db=str(db))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    caplog.set_level(logging.WARNING)
    trace_id = _run_timed_out_write(provider)
    provider.shutdown()
    lost = [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()]
    assert lost == [f"tracefence processor: shutdown: 1 review item(s) could not be written and are lost: traces {trace_id}"]
    assert not db.exists()


def test_the_zero_code_exporter_holds_items_the_same_way(tmp_path, caplog):
    db = _blocked_path(tmp_path)
    inner = InMemorySpanExporter()
    caplog.set_level(logging.WARNING)
    exporter = TraceFenceSpanExporter(inner, review_db=str(db))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_id = _run_timed_out_write(provider)
    assert exporter._fence.pending_reviews() == 1
    (tmp_path / "state").unlink()
    (tmp_path / "state").mkdir()
    provider.shutdown()  # the last flush writes what is held
    with SQLiteReviewStore(db) as store:
        assert store.get(trace_id) is not None
    assert {s.attributes["tracefence.replay.class"] for s in inner.get_finished_spans()} == {"review"}


def test_the_processor_says_once_where_its_review_database_is(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO, logger="otel_tracefence.sdk")
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()))  # the default review_db, made in the working directory
    said = [r.getMessage() for r in caplog.records if "review items go to" in r.getMessage()]
    processor.shutdown()
    assert said == [f"tracefence processor: review items go to the review database {tmp_path / 'tracefence-review.db'} (review_db; empty keeps no review queue)"]
    caplog.clear()
    TraceFenceSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), review_db="").shutdown()
    assert [r.getMessage() for r in caplog.records if "review" in r.getMessage()] == []
