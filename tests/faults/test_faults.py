"""Faults (issue 5, item 2), with real parts: the service in process or as ``tracefence serve``, a real
gRPC upstream, the SDK's ``OTLPSpanExporter`` as the client, real SQLite files on real filesystems.

For each fault: what is kept, what is counted as dropped, and what the operator sees in the logs and
the metrics (a real ``MeterProvider`` read by an ``InMemoryMetricReader``, or the JSON log lines of
the subprocess).

* The upstream refusing, slow, or gone: decided spans wait in the forward queue (bounded) and are
  sent again after a pause (0.5 s doubling to 30 s; new batches do not cut it short, a shutdown's drain
  does); nothing within the bound is lost. Past the bound the oldest batches are dropped and counted
  (``tracefence.forward.dropped``; tests/service/test_service.py counts them exactly). ``tracefence.forward.failures``
  counts failed attempts, ``tracefence.forward.queue.size`` shows what waits, and the service logs a
  warning per failed attempt (what is held, when it tries again) and one when forwarding works again.
  A slow upstream is the one case with duplicates: a request that ran past its deadline has an unknown
  outcome, so it is sent again, and a backend that stored it late holds it twice (OTLP is
  at-least-once; the copies are identical, span id for span id).
* The review database locked, read-only or on a full disk: spans keep flowing (the data path waits on
  the database at most once, for one busy timeout); an item whose write failed is held in memory and
  written once the database takes writes again. Lost only: items still held at shutdown, or pushed out
  past the bound (``max_traces``), each counted (``tracefence.review.writes`` ``outcome=dropped``) and
  logged with the trace ids (past the bound: at most one line a minute, as every internal error; at
  shutdown: always); their spans were forwarded annotated ``tracefence.replay.class=review``.
* SIGKILL while writing review items: every item whose write committed is in the file, which opens and
  passes ``PRAGMA integrity_check``.
* SIGTERM under load: exit 0, every acknowledged span forwarded once, the stop line's figures agree.

Timing: bounded waits everywhere, processes stopped by PID in ``finally``. Tests needing root powers
(``chattr +i``, ``mount -t tmpfs``) skip where those are not available.
"""

from __future__ import annotations

import errno
import inspect
import logging
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.config import ServiceSettings, TraceFenceConfig, UpstreamSettings
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.service import forward as forward_module
from otel_tracefence.service.forward import PAUSE_AFTER_FAILURE_S, Forwarder, UpstreamTarget
from otel_tracefence.service.otlp_spans import request_span_count
from otel_tracefence.service.server import TraceFenceService
from otel_tracefence.service.shutdown import STOP_OVERRUN_S
from service_helpers import BIG, Client, RecordingUpstream, ServeProcess, agent_trace, free_port, raw_request, raw_span, raw_tool_span, trace_stub, wait_for

OK = SpanExportResult.SUCCESS
# `make chaos` sets TRACEFENCE_CHAOS=1: the larger versions of the tests below marked so (not in `make test`).
CHAOS = os.environ.get("TRACEFENCE_CHAOS") == "1"
UPSTREAM_TIMEOUT_S = 1.0  # the service's deadline per forward attempt: short, to keep the tests short
BUSY_TIMEOUT_S = inspect.signature(SQLiteReviewStore).parameters["busy_timeout_s"].default  # what the service's store waits
# The issue asks for an upstream "gone for a minute". The forwarder's pause between attempts doubles up to
# PAUSE_AFTER_FAILURE_S[1], so after a minute away the next attempt comes at most that much later; here the
# upstream is gone for GONE_S (default 5 s, the test takes ~10 s). `make soak` can run the full minute:
# TRACEFENCE_UPSTREAM_GONE_S=60 pytest tests/faults/test_faults.py -k gone
GONE_S = float(os.environ.get("TRACEFENCE_UPSTREAM_GONE_S", "5"))


@pytest.fixture
def start_service(tmp_path):
    """``start_service(upstream_port, review_db=..., top=..., **service_settings) -> (service, metric reader)``."""
    made: list[tuple[TraceFenceService, MeterProvider]] = []

    def make(upstream_port: int, *, review_db: Path | None = None, top: dict[str, Any] | None = None, upstream: dict[str, Any] | None = None, **settings: Any):
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader])
        settings.setdefault("endpoint", "127.0.0.1:0")
        settings.setdefault("http_endpoint", "")
        settings.setdefault("decision_wait_ms", 0)  # a trace is decided when its root arrives
        settings.setdefault("drain_timeout_s", 2)
        upstreams = [UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream_port}", timeout_s=UPSTREAM_TIMEOUT_S, **(upstream or {}))]
        config = TraceFenceConfig(review_db=str(review_db or tmp_path / "review.db"), service=ServiceSettings(upstreams=upstreams, **settings), **(top or {}))
        service = TraceFenceService(config, meter_provider=provider)
        made.append((service, provider))
        service.start()
        return service, reader

    yield make
    for service, provider in made:
        service.stop(grace_s=0)
        provider.shutdown()


@pytest.fixture
def clients():
    made: list[Client] = []

    def make(port: int, service_name: str = "billing-agent", *, timeout_s: float | None = None) -> Client:
        """A batch client (``send()`` is one Export call); ``timeout_s``: the exporter's deadline, retries included."""
        client = Client(port, service_name, batch=True)
        if timeout_s is not None:
            client.exporter.shutdown(timeout_millis=100)
            client.exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", insecure=True, timeout=timeout_s)
        made.append(client)
        return client

    yield make
    for client in made:
        client.shutdown()


def metric(reader: InMemoryMetricReader, name: str, attributes: dict[str, Any] | None = None) -> float | None:
    """The sum of the data points of ``name`` whose attributes include ``attributes``; None when there is none."""
    data = reader.get_metrics_data()
    total = None
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name != name:
                    continue
                for point in m.data.data_points:
                    if all(point.attributes.get(k) == v for k, v in (attributes or {}).items()):
                        total = (total or 0) + point.value
    return total


def logged(caplog, *parts: str, level: int = logging.WARNING) -> list[str]:
    """Messages at ``level`` or above containing every one of ``parts``."""
    return [r.getMessage() for r in caplog.records if r.levelno >= level and all(p in r.getMessage() for p in parts)]


def send_traces(client: Client, count: int, *, review: bool = True) -> list[str]:
    """``count`` agent turns in one Export call, acknowledged; their trace ids."""
    ids = [agent_trace(client, review=review) for _ in range(count)]
    assert client.send() is OK
    return ids


def span_ids(client: Client) -> list[str]:
    return [format(s.context.span_id, "016x") for s in client.sent.get_finished_spans()]


# -- the upstream ------------------------------------------------------------------------------------------


