"""`tracefence serve` between real peers (issue 4, "Tests (real parts)").

Both tests end at a real upstream gRPC ``TraceService`` server started here that
records every request, with a real ``tracefence serve`` subprocess in between:

* Node.js: the OpenTelemetry JS SDK (``@opentelemetry/sdk-trace-node`` with
  ``@opentelemetry/exporter-trace-otlp-grpc``, ``-otlp-proto`` (OTLP/HTTP protobuf) and
  ``-otlp-http`` (OTLP/HTTP JSON), pinned in ``tests/node/package.json`` and installed
  here with npm) exports an agent-shaped trace straight to tracefence, over each.
* rotel: the Python SDK's ``OTLPSpanExporter`` sends to the rotel collector (the
  ``rotel`` wheel from PyPI, which ships the ``rotel-agent`` binary), whose OTLP
  exporter forwards to tracefence over gRPC and over HTTP.

Every protocol gives exactly the same annotations and review items (issue 15).

Every process is bounded by a timeout and ended in ``finally`` (SIGTERM, then kill).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Status

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"
STARTUP_TIMEOUT_S = 30.0
ARRIVAL_TIMEOUT_S = 30.0
NPM_INSTALL_TIMEOUT_S = 300.0


# -- the real upstream -------------------------------------------------------------------------


@dataclass
class Received:
    """One span as the upstream got it, with the resource and scope it came with."""

    resource: dict[str, Any]
    scope_name: str
    scope_version: str
    span: Any  # opentelemetry.proto.trace.v1.Span

    @property
    def attributes(self) -> dict[str, Any]:
        return attributes(self.span.attributes)


def _plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_plain(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        assert kv.key not in out, f"attribute {kv.key} is repeated"
        out[kv.key] = _plain(kv.value)
    return out


class RecordingUpstream(trace_service_pb2_grpc.TraceServiceServicer):
    """A backend: records every ``Export`` request and acknowledges it."""

    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self._changed = threading.Condition()

    def Export(self, request, context):  # noqa: N802 (gRPC's name)
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self, trace_id_hex: str) -> list[Received]:
        with self._changed:
            requests = list(self.requests)
        out = []
        for request in requests:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        if span.trace_id.hex() == trace_id_hex:
                            out.append(Received(attributes(rs.resource.attributes), ss.scope.name, ss.scope.version, span))
        return out

    def wait_for(self, trace_id_hex: str, span_ids: set[str], timeout_s: float) -> dict[str, Received]:
        """The spans of the trace by span id (hex) once all of ``span_ids`` have arrived."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                got = {r.span.span_id.hex(): r for r in self.spans(trace_id_hex)}
                if span_ids <= got.keys():
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"upstream got {sorted(got)} of trace {trace_id_hex} within {timeout_s}s, wanted {sorted(span_ids)}")
                self._changed.wait(min(left, 0.5))


@pytest.fixture
def upstream() -> Iterator[tuple[RecordingUpstream, int]]:
    servicer = RecordingUpstream()
    # SO_REUSEPORT off: a second server on a taken port must fail to bind, not share the traffic.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=[("grpc.so_reuseport", 0)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    assert port, "the test upstream could not bind"
    server.start()
    try:
        yield servicer, port
    finally:
        server.stop(0).wait(5)


# -- processes -----------------------------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    """The environment without the host's tracefence and OTLP exporter settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_TRACEFENCE_", "OTEL_EXPORTER_OTLP", "ROTEL_"))}


