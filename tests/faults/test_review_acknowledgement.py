"""A review item is part of the acknowledgement (issue 30, DECISIONS 510, 511).

``tracefence serve`` as a real subprocess with the persistent queue on, clients sending review traces through
the SDK's OTLP exporter, and a review database that takes no writes: a trigger refusing every insert (the
store fails as a full disk makes it fail, without root), or, when root can mount it, a 1 MiB tmpfs filled up.
Every span is forwarded meanwhile; SIGKILL; restarted with the store writable again: every acknowledged review
trace is in the store. Before the fix the persistent queue let go of the spans once forwarded and the held
items died with the process.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.service.persistent_queue import PersistentQueue
from service_helpers import Client, RecordingUpstream, ServeProcess, agent_trace, fill, send_review_traces, short_deadline_client, stored, wait_for

REFUSE = "CREATE TRIGGER refuse_all BEFORE INSERT ON review_items BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"


def crashed(proc: ServeProcess) -> list[str]:
    """Lines of a traceback printed outside the JSON log (a failed write is logged with its exception, in JSON)."""
    return [e["message"] for e in proc.logs() if e.get("raw") and "Traceback" in e["message"]]


def refusing_store(db: Path) -> None:
    """A review database with its schema, refusing every new item."""
    SQLiteReviewStore(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute(REFUSE)


def taking_writes_again(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER refuse_all")


def serve(tmp_path: Path, up_port: int, db: Path, **env: str) -> ServeProcess:
    return ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up_port}", "--review-db", str(db),
        "--decision-wait-ms", "0", "--persistent-queue-dir", str(tmp_path / "queue"),
        cwd=tmp_path, **env,
    )  # fmt: skip


def test_review_items_held_when_the_store_fails_survive_a_sigkill_with_the_persistent_queue(tmp_path):
    db = tmp_path / "review.db"
    refusing_store(db)
    up = RecordingUpstream()
    up_port = up.start()
    first = serve(tmp_path, up_port, db)
    client = None
    try:
        client = Client(first.log("tracefence serve listening")["port"], "billing-agent", batch=True)
        acked = send_review_traces(client, 40)
        assert len(acked) == 40
        # Every span forwarded: before the fix, the queue let go of them all here.
        wait_for(lambda: {r.trace_id for r in up.spans()} >= set(acked), timeout=30, what="every span upstream")
        assert stored(db) == set()
        first.proc.send_signal(signal.SIGKILL)
        assert first.proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if client is not None:
            client.shutdown()
        first.stop()
    kept = PersistentQueue.count(tmp_path / "queue" / "tracefence-queue.db")  # kept for their items: all 40 requests
    taking_writes_again(db)
    second = serve(tmp_path, up_port, db)
    try:
        second.log("tracefence serve listening")
        wait_for(lambda: set(acked) <= stored(db), timeout=30, what="every acknowledged review trace in the store")
        missing = set(acked) - stored(db)
        assert (len(missing), kept[0]) == (0, 40)
        # Written, the rows go: the queue is empty once forwarded again.
        wait_for(lambda: PersistentQueue.count(tmp_path / "queue" / "tracefence-queue.db") == (0, 0), timeout=20, what="the queue emptied")
    finally:
        second.stop()
        up.stop()
    assert not crashed(first) and not crashed(second)


def _post_http(port: int, body: bytes) -> tuple[int, str | None]:
    """POST an OTLP/HTTP protobuf body; the status and the Retry-After header."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get("Retry-After")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Retry-After")