class RefusingUpstream(RecordingUpstream):
    """A backend shedding load: every call is answered UNAVAILABLE (no RetryInfo) until ``refusing`` is cleared."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = threading.Event()
        self.refusing.set()
        self.refused = 0

    def Export(self, request, context):
        if self.refusing.is_set():
            with self._lock:
                self.refused += 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "backend overloaded, try later")
        return super().Export(request, context)


class SlowUpstream(RecordingUpstream):
    """A backend that answers its first ``slow_calls`` calls after ``delay_s`` (past the caller's deadline) and
    stores them all the same, as a backend that commits late does."""

    def __init__(self, slow_calls: int, delay_s: float) -> None:
        super().__init__()
        self.slow_calls, self.delay_s = slow_calls, delay_s
        self.calls = 0
        self.late_spans = 0  # spans stored from calls answered past the deadline

    def Export(self, request, context):
        with self._lock:
            self.calls += 1
            slow = self.calls <= self.slow_calls
        if slow:
            time.sleep(self.delay_s)
            with self._lock:
                self.late_spans += request_span_count(request)
        return super().Export(request, context)


def test_upstream_refusing_loses_nothing_within_the_queue_bound(start_service, clients, caplog):
    caplog.set_level(logging.INFO)
    up = RefusingUpstream()
    up.start()
    try:
        service, reader = start_service(up.port, forward_queue_spans=120)
        forwarder = service.forwarders[0]
        at_upstream = {"tracefence.upstream": forwarder.target.name}
        client = clients(service.port)
        traces = send_traces(client, 5, review=True) + send_traces(client, 5, review=False)
        # Kept: all 30 spans wait in the queue (bound 120) while every attempt is refused.
        wait_for(lambda: up.refused >= 2 and forwarder.failures >= 2 and forwarder.depth == 30, what="two refused attempts with 30 spans queued")
        assert up.spans() == []
        failures = metric(reader, "tracefence.forward.failures", at_upstream)
        assert failures is not None and 2 <= failures <= forwarder.failures
        assert metric(reader, "tracefence.forward.queue.size", at_upstream) == 30
        assert metric(reader, "tracefence.forward.dropped") is None
        # The operator sees our warning per failed attempt: nothing is lost yet, what waits, when it is tried
        # again. (The exporter logs "Failed to export span batch" too, but its DuplicateFilter drops a message
        # seen in the last 20 s window process-wide, so that line cannot be relied on, nor asserted here.)
        assert logged(caplog, f"spans to {forwarder.target.name} failed (1 in a row); they stay queued (", "/120 spans) and are tried again in 0.5s")
        # The forwarder counts a failure before it logs it: under load the second line may come a moment later.
        wait_for(lambda: logged(caplog, "failed (2 in a row)", "tried again in 1.0s"), what="the second failure's warning")

        up.refusing.clear()  # the backend accepts again
        received = up.wait_spans(30, timeout=PAUSE_AFTER_FAILURE_S[1])
        wait_for(lambda: forwarder.depth == 0 and forwarder.sent_spans == 30, what="the queue drained")
        # Refused calls were never stored: each span exactly once.
        assert sorted(r.span_id for r in up.spans()) == sorted(span_ids(client))
        assert {r.trace_id for r in received} == set(traces)
        assert all(r.tf["tracefence.replay.class"] in ("review", "injected") for r in received)
        assert metric(reader, "tracefence.forward.failures", at_upstream) == forwarder.failures
        assert metric(reader, "tracefence.forward.queue.size", at_upstream) == 0
        assert metric(reader, "tracefence.forward.dropped") is None and forwarder.dropped_spans == 0
        assert logged(caplog, f"forwarding to {forwarder.target.name} works again after {forwarder.failures} failed attempt(s)")
    finally:
        up.stop()


def test_upstream_slow_is_retried_and_a_late_answer_is_an_at_least_once_duplicate(start_service, clients, caplog):
    # What happens: the first two calls take 1.5 s against a 1 s deadline. The forwarder's exporter gets
    # DEADLINE_EXCEEDED (its own retry cannot fit in the deadline), counts a failure, and the same batch is
    # sent again after 0.5 s, then 1 s: the third call answers in time. The backend stored the two late calls
    # too, so the spans of the batch at the head of the queue arrive three times: OTLP gives at-least-once
    # delivery, and a timed-out request is an unknown outcome that must be sent again rather than lost. The
    # copies are identical, span id for span id (backends deduplicate on it); there is never more than one
    # copy per failed attempt plus the delivered one, and a span that was not in a timed-out call arrives once.
    caplog.set_level(logging.INFO)
    up = SlowUpstream(slow_calls=2, delay_s=UPSTREAM_TIMEOUT_S + 0.5)
    up.start()
    try:
        service, reader = start_service(up.port)
        forwarder = service.forwarders[0]
        client = clients(service.port)
        traces = send_traces(client, 2)
        wait_for(
            lambda: forwarder.sent_spans == 6 and forwarder.depth == 0 and len(up.spans()) == 6 + up.late_spans and up.calls >= 3,
            timeout=15,
            what="every span delivered in time once, and the late copies stored",
        )
        time.sleep(UPSTREAM_TIMEOUT_S)  # nothing more is coming
        assert forwarder.failures == 2 and up.late_spans > 0
        received = up.spans()
        assert len(received) == forwarder.sent_spans + up.late_spans  # the only extra copies are the late-stored calls
        copies = Counter(r.span_id for r in received)
        assert set(copies) == set(span_ids(client)) and {r.trace_id for r in received} == set(traces)
        assert max(copies.values()) <= 1 + forwarder.failures
        assert sum(n - 1 for n in copies.values()) == up.late_spans
        first = {}
        for r in received:  # a duplicate is the same span, annotations included
            assert first.setdefault(r.span_id, r.span) == r.span
        assert metric(reader, "tracefence.forward.failures", {"tracefence.upstream": forwarder.target.name}) == 2
        assert metric(reader, "tracefence.forward.dropped") is None
        assert len(logged(caplog, "in a row); they stay queued")) == 2
        assert logged(caplog, "works again after 2 failed attempt(s)")
    finally:
        up.stop()


def most_attempts(seconds: float) -> int:
    """The most forward attempts that fit in ``seconds`` from the first failed one, pausing as the forwarder does."""
    elapsed, pause, attempts = 0.0, PAUSE_AFTER_FAILURE_S[0], 1
    while elapsed + pause <= seconds:
        elapsed, pause, attempts = elapsed + pause, min(pause * 2, PAUSE_AFTER_FAILURE_S[1]), attempts + 1
    return attempts


def test_upstream_gone_for_a_while_then_back_on_the_same_port_loses_nothing(start_service, clients, caplog):
    caplog.set_level(logging.INFO)
    port = free_port()
    first = RecordingUpstream()
    first.start(port)
    second = RecordingUpstream()
    try:
        service, reader = start_service(port)
        forwarder = service.forwarders[0]
        at_upstream = {"tracefence.upstream": forwarder.target.name}
        client = clients(service.port)
        send_traces(client, 2)
        first.wait_spans(6)
        wait_for(lambda: forwarder.sent_spans == 6 and forwarder.depth == 0, what="the first traces forwarded")
        first.stop()  # the port is closed: connection refused
        gone_at = time.monotonic()
        during = 0
        while time.monotonic() - gone_at < GONE_S:  # the agents keep sending: every Export is acknowledged
            send_traces(client, 1, review=during % 2 == 0)
            during += 1
            time.sleep(0.25)
        # Kept: everything decided meanwhile waits in the queue; counted: the failed attempts.
        wait_for(lambda: forwarder.depth == 3 * during, what=f"{3 * during} spans queued (have {forwarder.depth})")
        # Tried again after each pause, not on every new batch (which would hammer a refusing upstream).
        assert 1 <= forwarder.failures <= most_attempts(time.monotonic() - gone_at), forwarder.failures
        assert metric(reader, "tracefence.forward.queue.size", at_upstream) == 3 * during
        assert metric(reader, "tracefence.forward.failures", at_upstream) >= 1
        assert logged(caplog, "in a row); they stay queued")
        second.start(port)  # back, on the same port
        # The next attempt comes within the pause reached so far (at most PAUSE_AFTER_FAILURE_S[1]).
        second.wait_spans(3 * during, timeout=min(GONE_S, PAUSE_AFTER_FAILURE_S[1]) + 10)
        wait_for(lambda: forwarder.depth == 0, what="the queue drained")
        time.sleep(0.2)
        delivered = [r.span_id for r in first.spans() + second.spans()]
        assert sorted(delivered) == sorted(span_ids(client))  # every span, once
        assert (forwarder.sent_spans, forwarder.dropped_spans) == (6 + 3 * during, 0)
        assert metric(reader, "tracefence.forward.dropped") is None
        assert metric(reader, "tracefence.forward.failures", at_upstream) == forwarder.failures
        assert logged(caplog, f"works again after {forwarder.failures} failed attempt(s)")
    finally:
        first.stop()
        second.stop()


def test_upstream_back_during_a_long_pause_is_tried_at_once_by_the_shutdown_drain(start_service, clients, caplog, monkeypatch):
    # The pause after a failure is 30 s, far longer than this drain deadline of 8 s: the drain must wake the
    # forwarder rather than let it sleep through the shutdown with the upstream back. Waited on as conditions
    # (a failed attempt, the worker pausing), not on timings: under load the pause once ran out on its own
    # before the stop began, and the drain's first attempt can fail while gRPC is still reconnecting (its
    # retries then pause DRAIN_RETRY_PAUSE_S, not the backoff), so the drain is 8 s, far from the pause (issue 30).
    monkeypatch.setattr(forward_module, "PAUSE_AFTER_FAILURE_S", (30.0, 30.0))
    caplog.set_level(logging.INFO)
    port = free_port()
    service, reader = start_service(port, drain_timeout_s=8)
    forwarder = service.forwarders[0]
    client = clients(service.port)
    send_traces(client, 2)
    wait_for(lambda: forwarder.failures >= 1 and not forwarder._busy, timeout=30, what="a failed attempt, and the worker pausing")
    back = RecordingUpstream()
    back.start(port)
    try:
        started = time.monotonic()
        service.stop(grace_s=0)
        assert time.monotonic() - started < 30  # it did not sleep through the pause
        assert sorted(r.span_id for r in back.spans()) == sorted(span_ids(client))
        stopped = [r for r in caplog.records if r.getMessage() == "tracefence serve stopped"]
        assert [(r.forwarded_all, r.dropped_spans) for r in stopped] == [(True, 0)]
    finally:
        back.stop()


def test_a_send_that_delivers_after_the_drain_deadline_is_reported_forwarded(upstream, caplog):
    # The drain's deadline passes while a send is under way; that send then succeeds. The report must say
    # what happened (everything forwarded), not what was true at the deadline.
    caplog.set_level(logging.INFO)
    slow = SlowUpstream(slow_calls=1, delay_s=0.8)
    slow.start()
    forwarder = Forwarder(UpstreamTarget(UpstreamSettings(endpoint=f"http://127.0.0.1:{slow.port}", timeout_s=3), BIG), 100)
    try:
        tid = bytes.fromhex("5a" * 16)
        forwarder.put(raw_request(*(raw_span(tid, bytes([0, 0, 0, 0, 0, 0, 0, i])) for i in (1, 2))), 2)
        wait_for(lambda: slow.calls == 1, what="the send under way")
        assert forwarder.drain(0.2) is True
        assert sorted(r.span_id for r in slow.spans()) == ["0000000000000001", "0000000000000002"]
        assert (forwarder.sent_spans, forwarder.depth) == (2, 0)
        assert not logged(caplog, "were not forwarded")
    finally:
        slow.stop()


# -- the review database -----------------------------------------------------------------------------------


def stored(db: Path) -> set[str]:
    """Trace ids committed in the review database, read through a connection of our own (WAL: readers never wait)."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=0)
    try:
        return {row[0] for row in conn.execute("SELECT trace_id FROM review_items")}
    finally:
        conn.close()


def review_counts(reader: InMemoryMetricReader) -> dict[str, float | None]:
    return {o: metric(reader, "tracefence.review.writes", {"outcome": o}) for o in ("ok", "failed", "dropped")}


def check_review_fault(
    service: TraceFenceService,
    reader: InMemoryMetricReader,
    upstream: RecordingUpstream,
    client: Client,
    caplog,
    db: Path,
    *,
    fault: Callable[[], None],
    repair: Callable[[], None],
    error_text: tuple[str, ...],
    forwarded_within_s: float,
) -> None:
    """The common course of a review-database fault: before, during, after."""
    before = send_traces(client, 1)  # written as usual
    upstream.wait_spans(3)
    assert stored(db) == set(before)
    fault()
    try:
        started = time.monotonic()
        first = send_traces(client, 1)
        time.sleep(0.3)  # its write is failing (or waiting on the lock) now
        rest = send_traces(client, 1) + send_traces(client, 1, review=False)
        # Kept: the spans flow on, annotated; the data path waited on the database at most once.
        received = upstream.wait_spans(12, timeout=forwarded_within_s + 5)
        took = time.monotonic() - started
        assert took < forwarded_within_s, f"spans forwarded after {took:.1f}s"
        assert {r.trace_id for r in received} == set(before + first + rest)
        failing = first + rest[:1]
        assert stored(db) == set(before)  # not written yet...
        # ...but held, counted and logged.
        assert review_counts(reader) == {"ok": 1, "failed": 2, "dropped": None}
        assert metric(reader, "tracefence.review.pending") == 2
        assert metric(reader, "tracefence.errors", {"error.type": "review_write"}) >= 1
        messages = logged(caplog, f"review item for trace {first[0]} not written", "held in memory", level=logging.ERROR)
        assert messages and any(text in messages[0] for text in error_text), messages
    finally:
        repair()
    # Writable again: the held items are written (the retry pause is at most 5 s), then new ones at once.
    wait_for(lambda: stored(db) == set(before + failing), timeout=BUSY_TIMEOUT_S + 10, what="the held review items written")
    # The items are in the file a moment before the writer counts them as no longer pending.
    wait_for(lambda: metric(reader, "tracefence.review.pending") == 0, timeout=5, what="no review item pending")
    assert review_counts(reader) == {"ok": 3, "failed": 2, "dropped": None}
    # Logged by the retry thread just after it empties the held items (and the gauge): wait for it under load. The
    # two may be written in one retry or in two (the second held after the first retry began): the counts add up.
    def recovered() -> int:
        lines = logged(caplog, "the review queue takes writes again: wrote ")
        return sum(int(re.search(r"wrote (\d+) held item", line).group(1)) for line in lines)

    wait_for(lambda: recovered() == 2, timeout=5, what="the recovery logged")
    after = send_traces(client, 1)
    upstream.wait_spans(15)  # the item is written before its spans are handed on
    assert stored(db) == set(before + failing + after)
    with SQLiteReviewStore(db, create=False) as store:
        items = {i.trace_id: i for i in store.list(page_size=100)[0]}
    for trace_id in failing:
        item = items[trace_id]
        assert (item.plan.replay_class, item.state, item.service_name) == (pb.REPLAY_CLASS_REVIEW, pb.REVIEW_STATE_OPEN, "billing-agent")
        assert [d.step.tool for d in item.plan.steps] == ["accounts.get_balance", "payments.charge"]
    assert review_counts(reader)["dropped"] is None


def test_review_db_locked_past_the_busy_timeout(start_service, upstream, clients, caplog, tmp_path):
    caplog.set_level(logging.INFO)
    db = tmp_path / "review.db"
    service, reader = start_service(upstream.port, review_db=db)
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)  # another process's writer, say the review CLI

    def lock() -> None:
        holder.execute("BEGIN EXCLUSIVE")

    def unlock() -> None:  # held for longer than the busy timeout by then
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()

    # The first failing write waits the busy timeout; the items after it queue behind it without waiting.
    check_review_fault(
        service, reader, upstream, clients(service.port), caplog, db,
        fault=lock, repair=unlock, error_text=("database is locked",), forwarded_within_s=BUSY_TIMEOUT_S + 2.5,
    )


