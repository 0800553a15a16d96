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
        # Their roots never came: the committed write of the other trace cannot be judged either (DECISIONS 301;
        # it was `injected`, with no review item).
        assert r.tf["tracefence.replay.class"] == "review"
        assert r.service_name == "billing-agent"
    (write,) = [r for r in received if r.trace_id == injected_trace and r.name.endswith("invoice.create")]
    assert write.tf["tracefence.step.reasons"] == ["trace_root_missing"]
    with SQLiteReviewStore(db, create=False) as store:
        items, _ = store.list()
    assert sorted((i.trace_id, i.plan.replay_class, i.plan.partial, i.service_name) for i in items) == sorted([
        (review_trace, pb.REPLAY_CLASS_REVIEW, True, "billing-agent"), (injected_trace, pb.REPLAY_CLASS_REVIEW, True, "billing-agent")
    ])  # fmt: skip
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


def _field(number: int, payload: bytes) -> bytes:
    """One protobuf length-delimited field: tag, varint length, payload."""
    size, varint = len(payload), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        varint += bytes([byte | (0x80 if size else 0)])
        if not size:
            return bytes([number << 3 | 2]) + varint + payload


def _memory_mib(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("VmHWM", "VmRSS")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) / 1024
    return out


def test_one_request_of_a_million_tiny_spans_is_refused_whole_and_memory_stays_bounded(tmp_path):
    """Issue 9: one legal 51 MB Export of 1,000,000 tiny spans against the default intake bound (100,000 spans)
    was accepted and took the service past 900 MiB. Now: RESOURCE_EXHAUSTED naming the limit, without building
    the spans, and the service's peak memory rises by at most 4 times the request's size (gRPC's buffer, the
    Python copy, the bytes-only span count: SECURITY.md's formula)."""
    import grpc
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from service_helpers import EXPORT_METHOD, raw_request, raw_span, trace_stub

    template = Span(trace_id=b"\x11" * 16, span_id=b"\xaa" * 8, name="t", start_time_unix_nano=1, end_time_unix_nano=2).SerializeToString()
    at = template.index(b"\xaa" * 8)
    spans = b"".join(_field(2, template[:at] + (i + 1).to_bytes(8, "big") + template[at + 8 :]) for i in range(1_000_000))
    data = _field(1, _field(2, spans))  # ExportTraceServiceRequest.resource_spans > ResourceSpans.scope_spans > ScopeSpans.spans
    serve = ServeProcess("--endpoint", "127.0.0.1:0", "--review-db", str(tmp_path / "r.db"), "--output-file", str(tmp_path / "out.jsonl"), cwd=tmp_path)
    try:
        port = serve.log("tracefence serve listening")["port"]
        before = _memory_mib(serve.proc.pid)
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", -1)]) as channel:
            export = channel.unary_unary(EXPORT_METHOD)
            started = time.monotonic()
            try:
                export(data, timeout=30)
                raise AssertionError("a request of 1,000,000 spans was accepted against a bound of 100,000")
            except grpc.RpcError as refused:
                assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "1000000 spans" in refused.details() and "service.intake_queue_spans = 100000" in refused.details()
            assert time.monotonic() - started < 5
        peak = _memory_mib(serve.proc.pid)["VmHWM"]
        rise_mib = peak - before["VmHWM"]
        assert rise_mib < 4 * len(data) / 2**20 + 32, f"peak rose {rise_mib:.0f} MiB for a {len(data) / 2**20:.0f} MiB request"
        # Still serving.
        channel, stub = trace_stub(f"127.0.0.1:{port}")
        with channel:
            stub.Export(raw_request(raw_span(b"\x22" * 16, b"\x01" * 8)), timeout=5)
    finally:
        serve.stop()
