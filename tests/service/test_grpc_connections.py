"""Issue 30 (connections, gRPC): the OTLP/gRPC receiver's connection cap, handshake and idle timeouts and its bound on
calls at once, all grpcio's own server options set from ``service.grpc_*``.

Real sockets and the SDK's gRPC and HTTP exporters against ``tracefence serve`` as a subprocess at a lowered
descriptor limit (``RLIMIT_NOFILE`` 256, set with ``preexec_fn``), and against a ``TraceFenceService`` in process.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.core.config import load_config
from otel_tracefence.service.server import TraceFenceService
from service_helpers import descriptor_limit, ServeProcess, canary_spans, connect, read_all, trace_stub, wait_for

LIMIT = 256
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # and an empty SETTINGS frame
GOAWAY = 7
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def serve(services: Callable[..., TraceFenceService]) -> Callable[..., TraceFenceService]:
    """``serve(**settings)``: :func:`services` with no OTLP/HTTP receiver unless asked."""
    return functools.partial(services, http_endpoint="")


def frame_types(data: bytes) -> list[int]:
    """The HTTP/2 frame types in ``data``, the server's side of a connection."""
    types, at = [], 0
    while at + 9 <= len(data):
        length = int.from_bytes(data[at : at + 3], "big")
        types.append(data[at + 3])
        at += 9 + length
    return types


def test_the_settings_are_declared_with_defaults_and_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    service = load_config().service
    assert (service.grpc_max_connections, service.grpc_handshake_timeout_s, service.grpc_idle_timeout_s, service.grpc_max_concurrent_rpcs) == (0, 10.0, 60.0, 0)
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__GRPC_MAX_CONNECTIONS", "40")
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__GRPC_IDLE_TIMEOUT_S", "2.5")
    service = load_config().service
    assert (service.grpc_max_connections, service.grpc_idle_timeout_s) == (40, 2.5)


def test_a_connection_with_no_call_is_ended_with_goaway_after_the_idle_timeout(serve: Any) -> None:
    service = serve(grpc_idle_timeout_s=0.5)
    sock = connect(service.port)
    sock.sendall(HTTP2_PREFACE)
    started = time.monotonic()
    answer = read_all(sock)  # the server's SETTINGS, ... then GOAWAY and the close
    assert GOAWAY in frame_types(answer) and time.monotonic() - started < 5
    sock.close()
    # An exporter's channel, idle past it between two exports, reconnects by itself.
    exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{service.port}", insecure=True, timeout=10)
    assert exporter.export(canary_spans()) == SpanExportResult.SUCCESS
    time.sleep(1.0)
    assert exporter.export(canary_spans()) == SpanExportResult.SUCCESS
    exporter.shutdown()


def test_a_connection_that_never_sends_http2_settings_is_closed_at_the_handshake_timeout(serve: Any) -> None:
    service = serve(grpc_handshake_timeout_s=0.5)
    sock = connect(service.port)
    started = time.monotonic()
    answer = read_all(sock)  # the server's SETTINGS, then GOAWAY ("handshake timeout") and the close
    assert frame_types(answer)[-1] == GOAWAY and answer.endswith(b"timeout")
    assert 0.3 < time.monotonic() - started < 5
    sock.close()


def test_calls_past_the_concurrent_rpc_bound_get_resource_exhausted_at_once(serve: Any) -> None:
    service = serve(max_workers=2, grpc_max_concurrent_rpcs=1)
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    request = encode_spans(canary_spans())
    release = threading.Event()

    def held_back() -> Iterator[Any]:  # the call's header now, its message only once released: a call under way
        release.wait(10)
        yield request

    export = channel.stream_unary(EXPORT, request_serializer=lambda m: m.SerializeToString(), response_deserializer=lambda b: b)
    held = [export.future(held_back(), timeout=10)]

    def refused_while_held() -> bool:
        if held[-1].done():  # refused itself: a probe had the one slot when it arrived; hold another
            held.append(export.future(held_back(), timeout=10))
            return False
        return _refused(stub, request)

    wait_for(refused_while_held, what="a second call refused while the first is under way")
    release.set()
    assert held[-1].result(timeout=10) == b""  # the first one served
    assert stub.Export(request, timeout=5) is not None  # and the next, once it ended
    channel.close()


def _refused(stub: Any, request: Any) -> bool:
    """True when an Export is refused with ``RESOURCE_EXHAUSTED`` ("Concurrent RPC limit exceeded!")."""
    try:
        stub.Export(request, timeout=5)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
        return True
    return False



def test_more_idle_grpc_connections_than_the_descriptor_limit_leave_http_and_then_grpc_answering(tmp_path: Path) -> None:
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
        "--review-db", str(tmp_path / "r.db"), "--output-file", str(tmp_path / "out.jsonl"),
        cwd=tmp_path, preexec_fn=descriptor_limit(LIMIT),
        OTEL_TRACEFENCE_SERVICE__GRPC_HANDSHAKE_TIMEOUT_S="1",
    )  # fmt: skip
    idle: list[socket.socket] = []
    try:
        listening = serve.log("tracefence serve listening")
        port, http_port = listening["port"], listening["http_port"]
        cap_line = next(e for e in serve.logs() if e["message"].startswith("the OTLP/HTTP receiver holds at most"))
        assert cap_line["grpc_max_connections"] == 32  # half the reserve: 64 at this limit
        for _ in range(LIMIT + 44):  # 300 silent connections to the gRPC port: more than the process may hold
            idle.append(connect(port))
        # While they come and are held, the HTTP receiver answers (gRPC took only its cap's descriptors).
        http_exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces", timeout=10)
        assert http_exporter.export(canary_spans()) == SpanExportResult.SUCCESS
        http_exporter.shutdown()
        # The silent ones are closed at the handshake timeout (those past the cap at once): gRPC then answers too.
        started = time.monotonic()
        closed = [read_all(sock) for sock in idle]  # each one: closed by the server
        assert time.monotonic() - started < 5
        assert 32 <= sum(1 for answer in closed if answer.endswith(b"timeout")) <= 40  # held to the timeout: the cap's
        assert closed.count(b"") >= len(idle) - 40  # the rest closed at their accept, unread
        grpc_exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10)
        assert grpc_exporter.export(canary_spans()) == SpanExportResult.SUCCESS
        grpc_exporter.shutdown()
        assert serve.proc.poll() is None
        assert not [e for e in serve.logs() if "Too many open files" in e["message"] or "EMFILE" in e["message"]]
    finally:
        for sock in idle:
            sock.close()
        serve.stop()