def _chattr_works(directory: Path) -> bool:
    probe = directory / "chattr-probe"
    probe.write_text("x")
    try:
        return subprocess.run(["chattr", "+i", str(probe)], capture_output=True, timeout=10).returncode == 0
    except OSError:
        return False
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True, timeout=10)
        probe.unlink()


def _immutable(db: Path, on: bool) -> None:
    # The database and its WAL, not the -shm index: SQLite maps that one, and a write to a mapped immutable
    # file kills the process with SIGBUS (a fault no code of ours can catch; keep -shm writable).
    files = [str(p) for p in (db, Path(f"{db}-wal")) if p.exists()]
    subprocess.run(["chattr", "+i" if on else "-i", *files], check=True, capture_output=True, timeout=10)


def test_review_db_read_only(start_service, upstream, clients, caplog, tmp_path):
    # Read-only for root too: the immutable attribute (chattr +i). Permission bits do not stop root, and a
    # read-only remount is refused while the service holds the file open for writing.
    if not _chattr_works(tmp_path):
        pytest.skip("chattr +i is not available on this filesystem")
    caplog.set_level(logging.INFO)
    db = tmp_path / "review.db"
    service, reader = start_service(upstream.port, review_db=db)
    try:
        check_review_fault(
            service, reader, upstream, clients(service.port), caplog, db,
            fault=lambda: _immutable(db, True), repair=lambda: _immutable(db, False),
            error_text=("disk I/O error", "readonly"), forwarded_within_s=3,
        )
    finally:
        _immutable(db, False)


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs, unmounted afterwards; skips where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mount)], capture_output=True, text=True, timeout=10)
    except OSError as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True, timeout=10).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=10)


def _fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        block = b"\0" * 4096
        while True:
            os.write(fd, block)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)


def test_review_db_on_a_full_disk(start_service, upstream, clients, caplog, small_disk):
    caplog.set_level(logging.INFO)
    db = small_disk / "review.db"
    filler = small_disk / "filler"
    # A 1 MiB disk: under the 8 MiB review_db_min_free_bytes a start refuses (DECISIONS 511); this one takes less.
    service, reader = start_service(upstream.port, review_db=db, top={"review_db_min_free_bytes": 256 * 1024})
    try:
        check_review_fault(
            service, reader, upstream, clients(service.port), caplog, db,
            fault=lambda: _fill(filler), repair=lambda: filler.unlink(missing_ok=True),
            error_text=("database or disk is full",), forwarded_within_s=3,
        )
    finally:
        service.stop(grace_s=0)  # closes the store before the fixture unmounts the disk


