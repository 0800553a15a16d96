"""Issue 30 (no raw values by default): a malformed ``tracefence.*`` label's value (1 MiB, a marker in it) is named by
its attribute, type and size in the review item, never copied: the marker is nowhere in the review database (its
-wal and -shm files included), the logs, or the review API's answers; the item's messages are capped."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import grpc
import pytest

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc
from otel_tracefence.core.value_text import MESSAGE_MAX_CHARS, SHOWN_MAX_CHARS, capped, described, showing_values, shown, stop_showing
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.service.server import TraceFenceService
from service_helpers import RecordingUpstream, raw_request, raw_tool_span, service_config, trace_stub, wait_for

MARKER = "tf-marker-9c1e5a77"
VALUE = MARKER + "x" * (1024 * 1024 - len(MARKER))  # 1 MiB
TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")


def test_described_names_type_and_size_and_capped_cuts() -> None:
    assert [described(v) for v in ("done", "x", 3, True, 1.5, None, [1, 2], {"a": 1}, b"ab")] == [
        "a string of 4 characters", "a string of 1 character", "an integer", "a boolean", "a number", "null",
        "an array of 2 elements", "an object of 1 key", "2 bytes",
    ]  # fmt: skip
    assert capped("short") == "short"
    cut = capped("y" * 5000)
    assert len(cut) == MESSAGE_MAX_CHARS and cut.endswith("... (cut: 5000 characters)")


def test_shown_describes_a_value_unless_the_policy_keeps_raw_values_then_redacts_and_caps_it() -> None:
    from otel_tracefence.core.redact import Redaction

    assert shown("Bearer abc.def") == "a string of 14 characters"  # no policy set: the default
    token = showing_values(Redaction())
    try:
        assert shown("Bearer abc.def") == "'Bearer [REDACTED]'"
        assert shown({"password": "x", "n": 1}) == "{'password': '[REDACTED]', 'n': 1}"
        long = shown(VALUE)
        assert len(long) == SHOWN_MAX_CHARS and long.startswith("'" + MARKER) and long.endswith("(cut: 1048578 characters)")
    finally:
        stop_showing(token)
    assert shown("Bearer abc.def") == "a string of 14 characters"


def test_a_malformed_label_value_reaches_no_store_log_or_answer(tmp_path: Path, upstream: RecordingUpstream, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "review.db"
    service = TraceFenceService(service_config(upstream, db, max_message_bytes=8 * 1024 * 1024))
    service.start()
    try:
        with caplog.at_level(logging.DEBUG):
            request = raw_request(
                raw_tool_span(TRACE, bytes.fromhex("1111111111111111"), "payments.charge", effect="write", status=VALUE),
                raw_tool_span(TRACE, bytes.fromhex("2222222222222222"), "payments.refund", effect=VALUE, status="ok"),
            )
            channel, stub = trace_stub(f"127.0.0.1:{service.port}", options=[("grpc.max_send_message_length", -1)])
            with channel:
                stub.Export(request, timeout=10)
            upstream.wait_spans(2, TRACE.hex())  # the spans themselves go on as they came

            def items() -> list[Any]:
                with SQLiteReviewStore(str(db), create=False) as store:
                    return store.list(page_size=10)[0]

            (item,) = wait_for(items, what="the review item")
            with grpc.insecure_channel(f"127.0.0.1:{service.review_port}") as channel:
                review = pb_grpc.ReviewServiceStub(channel)
                listed = review.ListReviewItems(pb.ListReviewItemsRequest(), timeout=5)
                got = review.GetReviewItem(pb.GetReviewItemRequest(trace_id=TRACE.hex()), timeout=5)
        messages = sorted((m.field, m.message) for d in got.plan.steps for m in d.step.malformed)
        assert messages == [
            ("effect", "effect (a string of 1048576 characters) is not one of read, write, unknown"),
            ("status", "status (a string of 1048576 characters) is not one of ok, error, timeout, unknown"),
        ]
        assert MARKER not in listed.SerializeToString().decode("latin-1")
        assert MARKER not in got.SerializeToString().decode("latin-1")
        assert MARKER not in str(item)
        assert not [r for r in caplog.records if MARKER in r.getMessage()]
    finally:
        service.stop(0)
    stored = [path for path in tmp_path.iterdir() if path.name.startswith("review.db")]
    assert db in stored
    for path in stored:  # the database, its -wal and -shm files
        assert MARKER.encode() not in path.read_bytes(), path.name


def _evidence_request() -> Any:
    """A write whose record quotes data: a failed status with a message, an ``error.type``, and an outcome attribute
    the normalizer does not read (each with the marker, and a card number the redaction policy knows)."""
    failed = raw_tool_span(TRACE, bytes.fromhex("3333333333333333"), "payments.charge", effect="write", status="ok", **{"error.type": f"{MARKER}Error"})
    failed.status.code = 2  # error, against the declared ok
    failed.status.message = f"card 4111 1111 1111 1111 declined for {MARKER}"
    outcome = raw_tool_span(TRACE, bytes.fromhex("4444444444444444"), "payments.refund", effect="write", status="ok", **{"refund.result_status": f"pending {MARKER}"})
    return raw_request(failed, outcome)


def _messages(tmp_path: Path, upstream: RecordingUpstream, caplog: pytest.LogCaptureFixture, **config: Any) -> tuple[list[tuple[str, str]], Path]:
    db = tmp_path / "review.db"
    service = TraceFenceService(service_config(upstream, db).model_copy(update=config))
    service.start()
    try:
        with caplog.at_level(logging.DEBUG):
            channel, stub = trace_stub(f"127.0.0.1:{service.port}")
            with channel:
                stub.Export(_evidence_request(), timeout=10)
            upstream.wait_spans(2, TRACE.hex())
            with grpc.insecure_channel(f"127.0.0.1:{service.review_port}") as channel:
                review = pb_grpc.ReviewServiceStub(channel)
                got = wait_for(lambda: _item(review), what="the review item")
    finally:
        service.stop(0)
    return sorted((m.field, m.message) for d in got.plan.steps for m in d.step.malformed), db


def _item(review: Any) -> Any:
    try:
        return review.GetReviewItem(pb.GetReviewItemRequest(trace_id=TRACE.hex()), timeout=5)
    except grpc.RpcError:
        return None


def test_values_quoted_as_evidence_are_described_by_default(tmp_path: Path, upstream: RecordingUpstream, caplog: pytest.LogCaptureFixture) -> None:
    messages, db = _messages(tmp_path, upstream, caplog)
    assert messages == [
        ("status", "attribute 'refund.result_status' holds a string of 26 characters: it names the call's status and is no success "
                   "value the normalizer knows: whether the write committed cannot be known"),
        ("status", "tracefence.status 'ok' is declared, but the span records status error (a string of 56 characters), error.type "
                   "(a string of 23 characters): error"),
    ]  # fmt: skip
    assert not [r for r in caplog.records if MARKER in r.getMessage() or "4111" in r.getMessage()]
    for path in (p for p in tmp_path.iterdir() if p.name.startswith("review.db")):
        assert MARKER.encode() not in path.read_bytes() and b"4111 1111" not in path.read_bytes(), path.name


def test_values_quoted_as_evidence_are_redacted_and_capped_when_the_policy_keeps_raw_values(
    tmp_path: Path, upstream: RecordingUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    messages, _ = _messages(tmp_path, upstream, caplog, store_raw_values=True)
    assert messages == [
        ("status", f"attribute 'refund.result_status' holds 'pending {MARKER}': it names the call's status and is no success "
                   "value the normalizer knows: whether the write committed cannot be known"),
        ("status", f"tracefence.status 'ok' is declared, but the span records status error ('card [REDACTED] declined for {MARKER}'), "
                   f"error.type ('{MARKER}Error'): error"),
    ]  # fmt: skip
