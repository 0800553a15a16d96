"""``tracefence serve`` as a real process: SIGTERM with traces held, and a port already taken."""

from __future__ import annotations

import signal
import time

from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review.store import SQLiteReviewStore
from service_helpers import Client, ServeProcess, agent_trace, tracefence


def test_sigterm_with_traces_held_decides_them_partial_forwards_and_stores_them(tmp_path, upstream):
    db = tmp_path / "review.db"
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0",
        "--upstream", f"http://127.0.0.1:{upstream.port}",
        "--review-db", str(db),
        "--decision-wait-ms", "100",
        "--max-wait-ms", "600000",  # nothing is decided by waiting: only the shutdown decides
        cwd=tmp_path,
    )
    client = None
    try:
        listening = serve.log("tracefence serve listening")
        port = listening["port"]
        assert port > 0 and listening["endpoint"] == "127.0.0.1:0" and listening["review_db"] == str(db)
        client = Client(port, "billing-agent", batch=True)
        review_trace = agent_trace(client, review=True, end_root=False)  # roots never sent
        injected_trace = agent_trace(client, review=False, end_root=False)
        assert client.send() is SpanExportResult.SUCCESS  # acknowledged: the service holds them now
        assert upstream.spans() == []
        started = time.monotonic()
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=10) == 0, serve.stderr()
        assert time.monotonic() - started < 5
    finally:
        if client is not None:
            client.shutdown()
        serve.stop()
    received = upstream.spans()
    assert sorted(r.trace_id for r in received) == sorted([review_trace] * 2 + [injected_trace] * 2)
    for r in received:
        assert r.tf["tracefence.trace.partial"] is True
        assert r.tf["tracefence.replay.class"] == ("review" if r.trace_id == review_trace else "injected")
        assert r.service_name == "billing-agent"
    with SQLiteReviewStore(db, create=False) as store:
        items, _ = store.list()
    assert [(i.trace_id, i.plan.replay_class, i.plan.partial, i.service_name) for i in items] == [
        (review_trace, pb.REPLAY_CLASS_REVIEW, True, "billing-agent")
    ]
    stopped = serve.log("tracefence serve stopped", timeout=1)
    assert (stopped["decided_at_shutdown"], stopped["forwarded_all"], stopped["dropped_spans"]) == (2, True, 0)
    assert "Traceback" not in serve.stderr()


def test_a_second_serve_on_a_taken_port_exits_2_with_a_clear_message(tmp_path, upstream):
    # The upstream's port is taken (bound with SO_REUSEPORT off, as the service binds too).
    proc = tracefence(
        "serve", "--endpoint", f"127.0.0.1:{upstream.port}", "--upstream", "http://127.0.0.1:9", "--review-db", str(tmp_path / "r.db"),
        cwd=tmp_path,
        timeout=30,
    )
    assert proc.returncode == 2
    assert f"tracefence serve: cannot listen on 127.0.0.1:{upstream.port}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert upstream.spans() == []