def test_review_items_unwritable_until_shutdown_or_past_the_bound_are_counted_and_logged_as_lost(start_service, upstream, clients, caplog, tmp_path):
    if not _chattr_works(tmp_path):
        pytest.skip("chattr +i is not available on this filesystem")
    caplog.set_level(logging.INFO)
    db = tmp_path / "review.db"
    service, reader = start_service(upstream.port, review_db=db, top={"max_traces": 2})
    client = clients(service.port)
    _immutable(db, True)
    try:
        # One Export call: once the hold is full a service refuses further calls (DECISIONS 511); the traces of
        # a call admitted before take it past its bound, up to twice the bound (DECISIONS 977).
        traces = send_traces(client, 5)
        received = upstream.wait_spans(15)
        # Held at most twice max_traces: the oldest is pushed out, counted and logged with its trace id.
        wait_for(lambda: review_counts(reader)["dropped"] == 1, what="one item dropped past twice the bound")
        assert logged(caplog, "1 review item(s) held past the bound of 4 are lost: traces " + traces[0], level=logging.ERROR)
        assert metric(reader, "tracefence.review.pending") == 4
        service.stop(grace_s=0)  # still read-only: the last try fails, the four held items are lost
        assert review_counts(reader) == {"ok": None, "failed": 5, "dropped": 5}
        assert metric(reader, "tracefence.errors", {"error.type": "review_dropped"}) == 2
        (line,) = logged(caplog, "shutdown: 4 review item(s) could not be written and are lost: traces ", level=logging.ERROR)
        assert set(line.split("traces ", 1)[1].split(", ")) == set(traces[1:])
    finally:
        _immutable(db, False)
    assert stored(db) == set()
    # The spans themselves went on, marked for review: the operator can still find those traces upstream.
    assert {r.trace_id for r in received if r.tf["tracefence.replay.class"] == "review"} == set(traces)


# -- the process ---------------------------------------------------------------------------------------------


def test_sigkill_while_writing_review_items_keeps_every_committed_item(tmp_path, upstream, clients):
    # "Acknowledged", for a review item: its upsert committed (SQLiteReviewStore.upsert returned; with WAL
    # and synchronous=FULL the commit is in the -wal file, fsynced). The test sees two sets of such items
    # before the kill: those another connection read back from the file (only committed rows are visible to
    # it), and those whose spans reached the upstream annotated `review` (the service writes a trace's item
    # before it hands the spans on). Every one of them must be in the file after SIGKILL.
    db = tmp_path / "review.db"
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{upstream.port}", "--review-db", str(db), "--decision-wait-ms", "0",
        cwd=tmp_path,
    )
    stop = threading.Event()
    sender = None
    sent: list[str] = []
    try:
        port = serve.log("tracefence serve listening")["port"]
        client = clients(port, timeout_s=2)

        def send_loop() -> None:
            while not stop.is_set():
                sent.extend(agent_trace(client, review=True) for _ in range(5))
                if client.send() is not OK:
                    return

        sender = threading.Thread(target=send_loop, daemon=True)
        sender.start()
        seen: set[str] = set()
        wait_for(lambda: seen.update(stored(db)) or len(seen) >= 40, timeout=20, interval=0.05, what="40 review items committed")
        forwarded = {r.trace_id for r in upstream.spans() if r.tf.get("tracefence.replay.class") == "review"}
        assert serve.proc.poll() is None
        serve.proc.send_signal(signal.SIGKILL)  # the client is still sending: writes are under way
        assert serve.proc.wait(timeout=10) == -signal.SIGKILL
        stop.set()
        sender.join(timeout=10)
        assert not sender.is_alive()
    finally:
        stop.set()
        serve.stop()
    assert Path(f"{db}-wal").exists()  # killed: nothing was checkpointed or closed
    with SQLiteReviewStore(db, create=False) as store:  # it opens (recovering the WAL)
        items, token = store.list(page_size=1000)
    assert token == ""
    kept = {i.trace_id for i in items}
    assert seen <= kept and forwarded <= kept, (seen - kept, forwarded - kept)
    assert kept <= set(sent)
    assert all((i.plan.replay_class, i.state, i.service_name) == (pb.REPLAY_CLASS_REVIEW, pb.REVIEW_STATE_OPEN, "billing-agent") for i in items)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


class AgentLoad:
    """Three real OTLP exporters (the ``clients`` fixture) sending to ``tracefence serve`` in a loop until stopped.
    Each Export carries a complete trace and one whose root never comes (held until a shutdown decides it).
    ``acked[i]``: span ids (hex) of client ``i`` whose Export returned OK; ``attempted``: every span id sent.
    A client stops at its first refused call."""

    def __init__(self, clients, count: int = 3) -> None:
        self._clients = clients
        self._stop = threading.Event()
        self.acked: list[set[str]] = [set() for _ in range(count)]
        self.attempted: set[str] = set()
        self._threads = [threading.Thread(target=self._send_loop, args=(i,), daemon=True) for i in range(count)]
        self._port = 0

    def start(self, port: int) -> None:
        self._port = port
        for thread in self._threads:
            thread.start()

    def _send_loop(self, index: int) -> None:
        client = self._clients(self._port, f"agent-{index}", timeout_s=3)
        done = 0
        while not self._stop.is_set():
            agent_trace(client, review=index % 2 == 0)
            agent_trace(client, review=index % 2 == 1, end_root=False)  # held: its root never comes
            batch = [format(s.context.span_id, "016x") for s in client.sent.get_finished_spans()[done:]]
            done += len(batch)
            self.attempted.update(batch)
            if client.send() is not OK:
                return
            self.acked[index].update(batch)

    def wait_acknowledged(self, least: int, timeout_s: float) -> None:
        wait_for(lambda: all(len(a) >= least for a in self.acked), timeout=timeout_s, what="every client acknowledged a while")

    def stop(self, *, check: bool = True) -> None:
        """Stop the loops and join the started ones; ``check``: assert they all ended."""
        self._stop.set()
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(timeout=15 if check else 1)
        if check:
            assert not any(thread.is_alive() for thread in self._threads)


def test_sigterm_under_load_forwards_every_acknowledged_span(tmp_path, upstream, clients):
    # Several agents send while SIGTERM arrives. Each Export carries a complete trace (decided at once) and
    # one whose root never comes (held until the shutdown decides it, partial). Acknowledged = Export
    # returned OK; refused calls (UNAVAILABLE while shutting down, then connection refused) are the
    # client's to keep or drop, never the service's.
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{upstream.port}", "--review-db", str(tmp_path / "review.db"),
        "--decision-wait-ms", "0", "--max-wait-ms", "600000",
        cwd=tmp_path,
    )
    load = AgentLoad(clients)
    try:
        load.start(serve.log("tracefence serve listening")["port"])
        load.wait_acknowledged(60, timeout_s=20)
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0, serve.stderr()
        load.stop()
    finally:
        load.stop(check=False)
        serve.stop()
    acked, attempted = load.acked, load.attempted
    received = upstream.spans()
    ids = Counter(r.span_id for r in received)
    every_acked = set().union(*acked)
    assert every_acked <= set(ids), f"{len(every_acked - set(ids))} acknowledged spans never reached the upstream"
    assert set(ids) <= attempted and max(ids.values()) == 1  # nothing invented, nothing twice
    held = {r.trace_id for r in received if r.tf.get("tracefence.trace.partial") is True}
    assert held and all(len(upstream.trace(t)) == 2 for t in held)
    assert serve.log("stopping", timeout=1)["signal"] == "SIGTERM"
    stopped = serve.log("tracefence serve stopped", timeout=1)
    assert (stopped["decided_at_shutdown"], stopped["forwarded_all"], stopped["dropped_spans"]) == (len(held), True, 0)
    assert "Traceback" not in serve.stderr()


