"""Issue 30 (connections): the OTLP/HTTP receiver's header and idle timeouts, its connection cap under the descriptor
limit, the token checked as soon as the header is complete, and the refusals logged as a rate.

Real sockets against a real ``TraceFenceService`` (in process), and ``tracefence serve`` as a subprocess at a lowered
descriptor limit (``RLIMIT_NOFILE`` 256, set with ``preexec_fn``) flooded with more idle connections than the limit,
while the SDK's own gRPC and HTTP exporters send canary spans.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.core.log_rate import RateLog
from otel_tracefence.service.http_connections import connection_cap
from otel_tracefence.service.server import TraceFenceService
from service_helpers import descriptor_limit, ServeProcess, canary_spans, connect, make_certificate, read_all, wait_for

LIMIT = 256


@pytest.fixture
def serve(services: Callable[..., TraceFenceService]) -> Callable[..., TraceFenceService]:
    return services


# -- the cap's arithmetic -----------------------------------------------------------------------


def test_the_cap_is_the_descriptor_limit_less_those_open_and_a_reserve() -> None:
    assert connection_cap(0, limit=1024, in_use=40).connections == 1024 - 40 - 256  # a quarter of the limit kept
    assert connection_cap(0, limit=256, in_use=40).connections == 256 - 40 - 64  # at least 64 kept
    assert connection_cap(0, limit=256, in_use=40).accept_batch == 8  # one turn's accepts: an eighth of the reserve
    assert connection_cap(0, limit=1 << 20, in_use=40).accept_batch == 2048
    assert connection_cap(100, limit=1024, in_use=40).connections == 100  # configured lower: taken
    assert connection_cap(5000, limit=1024, in_use=40).connections == 728  # configured higher: never past the limit
    assert connection_cap(0, limit=100, in_use=90).connections == 8  # the floor
    assert connection_cap(0, limit=None, in_use=40).connections == 10_000  # unlimited
    described = connection_cap(0, limit=1024, in_use=40).describe()
    assert described == (
        "the OTLP/HTTP receiver holds at most 728 connections: descriptor limit 1024 (RLIMIT_NOFILE), 40 open at start, "
        "256 kept for gRPC, the stores and the upstreams, at most 32 accepted at a time; the OTLP/gRPC receiver at most 128"
    )
    # gRPC's cap: half the reserve (the other half for the stores and upstreams), with HTTP's share when HTTP is off.
    assert connection_cap(0, limit=1024, in_use=40).grpc_connections == 128
    assert connection_cap(0, limit=256, in_use=40).grpc_connections == 32
    assert connection_cap(0, limit=1024, in_use=40, http=False).grpc_connections == 728 + 128
    assert connection_cap(0, limit=1024, in_use=40, grpc_configured=50).grpc_connections == 50
    assert connection_cap(0, limit=1024, in_use=40, grpc_configured=5000).grpc_connections == 128
    assert connection_cap(0, limit=None, in_use=40).grpc_connections == 10_000


def test_events_are_logged_as_a_rate_with_their_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    rate = RateLog(logging.getLogger("test.rate"), "refused %d in %.0fs", interval_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.rate"):
        for i in range(1000):
            now[0] = i * 0.005  # 1000 events in 5 s
            rate.event()
        now[0] = 12.0
        rate.event()  # the interval has passed: one line with the 999 + 1 since the first
        rate.flush()  # nothing pending
    assert [r.getMessage() for r in caplog.records] == ["refused 1 in 0s", "refused 1000 in 12s"]
    assert rate.total == 1001 and rate.lines == 2


# -- timeouts and the token, in process -----------------------------------------------------------


def test_a_connection_without_a_complete_header_is_closed_at_the_header_timeout(serve: Any) -> None:
    service = serve(http_header_timeout_s=0.3)
    silent = connect(service.http_port)
    half = connect(service.http_port)
    half.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the end of the header
    assert read_all(silent) == b""  # closed by the server, nothing answered
    assert read_all(half) == b""
    guard = service._http_guard
    wait_for(lambda: guard.header_timeouts.total == 2, what="two header timeouts counted")
    silent.close()
    half.close()


def test_a_kept_alive_connection_idle_past_the_idle_timeout_is_closed(serve: Any) -> None:
    service = serve(http_idle_timeout_s=0.3, http_header_timeout_s=30)
    sock = connect(service.http_port)
    sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")
    answer = read_all(sock)  # the answer, then the close once idle
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert service._http_guard.header_timeouts.total == 0  # closed as idle, not for its header
    sock.close()


def test_the_token_is_checked_once_the_header_is_complete_without_waiting_for_the_body(serve: Any) -> None:
    service = serve(bearer_token="s3cret", http_body_timeout_s=30)
    sock = connect(service.http_port)
    sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000000\r\n\r\n")
    answer = read_all(sock)  # no byte of the body sent: answered and closed all the same
    head = answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    assert head[0] == b"HTTP/1.1 401 Unauthorized"
    assert b"connection: close" in head and b"www-authenticate: Bearer" in head
    sock.close()


def test_at_the_cap_a_new_connection_closes_the_one_waiting_longest_for_a_request(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    service = serve(http_max_connections=8, http_header_timeout_s=30)
    with caplog.at_level(logging.WARNING, logger="otel_tracefence.service"):
        held = [connect(service.http_port) for _ in range(8)]  # fresh, sending nothing: the idle flood
        wait_for(lambda: len(service._http_guard.held) == 8, what="8 connections held")
        exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{service.http_port}/v1/traces", timeout=10)
        assert exporter.export(canary_spans()) == SpanExportResult.SUCCESS  # served at once, no 503, no timeout waited for
        exporter.shutdown()
        assert read_all(held[0]) == b""  # the oldest idle one was closed to make room, unanswered
        assert service._http_guard.evicted.total == 1 and service._http_guard.refused.total == 0
        fresh = connect(service.http_port)  # the exporter's connection closed at its shutdown: one is free again
        wait_for(lambda: len(service._http_guard.held) == 8, what="8 connections held")
    assert service._http_guard.evicted.total == 1
    lines = [r.getMessage() for r in caplog.records if "OTLP/HTTP connection(s)" in r.getMessage()]
    assert lines == ["closed 1 OTLP/HTTP connection(s) in 0s that waited longest for a request, to make room: 8 open, the cap"]
    for sock in held + [fresh]:
        sock.close()


def test_at_the_cap_with_every_connection_in_a_request_a_new_one_gets_503_logged_as_a_rate(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    service = serve(http_max_connections=8, http_header_timeout_s=30, http_body_timeout_s=30)
    with caplog.at_level(logging.WARNING, logger="otel_tracefence.service"):
        busy = [connect(service.http_port) for _ in range(8)]
        for sock in busy:  # a header, then a body that never comes in full: a request under way, never closed to make room
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\nContent-Length: 100\r\n\r\nab")
        wait_for(lambda: len(service._http_guard.held) == 8 and not service._http_guard.waiting, what="8 requests under way")
        over = [connect(service.http_port) for _ in range(20)]
        answers = [read_all(sock) for sock in over]
    assert answers == [b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"] * 20
    assert service._http_guard.refused.total == 20 and service._http_guard.evicted.total == 0
    lines = [r.getMessage() for r in caplog.records if "OTLP/HTTP connection(s)" in r.getMessage()]
    assert lines == ["refused 1 OTLP/HTTP connection(s) in 0s: 8 open, each in a request, the cap (503, Retry-After: 1)"]
    for sock in busy + over:
        sock.close()


def test_a_tls_handshake_never_completed_is_closed_at_the_header_timeout_and_counts_in_the_cap(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests prefers them to the exporter's certificate_file
        monkeypatch.delenv(name, raising=False)
    cert, key = make_certificate(tmp_path)
    service = serve(http_max_connections=4, http_header_timeout_s=0.5, tls_certificate_file=str(cert), tls_key_file=str(key))
    silent = [connect(service.http_port) for _ in range(4)]  # TCP open, no ClientHello ever
    wait_for(lambda: len(service._http_guard.held) == 4, what="4 handshakes held")  # counted from the accept
    exporter = HttpSpanExporter(endpoint=f"https://127.0.0.1:{service.http_port}/v1/traces", certificate_file=str(cert), timeout=10)
    assert exporter.export(canary_spans()) == SpanExportResult.SUCCESS  # TLS served, room made by closing the oldest
    exporter.shutdown()
    assert service._http_guard.evicted.total == 1
    started = time.monotonic()
    assert [read_all(sock) for sock in silent] == [b""] * 4  # the evicted one, and the rest at the header timeout
    assert time.monotonic() - started < 3
    wait_for(lambda: service._http_guard.header_timeouts.total == 3 and not service._http_guard.held, what="3 handshakes timed out")
    for sock in silent:
        sock.close()


# -- a flood at a lowered descriptor limit, in a subprocess ----------------------------------------------



def test_more_idle_connections_than_the_descriptor_limit_leave_grpc_and_http_answering(tmp_path: Path) -> None:
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
        "--review-db", str(tmp_path / "r.db"), "--output-file", str(tmp_path / "out.jsonl"),
        cwd=tmp_path, preexec_fn=descriptor_limit(LIMIT),
        OTEL_TRACEFENCE_SERVICE__HTTP_HEADER_TIMEOUT_S="60",  # nothing is freed by a timeout while the test runs
    )  # fmt: skip
    idle: list[socket.socket] = []
    try:
        listening = serve.log("tracefence serve listening")
        port, http_port = listening["port"], listening["http_port"]
        cap_line = next(e for e in serve.logs() if e["message"].startswith("the OTLP/HTTP receiver holds at most"))
        cap = cap_line["http_max_connections"]
        assert cap_line["descriptor_limit"] == LIMIT and 8 <= cap <= LIMIT - 64
        for _ in range(LIMIT + 44):  # 300 idle connections: more than the process may hold descriptors
            idle.append(connect(http_port))
        # While the last `cap` of them are held (each one past the cap closed the oldest idle one), both canaries answer.
        started = time.monotonic()
        grpc_exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10)
        assert grpc_exporter.export(canary_spans()) == SpanExportResult.SUCCESS
        grpc_exporter.shutdown()
        http_exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces", timeout=10)
        assert http_exporter.export(canary_spans()) == SpanExportResult.SUCCESS
        http_exporter.shutdown()
        assert time.monotonic() - started < 5  # no retry, no timeout waited for
        evicted = LIMIT + 44 - cap + 1  # and one more for the HTTP canary's connection
        assert [read_all(sock) for sock in idle[:evicted]] == [b""] * evicted  # closed by the server, oldest first
        assert serve.proc.poll() is None
        wait_for(lambda: [e for e in serve.logs() if "OTLP/HTTP connection(s)" in e["message"]], what="a rate line")
        lines = [e["message"] for e in serve.logs() if "OTLP/HTTP connection(s)" in e["message"]]
        assert 1 <= len(lines) <= 4 and all(line.startswith("closed ") and "waited longest for a request" in line for line in lines)
        assert not [e for e in serve.logs() if e.get("level") == "ERROR"]
        assert not [e for e in serve.logs() if "EMFILE" in e["message"] or "Too many open files" in e["message"]]
    finally:
        for sock in idle:
            sock.close()
        serve.stop()