def test_a_failing_review_store_with_a_full_hold_refuses_exports_and_accepts_again_by_itself(tmp_path):
    """``max_traces`` 10: once 10 items are held, gRPC Export gets UNAVAILABLE (the SDK exporter gives up
    within its deadline) and OTLP/HTTP 503 with Retry-After, one log line for the refusals; the store writable
    again, the held items are written and calls are acknowledged again, with no item lost."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    db = tmp_path / "review.db"
    refusing_store(db)
    up = RecordingUpstream()
    up_port = up.start()
    proc = serve(tmp_path, up_port, db, OTEL_TRACEFENCE_MAX_TRACES="10", OTEL_TRACEFENCE_SERVICE__RETRY_DELAY_S="1")
    client = None
    try:
        listening = proc.log("tracefence serve listening")
        client = short_deadline_client(listening["port"])
        acked = send_review_traces(client, 10)
        assert len(acked) == 10
        wait_for(lambda: {r.trace_id for r in up.spans()} >= set(acked), timeout=30, what="the 10 forwarded")
        refused_trace = agent_trace(client, review=True)
        assert client.send() is SpanExportResult.FAILURE  # UNAVAILABLE, retried within the deadline, then given up
        status, retry_after = _post_http(listening["http_port"], ExportTraceServiceRequest().SerializeToString())
        assert (status, retry_after) == (503, "1")
        lines = [e for e in proc.logs() if str(e.get("message", "")).startswith("review store failing:")]
        assert len(lines) == 1
        taking_writes_again(db)
        wait_for(lambda: set(acked) <= stored(db), timeout=30, what="the held items written")
        again = send_review_traces(client, 3)
        assert len(again) == 3
        wait_for(lambda: set(again) <= stored(db), timeout=30, what="the new items written")
        assert refused_trace not in stored(db)  # never acknowledged: the client knows it was not taken
    finally:
        if client is not None:
            client.shutdown()
        proc.stop()
        up.stop()
    assert not crashed(proc)


# -- a real full volume (root only) ------------------------------------------------------------------------


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def small_volume(tmp_path, request):
    """A tmpfs of ``request.param`` MiB (1 unless parametrized) at tmp_path/vol (root only; skipped visibly otherwise)."""
    size = getattr(request, "param", 1)
    if not _can_mount():
        pytest.skip(f"needs root to mount a {size} MiB tmpfs")
    volume = tmp_path / "vol"
    volume.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}m", "tmpfs", str(volume)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield volume
    finally:
        subprocess.run(["umount", "-l", str(volume)], capture_output=True)


ROOM = str(256 * 1024)  # review_db_min_free_bytes on the small volume: starts, and trims its WAL once tight


@pytest.mark.parametrize("small_volume", [1, 4, 16], indirect=True, ids=["1MiB", "4MiB", "16MiB"])
def test_review_db_on_a_full_volume_sigkill_then_space_loses_no_acknowledged_item(tmp_path, small_volume):
    db = small_volume / "review.db"
    SQLiteReviewStore(db).close()
    up = RecordingUpstream()
    up_port = up.start()
    first = serve(tmp_path, up_port, db, OTEL_TRACEFENCE_REVIEW_DB_MIN_FREE_BYTES=ROOM)
    client = None
    try:
        client = Client(first.log("tracefence serve listening")["port"], "billing-agent", batch=True)
        fill(small_volume)  # once started: a full volume at start is refused (exit 2)
        acked = send_review_traces(client, 40)
        assert len(acked) == 40
        wait_for(lambda: {r.trace_id for r in up.spans()} >= set(acked), timeout=30, what="every span upstream")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=10)
    finally:
        if client is not None:
            client.shutdown()
        first.stop()
    (small_volume / "filler").unlink()
    second = serve(tmp_path, up_port, db, OTEL_TRACEFENCE_REVIEW_DB_MIN_FREE_BYTES=ROOM)
    try:
        second.log("tracefence serve listening")
        wait_for(lambda: set(acked) <= stored(db), timeout=30, what="every acknowledged review trace in the store")
        assert len(set(acked) - stored(db)) == 0
    finally:
        second.stop()
        up.stop()
    assert not crashed(first) and not crashed(second)


@pytest.mark.parametrize("small_volume", [1, 4, 16], indirect=True, ids=["1MiB", "4MiB", "16MiB"])
def test_a_full_review_volume_refuses_exports_and_takes_them_again_soon_after_space_returns(tmp_path, small_volume):
    """Issue 30's done-when: the review DB's volume full, items held until the hold is full, then Export refused;
    the space back, every held item written and calls acknowledged again within seconds (the write retry is 1 s
    here), no acknowledged item lost, without a restart."""

    db = small_volume / "review.db"
    SQLiteReviewStore(db).close()
    up = RecordingUpstream()
    up_port = up.start()
    proc = serve(tmp_path, up_port, db, OTEL_TRACEFENCE_MAX_TRACES="10", OTEL_TRACEFENCE_SERVICE__RETRY_DELAY_S="1", OTEL_TRACEFENCE_REVIEW_DB_MIN_FREE_BYTES=ROOM)
    client = None
    try:
        listening = proc.log("tracefence serve listening")
        client = short_deadline_client(listening["port"])
        filler = fill(small_volume)
        acked, refused = [], False
        for _ in range(200):
            trace_id = agent_trace(client, review=True)
            if client.send() is SpanExportResult.SUCCESS:
                acked.append(trace_id)
            else:
                refused = True
                break
        assert refused and acked, (refused, len(acked))
        filler.unlink()
        back = time.monotonic()
        again = wait_for(lambda: send_review_traces(client, 1), timeout=30, what="an Export acknowledged again")
        taken_after = time.monotonic() - back
        wait_for(lambda: set(acked) | set(again) <= stored(db), timeout=30, what="every acknowledged item written")
    finally:
        if client is not None:
            client.shutdown()
        proc.stop()
        up.stop()
    assert not crashed(proc)
    print(f"{small_volume.name}: {len(acked)} acknowledged while full, Export taken again {taken_after:.2f} s after the space came back")
    assert taken_after < 5