def test_sigterm_with_more_held_than_it_can_plan_in_time_hands_the_rest_on_as_review(tmp_path, upstream, clients):
    """Trial defect 9: at SIGTERM under load, what could not be planned before the deadline (traces held, and
    requests acknowledged and never read) was dropped: 85 % of what was acknowledged, with the review items of
    its timed-out writes. Now it is handed on without a plan, fail closed: every span ``review``, partial, with
    ``tracefence.trace.reasons = ["not_planned_at_shutdown"]``, and a review item for each of its traces. The
    real SDK exporter against a real ``tracefence serve``; a decision wait of ten minutes holds every trace until
    the stop, 3 s for 2,700 traces with a review write each (8,100 spans: just under the 8,192 spans that
    back-pressure lets wait before any send is measured, DECISIONS 195), which plans some and hands the rest on,
    or (a quiet machine, since issue 10's sixth round) plans them all. 3 s, not 1: under load (CI, other tests
    beside it) the items of 2,700 traces take half a second to write, and a stop of 1 s lost them, logged (DECISIONS 690)."""
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{upstream.port}", "--review-db", str(tmp_path / "review.db"),
        "--decision-wait-ms", "600000", "--max-wait-ms", "600000",
        cwd=tmp_path, OTEL_TRACEFENCE_SERVICE__DRAIN_TIMEOUT_S="3",
    )  # fmt: skip
    try:
        client = clients(serve.log("tracefence serve listening")["port"])
        traces = [trace for _ in range(18) for trace in send_traces(client, 150)]  # acknowledged, every one
        acked = set(span_ids(client))
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0, serve.stderr()
    finally:
        serve.stop()
    received = upstream.spans()
    assert Counter(r.span_id for r in received) == Counter(acked)  # every acknowledged span, once
    unplanned = {r.trace_id for r in received if r.tf.get("tracefence.trace.reasons") == ["not_planned_at_shutdown"]}
    # How many the stop plans in its time depends on the machine: on a quiet one this stop's engine and batched
    # review writes (DECISIONS 221) plan all 2,700, under load some are handed on unplanned. Either way nothing
    # acknowledged is lost and every trace fails closed with a review item; the unplanned path alone is covered
    # whatever the machine by test_stop_is_bounded_when_reading_the_intake_is_stuck_and_hands_the_unread_spans_on_as_review.
    for r in received:
        assert r.tf["tracefence.replay.class"] == "review"
        if r.trace_id in unplanned:  # every span of such a trace, tool span or not
            assert (r.tf["tracefence.trace.partial"], "tracefence.step.decision" in r.tf) == (True, False)
        else:  # planned as ever: the timed-out write is what holds it
            assert "tracefence.trace.reasons" not in r.tf
            if r.tf.get("tracefence.step.effect") == "write":
                assert "write_timeout" in r.tf["tracefence.step.reasons"]
    assert stored(tmp_path / "review.db") == set(traces)  # a review item for each, planned or not
    stopped = serve.log("tracefence serve stopped", timeout=1)
    assert (stopped["forwarded_all"], stopped["dropped_spans"]) == (True, 0)
    handed = [e["message"] for e in serve.logs() if "handed on without a plan" in e.get("message", "")]
    assert handed == ([f"tracefence service: {len(unplanned)} trace(s) ({3 * len(unplanned)} spans) handed on without a plan, as review (not_planned_at_shutdown)"]
                      if unplanned else [])  # fmt: skip
    assert "Traceback" not in serve.stderr()