def _end(proc: subprocess.Popen, timeout_s: float = 15.0) -> int | None:
    """SIGTERM, wait, then kill: a process started by a test never outlives it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def _wait_until(condition: Callable[[], Any], timeout_s: float, what: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what()}")


@dataclass
class Serve:
    port: int
    http_port: int
    review_db: Path
    log: Path
    proc: subprocess.Popen


@contextlib.contextmanager
def tracefence_serve(tmp_path: Path, upstream_port: int, decision_wait_ms: int = 300) -> Iterator[Serve]:
    """``tracefence serve`` on ephemeral loopback ports (OTLP/gRPC and OTLP/HTTP), forwarding to ``upstream_port``;
    stopped on exit."""
    review_db = tmp_path / "review.db"
    log = tmp_path / "serve.log"
    command = [
        sys.executable, "-m", "otel_tracefence", "serve",
        "--endpoint", "127.0.0.1:0",
        "--http-endpoint", "127.0.0.1:0",
        "--upstream", f"http://127.0.0.1:{upstream_port}",
        "--review-db", str(review_db),
        "--decision-wait-ms", str(decision_wait_ms),
    ]  # fmt: skip
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, cwd=tmp_path, env=_clean_env(), stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
    try:

        def listening() -> tuple[int, int] | None:
            for line in log.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict) and entry.get("message") == "tracefence serve listening":
                        return int(entry["port"]), int(entry["http_port"])
            if proc.poll() is not None:
                raise AssertionError(f"tracefence serve exited {proc.returncode}: {log.read_text(errors='replace')}")
            return None

        port, http_port = _wait_until(listening, STARTUP_TIMEOUT_S, lambda: f"tracefence serve to listen: {log.read_text(errors='replace')}")
        yield Serve(port, http_port, review_db, log, proc)
    finally:
        code = _end(proc)
    assert code == 0, f"tracefence serve exited {code} on SIGTERM: {log.read_text(errors='replace')}"


def review_items(review_db: Path) -> list[Any]:
    from otel_tracefence.review.store import SQLiteReviewStore

    with SQLiteReviewStore(review_db, create=False) as store:
        items, _ = store.list(page_size=100)
    return items


# -- checks shared by both peers ---------------------------------------------------------------


def assert_annotated(got: dict[str, Received], replay_class: str, tool_spans: dict[str, dict[str, Any]], other_spans: set[str]) -> None:
    """Exactly these spans, each with the trace's class; tool spans with exactly these step annotations."""
    assert set(got) == set(tool_spans) | other_spans
    for span_id, received in got.items():
        attrs = received.attributes
        assert attrs["tracefence.replay.class"] == replay_class, span_id
        assert isinstance(attrs["tracefence.plan.schema_version"], str) and attrs["tracefence.plan.schema_version"]
        assert "tracefence.trace.partial" not in attrs and "tracefence.trace.late" not in attrs
        step = {k: v for k, v in attrs.items() if k.startswith("tracefence.step.")}
        assert step == tool_spans.get(span_id, {}), f"span {received.span.name}"


# -- Node.js: @opentelemetry/sdk-trace-node + exporter-trace-otlp-grpc / -proto / -http --------


@pytest.fixture(scope="module")
def node_agent() -> Path:
    """``tests/node`` with its npm packages installed (exact versions, see package.json and its lock)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js interop needs `node` and `npm` on PATH (CI has Node 20); neither was found" if not node and not npm
                    else f"Node.js interop needs both `node` and `npm` on PATH; missing: {'node' if node is None else 'npm'}")  # fmt: skip
    # --ignore-scripts: nothing of ours needs an install script (protobufjs's only checks its version).
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
        cwd=NODE_DIR, capture_output=True, text=True, timeout=NPM_INSTALL_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, f"npm install in {NODE_DIR} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return NODE_DIR / "agent.js"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf", "http/json"])
def test_node_sdk_through_tracefence_serve(node_agent: Path, upstream, tmp_path: Path, protocol: str) -> None:
    servicer, upstream_port = upstream
    with tracefence_serve(tmp_path, upstream_port) as serve:
        url = f"http://127.0.0.1:{serve.port}" if protocol == "grpc" else f"http://127.0.0.1:{serve.http_port}/v1/traces"
        ran = subprocess.run(
            [shutil.which("node"), str(node_agent), url, protocol],
            cwd=NODE_DIR, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0, f"node agent failed ({ran.returncode}):\n{ran.stdout}\n{ran.stderr}"
        ids = json.loads(ran.stdout.strip().splitlines()[-1])
        got = servicer.wait_for(ids["trace_id"], {ids["root"], ids["read"], ids["write"]}, ARRIVAL_TIMEOUT_S)

    # Exactly the three spans, once each, annotated.
    assert len(servicer.spans(ids["trace_id"])) == 3
    assert_annotated(
        got,
        "review",
        {
            ids["write"]: {
                "tracefence.step.decision": "review",
                "tracefence.step.reasons": ["write_timeout"],
                "tracefence.step.related_call_ids": [],
                "tracefence.step.effect": "write",
                "tracefence.step.status": "timeout",
            },
            ids["read"]: {
                "tracefence.step.decision": "replay",
                "tracefence.step.reasons": ["declared_read"],
                "tracefence.step.related_call_ids": [],
                "tracefence.step.effect": "read",
                "tracefence.step.status": "ok",
            },
        },
        {ids["root"]},
    )
    # Node's resource and scope intact; the producer's own attributes, status and events untouched.
    for received in got.values():
        assert received.resource["service.name"] == "node-invoice-agent"
        assert received.resource["service.version"] == "1.2.3"
        assert received.resource["telemetry.sdk.language"] == "nodejs"
        assert received.resource["telemetry.sdk.name"] == "opentelemetry"
        assert (received.scope_name, received.scope_version) == ("tracefence-interop-node", "0.1.0")
    write, read, root = got[ids["write"]], got[ids["read"]], got[ids["root"]]
    assert write.span.name == "execute_tool invoice.create"
    assert {k: v for k, v in write.attributes.items() if not k.startswith("tracefence.")} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "invoice.create",
        "gen_ai.tool.call.id": "call_write_1",
        "gen_ai.tool.call.arguments": '{"customer_id":"c-42","amount_cents":120000,"currency":"EUR"}',
    }
    assert write.attributes["tracefence.effect"] == "write"
    assert write.attributes["tracefence.idempotency_key"] == "inv-c-42-2024-06"
    assert write.span.status.code == Status.STATUS_CODE_ERROR
    assert [(e.name, attributes(e.attributes)["exception.type"]) for e in write.span.events] == [("exception", "TimeoutError")]
    assert read.span.name == "execute_tool customer.lookup" and read.span.status.code == Status.STATUS_CODE_UNSET
    assert root.span.name == "invoke_agent" and root.span.parent_span_id == b""
    assert write.span.parent_span_id.hex() == read.span.parent_span_id.hex() == ids["root"]

    # One review item for the trace, in the real SQLite file, named by Node's service.
    items = review_items(serve.review_db)
    assert [(i.trace_id, i.service_name) for i in items] == [(ids["trace_id"], "node-invoice-agent")]


# -- rotel: Python SDK → rotel collector → tracefence serve → upstream -------------------------


def rotel_binary() -> Path:
    """The ``rotel-agent`` executable the ``rotel`` wheel ships (the package's own ``Agent.agent_path``)."""
    try:
        from rotel.agent import Agent
    except ImportError:
        pytest.skip("the rotel collector is not installed: it comes with the test extra (pip install -e '.[test]')")
    path = Path(Agent().agent_path)
    if not path.is_file():
        pytest.skip(f"the rotel wheel installed here has no rotel-agent binary at {path} (no wheel with a binary for this platform)")
    return path


def _free_ports(n: int) -> list[int]:
    """Ports free on loopback right now. rotel cannot bind port 0 (0.0.1a15 panics: agent.rs unwraps the
    configured port), so it is given ports picked here; a start that loses the race is retried."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@contextlib.contextmanager
def rotel(tmp_path: Path, forward_to_port: int, protocol: str = "grpc") -> Iterator[int]:
    """rotel receiving OTLP/gRPC on loopback and exporting OTLP over ``protocol`` (``grpc`` or ``http``: OTLP/HTTP
    protobuf, to ``/v1/traces``) to ``forward_to_port``; yields its receiver port."""
    binary = rotel_binary()
    log = tmp_path / "rotel.log"
    for attempt in range(3):
        grpc_port, http_port = _free_ports(2)
        log_start = log.stat().st_size if log.exists() else 0
        command = [
            str(binary), "start",
            "--log-format", "json",
            "--pid-file", str(tmp_path / "rotel.pid"),
            "--log-file", str(tmp_path / "rotel-daemon.log"),
            "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
            "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
            "--exporter", "otlp",
            "--otlp-exporter-endpoint", f"http://127.0.0.1:{forward_to_port}",
            "--otlp-exporter-protocol", protocol,
            "--batch-timeout", "100ms",
        ]  # fmt: skip
        with open(log, "ab") as sink:
            proc = subprocess.Popen(command, cwd=tmp_path, env=_clean_env(), stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
        try:
            ready = False
            channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
            try:
                deadline = time.monotonic() + STARTUP_TIMEOUT_S
                while not ready and proc.poll() is None and time.monotonic() < deadline:
                    try:
                        grpc.channel_ready_future(channel).result(timeout=0.5)
                        ready = True
                    except grpc.FutureTimeoutError:
                        pass
            finally:
                channel.close()
            if proc.poll() is not None:
                if attempt < 2 and "address already in use" in log.read_bytes()[log_start:].decode(errors="replace").lower():
                    continue  # lost a port to someone else between picking and binding: pick new ones
                raise AssertionError(f"rotel exited {proc.returncode} at start: {log.read_text(errors='replace')}")
            if not ready:
                raise AssertionError(f"rotel did not accept connections within {STARTUP_TIMEOUT_S}s: {log.read_text(errors='replace')}")
            yield grpc_port
            return
        finally:
            _end(proc)
    raise AssertionError(f"rotel could not bind free ports in 3 attempts: {log.read_text(errors='replace')}")


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_python_sdk_through_rotel_and_tracefence_serve(upstream, tmp_path: Path, protocol: str) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
    from opentelemetry.trace import Status as SdkStatus, StatusCode, set_span_in_context

    binary = rotel_binary()  # skips before anything starts when rotel is absent
    assert binary.is_file()
    servicer, upstream_port = upstream
    with (
        tracefence_serve(tmp_path, upstream_port) as serve,
        rotel(tmp_path, serve.port if protocol == "grpc" else serve.http_port, protocol) as rotel_port,
    ):
        results: list[SpanExportResult] = []

        class Recording(OTLPSpanExporter):
            def export(self, spans):
                results.append(super().export(spans))
                return results[-1]

        exporter = Recording(endpoint=f"127.0.0.1:{rotel_port}", insecure=True, timeout=10)
        provider = TracerProvider(resource=Resource.create({"service.name": "py-billing-agent"}))
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
        tracer = provider.get_tracer("tracefence-interop-rotel", "0.2.0")

        def tool(name: str, parent, call_id: str, effect: str, args: dict, **extra):
            span = tracer.start_span(
                f"execute_tool {name}",
                context=set_span_in_context(parent),
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": json.dumps(args),
                    "tracefence.effect": effect,
                    **extra,
                },
            )
            return span

        # Trace A: a write that timed out → review.
        root_a = tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
        write_a = tool("invoice.create", root_a, "call_a1", "write", {"customer_id": "c-7", "amount_cents": 500},
                       **{"tracefence.idempotency_key": "inv-c-7"})  # fmt: skip
        write_a.add_event("exception", {"exception.type": "TimeoutError", "exception.message": "no answer in 30s"})
        write_a.set_status(SdkStatus(StatusCode.ERROR, "no answer in 30s"))
        write_a.end()
        root_a.end()
        # Trace B: a read and a committed write whose result was recorded → injected.
        root_b = tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
        read_b = tool("customer.lookup", root_b, "call_b1", "read", {"customer_id": "c-8"})
        read_b.end()
        write_b = tool("invoice.create", root_b, "call_b2", "write", {"customer_id": "c-8", "amount_cents": 900},
                       **{"tracefence.idempotency_key": "inv-c-8", "gen_ai.tool.call.result": '{"invoice_id":"in_1"}'})  # fmt: skip
        write_b.end()
        root_b.end()
        try:
            assert provider.force_flush(20_000)
        finally:
            provider.shutdown()
        assert results and all(r is SpanExportResult.SUCCESS for r in results), results

        hexid = lambda span: format(span.get_span_context().span_id, "016x")  # noqa: E731
        trace_a = format(root_a.get_span_context().trace_id, "032x")
        trace_b = format(root_b.get_span_context().trace_id, "032x")
        got_a = servicer.wait_for(trace_a, {hexid(root_a), hexid(write_a)}, ARRIVAL_TIMEOUT_S)
        got_b = servicer.wait_for(trace_b, {hexid(root_b), hexid(read_b), hexid(write_b)}, ARRIVAL_TIMEOUT_S)

    assert len(servicer.spans(trace_a)) == 2 and len(servicer.spans(trace_b)) == 3
    assert_annotated(
        got_a,
        "review",
        {
            hexid(write_a): {
                "tracefence.step.decision": "review",
                "tracefence.step.reasons": ["write_timeout"],
                "tracefence.step.related_call_ids": [],
                "tracefence.step.effect": "write",
                "tracefence.step.status": "timeout",
            }
        },
        {hexid(root_a)},
    )
    assert_annotated(
        got_b,
        "injected",
        {
            hexid(read_b): {
                "tracefence.step.decision": "replay",
                "tracefence.step.reasons": ["declared_read"],
                "tracefence.step.related_call_ids": [],
                "tracefence.step.effect": "read",
                "tracefence.step.status": "ok",
            },
            hexid(write_b): {
                "tracefence.step.decision": "skip",
                "tracefence.step.reasons": ["write_committed"],
                "tracefence.step.related_call_ids": [],
                "tracefence.step.effect": "write",
                "tracefence.step.status": "ok",
            },
        },
        {hexid(root_b)},
    )
    # The resource and scope came through rotel and tracefence intact.
    for received in [*got_a.values(), *got_b.values()]:
        assert received.resource["service.name"] == "py-billing-agent"
        assert received.resource["telemetry.sdk.language"] == "python"
        assert (received.scope_name, received.scope_version) == ("tracefence-interop-rotel", "0.2.0")
    assert got_a[hexid(write_a)].span.status.code == Status.STATUS_CODE_ERROR
    assert got_b[hexid(write_b)].attributes["gen_ai.tool.call.result"] == '{"invoice_id":"in_1"}'
    # Only the review trace is queued.
    assert [i.trace_id for i in review_items(serve.review_db)] == [trace_a]