def test_review_items_a_stop_cannot_write_to_a_locked_database_are_logged_by_trace(tmp_path, upstream, clients):
    """s21 trial 7 (DECISIONS 209): another process holds the review database (``BEGIN EXCLUSIVE``) at SIGTERM; the
    stop's review write waits on it past the stop's time, and its items were lost with no line saying so. Now one
    error line gives how many and their trace ids. The real SDK exporter against a real ``tracefence serve``."""
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{upstream.port}", "--review-db", str(tmp_path / "review.db"),
        "--decision-wait-ms", "600000", "--max-wait-ms", "600000",
        cwd=tmp_path, OTEL_TRACEFENCE_SERVICE__DRAIN_TIMEOUT_S="3",
    )  # fmt: skip
    lock = None
    try:
        client = clients(serve.log("tracefence serve listening")["port"])
        traces = send_traces(client, 20)  # held (a ten-minute decision wait), each holding a timed-out write
        time.sleep(0.5)  # read from the intake
        lock = sqlite3.connect(tmp_path / "review.db", timeout=0, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0, serve.stderr()
    finally:
        if lock is not None:
            lock.rollback()
            lock.close()
        serve.stop()
    assert stored(tmp_path / "review.db") == set()
    owed = [e["message"] for e in serve.logs() if "review item(s) were not written when the time ran out" in e.get("message", "")]
    assert len(owed) == 1, serve.stderr()
    head, _, listed = owed[0].partition("; they are lost: traces ")
    assert head == ("shutdown: 20 review item(s) were not written when the time ran out (the review store did not answer in time: "
                    "a database locked by another process?)")
    assert sorted(listed.split(", ")) == sorted(traces)
    assert "Traceback" not in serve.stderr()


# -- a poison batch (issue 9) ------------------------------------------------------------------------------

FOUR_MIB = 4 * 1024 * 1024


def poison_trace(client: Client, size: int = 5 * 1000 * 1000) -> str:
    """An agent turn whose tool span carries ``size`` bytes of result: larger than the upstream takes."""
    from opentelemetry import trace

    root = client.tracer.start_span("invoke_agent uploader", attributes={"gen_ai.operation.name": "invoke_agent"})
    with trace.use_span(root, end_on_exit=False):
        with client.tool("files.upload", effect="write", idempotency_key="up-1", arguments={"name": "big.bin"}, call_id="call-upload") as call:
            call.span.set_attribute("upload.body", "p" * size)
    root.end()
    return format(root.get_span_context().trace_id, "032x")


@pytest.mark.parametrize("configured_limit", [64 * 1024 * 1024, FOUR_MIB], ids=["limit-set-too-high", "limit-right"])
def test_a_poison_span_between_good_traces_is_dropped_counted_and_logged_and_every_good_span_delivered(
    start_service, clients, caplog, configured_limit
):
    # The upstream takes 4 MiB (gRPC's default, the Collector's). One 5 MB span sits between good traces.
    # limit-set-too-high: the service believes the upstream takes 64 MiB, sends one batch, is refused with
    # RESOURCE_EXHAUSTED, and splits down to the single poison span. limit-right: the batch is sized under
    # 4 MiB up front and the poison span is dropped before any attempt. Either way nothing blocks the queue.
    caplog.set_level(logging.INFO)
    up = RecordingUpstream(max_receive_bytes=FOUR_MIB)
    up.start()
    try:
        service, reader = start_service(up.port, upstream={"max_message_bytes": configured_limit})
        forwarder = service.forwarders[0]
        client = clients(service.port)
        before = [agent_trace(client) for _ in range(5)]
        poison = poison_trace(client)
        after = [agent_trace(client, review=False) for _ in range(5)]
        started = time.monotonic()
        assert client.send() is OK
        good = [s for s in span_ids(client)]
        poison_span = next(format(s.context.span_id, "016x") for s in client.sent.get_finished_spans() if s.name == "execute_tool files.upload")
        good.remove(poison_span)
        up.wait_spans(len(good), timeout=10)
        took = time.monotonic() - started
        wait_for(lambda: forwarder.dropped_spans == 1 and forwarder.depth == 0, what="the poison span dropped")
        delivered = Counter(r.span_id for r in up.spans())
        assert sorted(delivered) == sorted(good) and set(delivered.values()) == {1}  # every good span, once
        assert {r.trace_id for r in up.spans()} == set(before + [poison] + after)  # the poison's trace-mates too
        assert forwarder.sent_spans == len(good) and forwarder.failures == 0
        assert metric(reader, "tracefence.forward.dropped", {"reason": "too_large", "tracefence.upstream": forwarder.target.name}) == 1
        lines = logged(caplog, "dropped 1 span(s)", f"span {poison_span} of trace {poison}", "can never be delivered", level=logging.ERROR)
        assert len(lines) == 1, lines
        if configured_limit > FOUR_MIB:
            # the upstream itself refused it (gRPC: "Received message larger than max")
            assert logged(caplog, "as too large: sent again in halves", "RESOURCE_EXHAUSTED", "Received message larger than max", "set this upstream's max_message_bytes")
        else:
            assert not logged(caplog, "sent again in halves")  # sized under the limit up front: no refused call
        assert took < 8, f"good spans delivered after {took:.1f}s"
        service.stop(grace_s=0)
        stopped = [r for r in caplog.records if r.getMessage() == "tracefence serve stopped"]
        assert [(r.forwarded_all, r.dropped_spans) for r in stopped] == [(True, 1)]
    finally:
        up.stop()


class RejectingUpstream(RecordingUpstream):
    """A backend answering the first call with ``code`` (no RetryInfo), then storing as usual."""

    def __init__(self, code: grpc.StatusCode, retry_info_s: float | None = None) -> None:
        super().__init__()
        self.code, self.retry_info_s, self.calls = code, retry_info_s, 0

    def Export(self, request, context):
        with self._lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            if self.retry_info_s is not None:
                from otel_tracefence.service.receiver import _Status  # the same trailer layout as our receiver's
                from google.protobuf import duration_pb2
                from google.rpc import error_details_pb2

                delay = duration_pb2.Duration()
                delay.FromNanoseconds(int(self.retry_info_s * 1e9))
                info = error_details_pb2.RetryInfo(retry_delay=delay).SerializeToString()
                context.abort_with_status(_Status(self.code, "quota exceeded", (("google.rpc.retryinfo-bin", info),)))
            context.abort(self.code, "refused by the test")
        return super().Export(request, context)


@pytest.mark.parametrize(
    "code, retry_info_s, kept",
    [
        (grpc.StatusCode.INVALID_ARGUMENT, None, False),  # permanent: dropped, counted, the queue moves on
        (grpc.StatusCode.PERMISSION_DENIED, None, False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 0.2, True),  # with RetryInfo: retryable, after the delay
        (grpc.StatusCode.ABORTED, None, True),  # retryable
    ],
)
def test_upstream_codes_follow_the_otlp_table(start_service, clients, caplog, code, retry_info_s, kept):
    caplog.set_level(logging.INFO)
    up = RejectingUpstream(code, retry_info_s)
    up.start()
    try:
        service, reader = start_service(up.port)
        forwarder = service.forwarders[0]
        client = clients(service.port)
        first = send_traces(client, 1)
        wait_for(lambda: up.calls >= 1 and not forwarder._busy, what="the first call answered")
        second = send_traces(client, 1)
        up.wait_spans(6 if kept else 3, timeout=8)
        wait_for(lambda: forwarder.depth == 0, what="the queue empty")
        assert {r.trace_id for r in up.spans()} == set(first + second if kept else second)
        if kept:
            assert forwarder.dropped_spans == 0 and metric(reader, "tracefence.forward.dropped") is None
        else:
            assert forwarder.dropped_spans == 3
            assert metric(reader, "tracefence.forward.dropped", {"reason": "rejected"}) == 3
            assert logged(caplog, "dropped 3 span(s)", code.name, "permanent", first[0], level=logging.ERROR)
    finally:
        up.stop()


def test_spans_not_forwarded_at_shutdown_are_counted_in_the_stop_line(start_service, clients, caplog):
    caplog.set_level(logging.INFO)
    port = free_port()  # nobody listens: every attempt fails, retryable
    service, reader = start_service(port, drain_timeout_s=0.5)
    forwarder = service.forwarders[0]
    client = clients(service.port)
    traces = send_traces(client, 3)
    wait_for(lambda: forwarder.depth == 9, what="9 spans queued")
    started = time.monotonic()
    service.stop(grace_s=0)
    assert time.monotonic() - started < 0.5 + UPSTREAM_TIMEOUT_S + 1.5
    stopped = [r for r in caplog.records if r.getMessage() == "tracefence serve stopped"]
    assert [(r.forwarded_all, r.dropped_spans) for r in stopped] == [(False, 9)]
    assert metric(reader, "tracefence.forward.dropped", {"reason": "shutdown"}) == 9
    assert logged(caplog, "dropped 9 span(s)", "shutdown", traces[0], level=logging.ERROR)


# -- the review database deleted or replaced while running (issue 9) ---------------------------------------------


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_review_db_deleted_or_replaced_mid_run_later_items_land_in_the_file_at_the_path(start_service, upstream, clients, caplog, tmp_path, how):
    caplog.set_level(logging.INFO)
    db = tmp_path / "review.db"
    service, reader = start_service(upstream.port, review_db=db)
    client = clients(service.port)
    before = send_traces(client, 3)
    upstream.wait_spans(9)
    wait_for(lambda: stored(db) == set(before), what="the first items stored")
    if how == "deleted":
        db.unlink()  # as `rm review.db`: the -wal and -shm files stay behind
    else:
        other = tmp_path / "restored.db"
        with SQLiteReviewStore(other) as store:  # a backup put back in its place, say
            pass
        os.replace(other, db)
    after = [t for _ in range(20) for t in send_traces(client, 1)]
    upstream.wait_spans(9 + 60, timeout=15)
    # Every later item is in the file at the path, which is whole; nothing is held or lost.
    wait_for(lambda: stored(db) == set(after), what="every later item in the file at the path")
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    assert review_counts(reader) == {"ok": 23, "failed": None, "dropped": None}
    kind = f"review_db_{how}"
    assert metric(reader, "tracefence.errors", {"error.type": kind}) == 1
    assert len(logged(caplog, str(db), "deleted while in use" if how == "deleted" else "replaced by another file", level=logging.ERROR)) == 1
    # The API reads the same file.
    with SQLiteReviewStore(db, create=False) as store:
        assert {i.trace_id for i in store.list(page_size=100)[0]} == set(after)


# -- bounded shutdown (issue 9) ----------------------------------------------------------------------------------


class HangingUpstream(RecordingUpstream):
    """A backend that takes calls and never answers them (until ``release`` is set): a hung Collector."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.calls = 0

    def Export(self, request, context):
        with self._lock:
            self.calls += 1
        self.release.wait(60)
        return super().Export(request, context)


def test_sigterm_exits_within_drain_timeout_with_a_hung_upstream_and_counts_what_it_could_not_forward(tmp_path):
    up = HangingUpstream()
    up.start()
    config = tmp_path / "tracefence.yaml"
    drain_s = 2.0
    config.write_text(
        "service:\n"
        f"  upstreams: [{{endpoint: 'http://127.0.0.1:{up.port}', timeout_s: 30}}]\n"  # one call could hang 30 s
        f"  drain_timeout_s: {drain_s}\n  decision_wait_ms: 0\n"
    )
    serve = ServeProcess("--config", str(config), "--endpoint", "127.0.0.1:0", "--review-db", str(tmp_path / "r.db"), cwd=tmp_path)
    client = None
    try:
        port = serve.log("tracefence serve listening")["port"]
        client = Client(port, "billing-agent", batch=True)
        for _ in range(4):
            send_traces(client, 1)  # 4 Export calls, 12 spans, acknowledged
        wait_for(lambda: up.calls >= 1, what="a forward call hanging")
        time.sleep(0.3)
        started = time.monotonic()
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0, serve.stderr()
        took = time.monotonic() - started
        assert took < drain_s + STOP_OVERRUN_S + 0.5, f"SIGTERM took {took:.1f}s with drain_timeout_s {drain_s}"  # 0.5: process exit
        stopped = serve.log("tracefence serve stopped", timeout=1)
        assert (stopped["forwarded_all"], stopped["dropped_spans"]) == (False, 12)  # every span not forwarded is counted
        assert any("shutdown" in e.get("message", "") and "not forwarded" in e.get("message", "") for e in serve.logs() if e.get("level") == "ERROR")
    finally:
        up.release.set()
        if client is not None:
            client.shutdown()
        serve.stop()
        up.stop()


def test_stop_is_bounded_when_reading_the_intake_is_stuck_and_hands_the_unread_spans_on_as_review(start_service, upstream, clients, caplog, monkeypatch):
    """Before trial defect 9 the unread spans were dropped (counted); now they go on unplanned, fail closed."""
    from otel_tracefence.service.intake import Intake

    caplog.set_level(logging.INFO)
    gate = threading.Event()
    hold = Intake._hold

    def stuck_hold(self, items):  # the intake worker stalls on its first batch's first span (a pathological span, say)
        hold(self, items[:1])
        gate.wait(30)
        hold(self, items)

    monkeypatch.setattr(Intake, "_hold", stuck_hold)
    try:
        service, reader = start_service(upstream.port, drain_timeout_s=1)
        client = clients(service.port)
        for _ in range(3):
            send_traces(client, 1)  # acknowledged: one batch being read (stuck), two queued
        wait_for(lambda: service.intake.depth == 9, what="9 spans in the intake")
        started = time.monotonic()
        service.stop(grace_s=0)
        took = time.monotonic() - started
        assert took < 1 + STOP_OVERRUN_S, f"stop took {took:.1f}s"
        stopped = [r for r in caplog.records if r.getMessage() == "tracefence serve stopped"]
        # The two queued batches and the stuck one after its first span (taken before it stalled): handed on
        # unplanned, with the first span (held, its trace not planned: part of it was never read). None dropped.
        assert [(r.forwarded_all, r.dropped_spans) for r in stopped] == [(True, 0)]
        assert metric(reader, "tracefence.forward.dropped", {"reason": "shutdown"}) is None
        assert logged(caplog, "8 acknowledged spans (3 traces) were not read before the deadline; handed on unplanned, as review")
        received = upstream.wait_spans(9)
        assert len(received) == 9 and len({r.trace_id for r in received}) == 3
        assert {(r.tf["tracefence.replay.class"], r.tf["tracefence.trace.partial"], tuple(r.tf["tracefence.trace.reasons"])) for r in received} == {
            ("review", True, ("not_planned_at_shutdown",))
        }
        assert stored(Path(service.config.review_db)) == {r.trace_id for r in received}
    finally:
        gate.set()


class PartlyRejectingUpstream(RecordingUpstream):
    """A backend that stores every call but says, through OTLP partial success, that it rejected 2 spans of each."""

    def Export(self, request, context):
        super().Export(request, context)
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        response = trace_service_pb2.ExportTraceServiceResponse()
        response.partial_success.rejected_spans = 2
        response.partial_success.error_message = "2 spans past the backend's attribute limit"
        return response


def test_spans_an_upstream_rejects_through_partial_success_are_counted_not_retried(start_service, clients, caplog):
    caplog.set_level(logging.INFO)
    up = PartlyRejectingUpstream()
    up.start()
    try:
        service, reader = start_service(up.port)
        forwarder = service.forwarders[0]
        client = clients(service.port)
        traces = send_traces(client, 1)
        up.wait_spans(3)
        wait_for(lambda: forwarder.depth == 0 and forwarder.dropped_spans == 2, what="the rejected spans counted")
        time.sleep(0.3)
        assert len(up.requests) == 1  # OTLP: a partial success is never retried
        assert (forwarder.sent_spans, forwarder.dropped_spans, forwarder.failures) == (1, 2, 0)
        assert metric(reader, "tracefence.forward.dropped", {"reason": "upstream_rejected"}) == 2
        assert logged(caplog, "dropped 2 span(s)", "upstream_rejected", "attribute limit", traces[0], level=logging.ERROR)
    finally:
        up.stop()


def test_stop_is_bounded_with_the_review_db_locked(start_service, upstream, clients, caplog, tmp_path):
    # Issue 9: SIGTERM under load with a locked review database took 82 s. Every review write waits the busy
    # timeout (5 s), and the fence's shutdown tries the held items again; stop() must not wait for all that.
    caplog.set_level(logging.INFO)
    db = tmp_path / "review.db"
    service, reader = start_service(upstream.port, review_db=db, drain_timeout_s=2)
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        client = clients(service.port)
        for _ in range(5):
            send_traces(client, 1)  # review traces: each wants a write
        time.sleep(0.5)  # the first write is waiting on the lock now
        started = time.monotonic()
        service.stop(grace_s=0)
        took = time.monotonic() - started
        assert took < 2 + STOP_OVERRUN_S, f"stop took {took:.1f}s with drain_timeout_s 2 and the review database locked"
        stopped = [r for r in caplog.records if r.getMessage() == "tracefence serve stopped"]
        assert len(stopped) == 1
        # Every span is accounted for: forwarded, or counted as not forwarded (not read, or still being decided
        # behind the locked database).
        line = stopped[0]
        delivered = {r.span_id for r in upstream.spans()}
        assert line.dropped_spans == 15 - len(delivered) > 0 and line.forwarded_all is False
        assert metric(reader, "tracefence.forward.dropped", {"reason": "shutdown"}) == line.dropped_spans
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()


# -- one giant trace beside small ones (issue 9, item 3) ------------------------------------------------


def _giant_trace_requests(trace_id: bytes, spans: int, per_request: int) -> list:
    """``spans`` spans of one trace with no root (their parent never comes), every third a read tool span with
    its own call id, cut into requests of ``per_request`` spans."""
    parent = b"\xee" * 8
    made = [
        raw_tool_span(trace_id, (i + 1).to_bytes(8, "big"), "kb.lookup", parent=parent, **{"gen_ai.tool.call.id": f"call-{i}"})
        if i % 3 == 0
        else raw_span(trace_id, (i + 1).to_bytes(8, "big"), "think", parent)
        for i in range(spans)
    ]
    return [raw_request(*made[i : i + per_request], service_name="giant-agent") for i in range(0, spans, per_request)]


def test_a_giant_trace_beside_a_small_one_the_small_one_is_delivered_while_the_giant_one_is_in_flight(start_service, upstream, tmp_path):
    """12,500 spans (100,500 under ``make chaos``) of one trace whose root comes last, acknowledged first, then a small trace from another
    client: the small one is delivered with its own decisions while the giant one is still in flight (its
    last chunk held, as a trace's spans are, until its root ends). The giant one is decided on its bound
    (1,000 spans, partial) and every later span is handed on late in batches, every late tool step fenced
    (``decided_before_complete``); its review item keeps every one of its steps (a third of the spans)."""
    service, _ = start_service(upstream.port)
    giant_id, small_id = "9a" * 16, "5b" * 16
    total = 100_500 if CHAOS else 12_500
    tools = -(-total // 3)  # every third span is a tool span
    scale = 4 if CHAOS else 1
    giant_channel, giant = trace_stub(f"127.0.0.1:{service.port}")
    small_channel, small = trace_stub(f"127.0.0.1:{service.port}")
    try:
        for request in _giant_trace_requests(bytes.fromhex(giant_id), total, 1_500):
            giant.Export(request, timeout=10)  # acknowledged: queued in the intake
        tid = bytes.fromhex(small_id)
        small.Export(
            raw_request(
                raw_tool_span(tid, b"\x00" * 7 + b"\x02", "accounts.get_balance", parent=b"\x00" * 7 + b"\x01", **{"gen_ai.tool.call.id": "c-1"}),
                raw_tool_span(tid, b"\x00" * 7 + b"\x03", "payments.charge", effect="write", parent=b"\x00" * 7 + b"\x01",
                              **{"gen_ai.tool.call.id": "c-2", "tracefence.idempotency_key": "order-9"}),
                raw_span(tid, b"\x00" * 7 + b"\x01", "invoke_agent billing"),
                service_name="small-agent",
            ),
            timeout=10,
        )
        delivered = upstream.wait_spans(3, small_id, timeout=20 * scale)
        assert {s.name: (s.tf.get("tracefence.replay.class"), s.tf.get("tracefence.step.decision")) for s in delivered} == {
            "invoke_agent billing": ("static", None),
            "execute_tool accounts.get_balance": ("static", "replay"),
            "execute_tool payments.charge": ("static", "skip"),
        }
        assert len(upstream.trace(giant_id)) < total  # the giant one is still in flight
        upstream.wait_spans(total - 1_000, giant_id, timeout=20 * scale)
        wait_for(lambda: service.intake.depth == 0 and not service.forwarders[0].depth, timeout=10 * scale, what="the giant trace read and forwarded")
        time.sleep(0.3)
        held_back = total - len(upstream.trace(giant_id))
        assert 0 < held_back < 1_000 and held_back == len(service.fence.buffer._held[giant_id].spans)  # its last chunk waits for its root
        giant.Export(raw_request(raw_span(bytes.fromhex(giant_id), b"\xee" * 8, "invoke_agent giant"), service_name="giant-agent"), timeout=10)
        got = upstream.wait_spans(total + 1, giant_id, timeout=20 * scale)
    finally:
        giant_channel.close()
        small_channel.close()
    assert len({s.span_id for s in got}) == total + 1 == len(got)
    first = [s for s in got if not s.tf.get("tracefence.trace.late")]
    late = [s for s in got if s.tf.get("tracefence.trace.late")]
    assert (len(first), len(late)) == (1_000, total - 1_000 + 1)
    assert {(s.tf["tracefence.replay.class"], s.tf["tracefence.trace.partial"]) for s in first} == {("dynamic", True)}
    assert {(s.tf["tracefence.replay.class"], s.tf["tracefence.trace.partial"]) for s in late} == {("review", True)}
    late_tools = [s for s in late if s.name.startswith("execute_tool")]
    assert len(late_tools) == tools - 334  # 334 tool spans among the first 1,000
    assert {(s.tf["tracefence.step.decision"], s.tf["tracefence.step.reasons"][0]) for s in late_tools} == {("review", "decided_before_complete")}
    wait_for(lambda: service.store.get(giant_id) is not None and len(service.store.get(giant_id).plan.steps) == tools, timeout=20 * scale,
             what=f"the giant trace's review item with its {tools} steps")


def test_the_intake_reads_sources_in_turns_a_slice_at_a_time_and_one_source_in_order():
    """A giant request from one client and a small one from another: the small one is read after one slice of
    the giant one, not after all of it; two requests of one client are read in the order they came."""
    from otel_tracefence.service.intake import SLICE_SPANS, Intake
    from otel_tracefence.service.otlp_spans import Origin, OtlpItem

    gate = threading.Event()
    seen: list[tuple[str, int]] = []

    class Recording:
        def add_batch(self, batch):
            seen.append((batch[0][0].trace_id, len(batch)))
            gate.wait(10)  # the worker is on its first slice while the other requests are queued

        def pass_through(self, items, why, exc=None):
            raise AssertionError(f"{why}: {exc!r}")

    first = raw_request().resource_spans[0]
    origin = Origin(first.resource.SerializeToString(), b"", first.scope_spans[0].scope.SerializeToString(), b"")

    def items(trace: str, count: int) -> list:
        return [OtlpItem(origin, raw_span(bytes.fromhex(trace), (i + 1).to_bytes(8, "big"), parent=b"\x01" * 8).SerializeToString()) for i in range(count)]

    intake = Intake(Recording(), max_spans=10_000)  # type: ignore[arg-type]
    intake.put(items("aa" * 16, 3 * SLICE_SPANS), source="ipv4:127.0.0.1:1000")
    wait_for(lambda: seen, what="the first slice")
    intake.put(items("bb" * 16, 2 * SLICE_SPANS), source="ipv4:127.0.0.1:1000")
    intake.put(items("cc" * 16, 5), source="ipv4:127.0.0.1:2000")
    gate.set()
    assert intake.drain(timeout_s=10) == 0
    a, b, c = "aa" * 16, "bb" * 16, "cc" * 16
    assert seen == [(a, SLICE_SPANS), (c, 5), (a, SLICE_SPANS), (a, SLICE_SPANS), (b, SLICE_SPANS), (b, SLICE_SPANS)]
    assert (intake.depth, intake.handed_spans) == (0, 5 * SLICE_SPANS + 5)


# -- the processor's flush and shutdown are bounded (issue 9, item 5) ---------------------------------


def test_processor_force_flush_with_the_review_db_locked_returns_false_within_its_timeout(tmp_path):
    """``force_flush(500)`` while another connection holds the review database locked (past the store's 5 s
    busy timeout): it returns False within its bound instead of waiting the busy timeout out; once the lock
    is gone, a flush writes the item and returns True, and every span is handed on once, annotated."""
    db = tmp_path / "review.db"
    processor, exporter, root = held_timed_out_write(SQLiteReviewStore(db))
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        flushed = processor.force_flush(500)
        took = time.monotonic() - started
        assert flushed is False
        assert took < 3, f"force_flush(500) took {took:.1f}s"  # generous: the busy timeout alone is 5 s
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert processor.force_flush(15_000) is True
    with SQLiteReviewStore(db, create=False) as check:
        item = check.get(format(root.get_span_context().trace_id, "032x"))
    assert item is not None and item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    spans = exporter.get_finished_spans()
    assert [(s.name, s.attributes.get("tracefence.replay.class")) for s in spans] == [("execute_tool payments.charge", "review")]
    root.end()  # late: handed on at once, with the trace's class
    processor.shutdown(timeout_millis=5_000)
    assert sorted((s.name, s.attributes.get("tracefence.replay.class")) for s in exporter.get_finished_spans()) == [
        ("execute_tool payments.charge", "review"),
        ("invoke_agent billing", "review"),
    ]


def test_processor_shutdown_with_the_review_db_locked_returns_within_its_timeout(tmp_path):
    """``shutdown(timeout_millis=500)`` with the review database locked: it returns within its bound, counts the
    overrun, and still shuts the downstream processors down."""
    from opentelemetry.sdk.metrics import MeterProvider as Meters

    db = tmp_path / "review.db"
    reader = InMemoryMetricReader()
    processor, exporter, _ = held_timed_out_write(SQLiteReviewStore(db), meter_provider=Meters(metric_readers=[reader]))
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        processor.shutdown(timeout_millis=500)
        took = time.monotonic() - started
        assert took < 3, f"shutdown(500 ms) took {took:.1f}s"
        assert metric(reader, "tracefence.errors", {"error.type": "shutdown_timeout"}) == 1
        assert exporter._stopped is True  # the downstream processor was shut down all the same
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def held_timed_out_write(store, **processor_options):
    """A ``TraceFenceSpanProcessor`` over a ``SimpleSpanProcessor`` into memory, writing ``store``, holding one
    trace: its root still open, a timed-out ``payments.charge`` ended under it. Returns (processor, exporter, root)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_tracefence.agent.instrument import tool_call
    from otel_tracefence.sdk import TraceFenceSpanProcessor

    exporter = InMemorySpanExporter()
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=store, decision_wait_ms=60_000, **processor_options)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    root = provider.get_tracer("agent").start_span("invoke_agent billing")  # still open: the trace is held
    with trace_api_use(root):
        try:
            with tool_call("payments.charge", effect="write", idempotency_key="order-17", call_id="c-1", tracer_provider=provider):
                raise TimeoutError("no answer")
        except TimeoutError:
            pass
    return processor, exporter, root


def trace_api_use(span):
    from opentelemetry import trace as trace_api

    return trace_api.use_span(span, end_on_exit=False)


# -- the opt-in persistent queue (issue 9, item 4) ------------------------------------------------------


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm-drain-runs-out"])
def test_persistent_queue_every_acknowledged_span_is_delivered_after_a_restart(tmp_path, clients, how):
    """``tracefence serve --persistent-queue-dir`` under load from three real OTLP exporters, its upstream down
    (nothing can be forwarded), then SIGKILL, or SIGTERM with a 1 s drain. Restarted on the same folder with
    the upstream up: every acknowledged span (by span id) reaches the upstream. Without the persistent queue
    none would: they were only in the killed process's memory. After SIGTERM the stop line says what was kept
    on disk, and nothing is counted as dropped."""
    queue_dir = tmp_path / "queue"
    up_port = free_port()
    (tmp_path / "tracefence.yaml").write_text("service:\n  drain_timeout_s: 1\n")

    def serve() -> ServeProcess:
        return ServeProcess(
            "--config", str(tmp_path / "tracefence.yaml"),
            "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up_port}", "--review-db", str(tmp_path / "review.db"),
            "--decision-wait-ms", "0", "--max-wait-ms", "1000", "--persistent-queue-dir", str(queue_dir),
            cwd=tmp_path,
        )  # fmt: skip

    first = serve()
    load = AgentLoad(clients)
    try:
        load.start(first.log("tracefence serve listening")["port"])
        load.wait_acknowledged(1_500 if CHAOS else 60, timeout_s=120 if CHAOS else 20)
        first.proc.send_signal(how)
        assert first.proc.wait(timeout=30) == (0 if how == signal.SIGTERM else -signal.SIGKILL), first.stderr()
        load.stop()
    finally:
        load.stop(check=False)
        first.stop()
    acked, attempted = load.acked, load.attempted
    every_acked = set().union(*acked)
    if how == signal.SIGTERM:
        stopped = first.log("tracefence serve stopped", timeout=1)
        assert stopped["dropped_spans"] == 0 and stopped["forwarded_all"] is False
        assert stopped["kept_spans"] >= len(every_acked)
    up = RecordingUpstream()
    up.start(up_port)
    second = serve()
    try:
        second.log("tracefence serve listening")
        wait_for(lambda: every_acked <= {r.span_id for r in up.spans()}, timeout=120 if CHAOS else 30,
                 what=f"every acknowledged span upstream (have {len(every_acked & {r.span_id for r in up.spans()})} of {len(every_acked)})")
        assert second.log("persistent queue: replayed what an earlier run acknowledged")["spans"] >= len(every_acked)
    finally:
        second.stop()
        up.stop()
    assert {r.span_id for r in up.spans()} <= attempted  # nothing invented
    assert "Traceback" not in first.stderr() + second.stderr()


def test_persistent_queue_file_is_private_and_a_settled_request_leaves_it(tmp_path):
    """The queue file holds spans as received (values and all): mode 0600, as are its -wal and -shm files. A
    request is deleted once every forward queue has settled every one of its spans, not before."""
    from otel_tracefence.service.persistent_queue import PersistentQueue

    queue = PersistentQueue(tmp_path / "q", targets=2)
    spans = [raw_span(b"\x01" * 16, bytes([0] * 7 + [i])) for i in (1, 2)]
    request = raw_request(*spans)
    queue.append(request, request.resource_spans[0].scope_spans[0].spans)
    for name in ("tracefence-queue.db", "tracefence-queue.db-wal", "tracefence-queue.db-shm"):
        assert (tmp_path / "q" / name).stat().st_mode & 0o777 == 0o600, name
    queue.settle(0, spans)
    queue.settle(1, spans[:1])
    assert queue.pending() == (1, 2)  # the second upstream has not taken span 2 yet
    queue.settle(1, spans[1:])
    assert queue.pending() == (0, 0)
    queue.close()
    assert PersistentQueue.count(tmp_path / "q" / "tracefence-queue.db") == (0, 0)


def test_output_file_is_private_as_the_persistent_queue_is(tmp_path):
    """Trial defect 23: the output file holds the same raw span values as the persistent queue, and was 0644."""
    import stat

    from otel_tracefence.service.forward import FileTarget

    old = os.umask(0o022)
    try:
        target = FileTarget(str(tmp_path / "spans.jsonl"))
    finally:
        os.umask(old)
    target.close()
    assert stat.S_IMODE((tmp_path / "spans.jsonl").stat().st_mode) == 0o600
