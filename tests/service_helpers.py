"""Shared parts for the ``tracefence serve`` tests: a recording upstream, real SDK clients, polling."""

from __future__ import annotations

import json
import os
import signal
import resource
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any, Callable, Sequence

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.agent.instrument import tool_call

ROOT = Path(__file__).resolve().parent.parent
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
BIG = 64 * 1024 * 1024
TF = "tracefence."


def service_config(upstream: Any, review_db: Path | str, **service: Any) -> Any:
    """A ``tracefence serve`` configuration for tests: loopback on a free port, one upstream (the tests'
    ``RecordingUpstream``), short waits and drain; ``service`` overrides any ``ServiceSettings`` field."""
    from otel_tracefence.core.config import ServiceSettings, TraceFenceConfig, UpstreamSettings

    settings = {"endpoint": "127.0.0.1:0", "http_endpoint": "", "decision_wait_ms": 100, "drain_timeout_s": 2,
                "upstreams": [UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}", timeout_s=2)], **service}
    return TraceFenceConfig(review_db=str(review_db), service=ServiceSettings(**settings))


def separate_runs(config: Any) -> Any:
    """``config`` with the write index off (``write_index_max_entries`` 0): for a test that sends the traces of
    separate files (cases, conformance cells) through one service to compare with ``tracefence plan`` run on each
    file alone, where no trace has an earlier one to meet (retries across traces, docs/DECISIONS.md 590)."""
    return config.model_copy(update={"write_index_max_entries": 0})


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    """A port nobody listens on right now (for an upstream started later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def value_of(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in kvs}


def tf_attrs(span: PbSpan) -> dict[str, Any]:
    return {k: v for k, v in attrs(span.attributes).items() if k.startswith(TF)}


class Received:
    """One span as the upstream got it, with its resource and scope."""

    def __init__(self, resource: PbResource, scope: InstrumentationScope, span: PbSpan) -> None:
        self.resource, self.scope, self.span = resource, scope, span

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def tf(self) -> dict[str, Any]:
        return tf_attrs(self.span)

    @property
    def service_name(self) -> str:
        return attrs(self.resource.attributes).get("service.name", "")


class RecordingUpstream(trace_service_pb2_grpc.TraceServiceServicer):
    """A real OTLP/gRPC TraceService that records every request (the test's backend)."""

    def __init__(self, max_receive_bytes: int = BIG) -> None:
        self.max_receive_bytes = max_receive_bytes  # gRPC's own default (and the Collector's) is 4 MiB
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metadata: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None
        self.port = 0

    def Export(self, request, context):
        with self._lock:
            self.requests.append(request)
            self.metadata.append({k: v for k, v in context.invocation_metadata()})
        return trace_service_pb2.ExportTraceServiceResponse()

    def start(self, port: int = 0) -> int:
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4),
            options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", self.max_receive_bytes)],
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, server)
        self.port = server.add_insecure_port(f"127.0.0.1:{port}")
        assert self.port, f"upstream could not bind 127.0.0.1:{port}"
        server.start()
        self._server = server
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None

    def spans(self) -> list[Received]:
        with self._lock:
            requests = list(self.requests)
        return [Received(rs.resource, ss.scope, span) for r in requests for rs in r.resource_spans for ss in rs.scope_spans for span in ss.spans]

    def trace(self, trace_id: str) -> list[Received]:
        return [s for s in self.spans() if s.trace_id == trace_id]

    def wait_spans(self, count: int, trace_id: str | None = None, timeout: float = 10.0) -> list[Received]:
        get = (lambda: self.trace(trace_id)) if trace_id else self.spans
        wait_for(lambda: len(get()) >= count, timeout, what=f"{count} span(s) upstream{' of ' + trace_id if trace_id else ''} (have {len(get())})")
        return get()


class ThrottlingUpstream(RecordingUpstream):
    """Refuses every Export with RESOURCE_EXHAUSTED and no RetryInfo, as a throttling backend may."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    def Export(self, request, context):
        with self._lock:
            self.refused += 1
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "throttled")


class Client:
    """An agent process: a real SDK TracerProvider exporting through the real OTLPSpanExporter.

    By default one Export call per span (SimpleSpanProcessor); with ``batch=True``
    spans wait until :meth:`send` exports them all in one call (as a
    BatchSpanProcessor does). An in-memory copy keeps every span made.
    """

    def __init__(self, port: int, service_name: str = "agent", *, batch: bool = False, **exporter_kwargs: Any) -> None:
        secure = "credentials" in exporter_kwargs
        exporter_kwargs.setdefault("insecure", not secure)
        endpoint = exporter_kwargs.pop("endpoint", f"{'https' if secure else 'http'}://127.0.0.1:{port}")
        self.exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10, **exporter_kwargs)
        self.sent = InMemorySpanExporter()
        self._batch_from = 0
        self._batch = batch
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name, "deployment.environment": "test"}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.sent))
        if not batch:
            self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("agent.loop", "1.2.3")

    def tool(self, name: str, **kwargs: Any):
        return tool_call(name, tracer_provider=self.provider, **kwargs)

    def send(self) -> Any:
        """Export every span finished since the last call in one Export call; the SDK's result."""
        spans = self.sent.get_finished_spans()[self._batch_from :]
        self._batch_from += len(spans)
        return self.exporter.export(spans)

    def shutdown(self) -> None:
        self.provider.shutdown()
        if self._batch:
            self.exporter.shutdown(timeout_millis=1000)


def timed_out_write(client: Client, name: str = "payments.charge", key: str = "order-17", **arguments: Any) -> None:
    """A write that timed out: the trace can't show whether it happened (review)."""
    try:
        with client.tool(name, effect="write", idempotency_key=key, arguments=arguments or {"amount_cents": 1250}, call_id=f"call-{name}"):
            raise TimeoutError("upstream did not answer")
    except TimeoutError:
        pass


def read(client: Client, name: str = "accounts.get_balance", **arguments: Any) -> None:
    with client.tool(name, effect="read", arguments=arguments or {"account": "a-1"}, call_id=f"call-{name}"):
        pass


def agent_trace(client: Client, *, review: bool = True, end_root: bool = True) -> str:
    """An agent turn: an ``invoke_agent`` root, a read, and (``review``) a timed-out write, else a recorded ok write.
    Returns the trace id (hex)."""
    root = client.tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
    from opentelemetry import trace

    with trace.use_span(root, end_on_exit=False):
        read(client)
        if review:
            timed_out_write(client)
        else:
            with client.tool("invoice.create", effect="write", idempotency_key="inv-1", arguments={"customer": "c-9"}, record_result=True, call_id="call-inv") as call:
                call.set_result({"invoice": "in_1"})
    if end_root:
        root.end()
    return format(root.get_span_context().trace_id, "032x")


# -- review items and small volumes ---------------------------------------------------------------------


def stored(db: Path) -> set[str]:
    """The trace ids of the review items in the SQLite review database ``db`` (opened read-only)."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        return {row[0] for row in conn.execute("SELECT trace_id FROM review_items")}
    finally:
        conn.close()


def send_review_traces(client: Client, count: int) -> list[str]:
    """``count`` review traces, one Export call each; the ids of those acknowledged."""
    acked = []
    for _ in range(count):
        trace_id = agent_trace(client, review=True)
        if client.send() is SpanExportResult.SUCCESS:
            acked.append(trace_id)
    return acked


def short_deadline_client(port: int) -> Client:
    """A client whose SDK OTLP exporter gives up after 2 s: a refused Export shows as a failure, not a long retry."""
    client = Client(port, "billing-agent", batch=True)
    client.exporter.shutdown(timeout_millis=100)
    client.exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", insecure=True, timeout=2)
    return client


def fill(volume: Path) -> Path:
    """Fill ``volume`` to its last byte; the filler file's path (delete it to give the space back)."""
    filler = volume / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


# -- raw OTLP ---------------------------------------------------------------------


def kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def raw_span(trace_id: bytes, span_id: bytes, name: str = "op", parent: bytes = b"", **attributes: Any) -> PbSpan:
    return PbSpan(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_000_100_000_000,
        attributes=[kv(k, v) for k, v in attributes.items()],
    )


def raw_tool_span(trace_id: bytes, span_id: bytes, tool: str, effect: str = "read", status: str = "ok", parent: bytes = b"", **extra: Any) -> PbSpan:
    return raw_span(
        trace_id,
        span_id,
        f"execute_tool {tool}",
        parent,
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "tracefence.effect": effect, "tracefence.status": status, **extra},
    )


def raw_request(*spans: PbSpan, service_name: str = "raw-agent") -> trace_service_pb2.ExportTraceServiceRequest:
    request = trace_service_pb2.ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", service_name))
    ss = rs.scope_spans.add()
    ss.scope.name = "raw.client"
    ss.spans.extend(spans)
    return request


_NOT_UTF8 = b"\xff\xfe bad"  # shorter than the placeholders it replaces (padded to their length)


def request_with_a_span_not_utf8(timed_out: bytes, bad: bytes, *, where: str = "span") -> bytes:
    """One request: a timed-out write in trace ``timed_out``, and a write in trace ``bad`` whose arguments (or its
    resource's ``service.name``, ``where="resource"``) hold bytes that are not UTF-8, in a resource of its own."""
    request = raw_request(raw_tool_span(timed_out, b"\x01" * 8, "invoice.create", effect="write", status="timeout"))
    marked = raw_request(raw_tool_span(bad, b"\x02" * 8, "payments.charge", effect="write", status="timeout", **{"gen_ai.tool.call.arguments": "PLACEHOLDER"}),
                         service_name="PLACEHOLDER-SERVICE" if where == "resource" else "raw-agent")  # fmt: skip
    request.resource_spans.extend(marked.resource_spans)
    placeholder = b"PLACEHOLDER-SERVICE" if where == "resource" else b"PLACEHOLDER"
    data = request.SerializeToString()
    assert data.count(placeholder) == 1
    return data.replace(placeholder, _NOT_UTF8.ljust(len(placeholder), b"!"))


def trace_stub(target: str, credentials: grpc.ChannelCredentials | None = None, **channel_kw: Any):
    channel = grpc.secure_channel(target, credentials, **channel_kw) if credentials else grpc.insecure_channel(target, **channel_kw)
    return channel, trace_service_pb2_grpc.TraceServiceStub(channel)


# -- raw connections and canaries ---------------------------------------------------------------


def connect(port: int) -> socket.socket:
    """A TCP connection to 127.0.0.1:``port`` that sends nothing (its reads time out after 10 s)."""
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def canary_spans() -> list[Any]:
    """One finished span from the SDK, to send with its exporters."""
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("canary").start_as_current_span("canary"):
        pass
    provider.shutdown()
    return list(memory.get_finished_spans())


# -- test certificates ----------------------------------------------------------------


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (openssl CLI), as (cert.pem, key.pem)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext", "basicConstraints=critical,CA:TRUE",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


# -- subprocesses ---------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_TRACEFENCE_", "OTEL_EXPORTER_", "OTEL_SERVICE"))}
    env["PYTHONPATH"] = str(ROOT)
    env["OTEL_TRACEFENCE_SERVICE__HTTP_ENDPOINT"] = "127.0.0.1:0"  # a `tracefence serve` started by a test never takes port 4318
    env.update(extra)
    return env


def launcher() -> list[str]:
    """This checkout's ``tracefence`` command (its package, through ``PYTHONPATH``: see :func:`clean_env`)."""
    return [sys.executable, "-m", "otel_tracefence"]


def command_env(command: Sequence[str] = (), **extra: str) -> dict[str, str]:
    """:func:`clean_env` for ``command`` (another install's ``tracefence`` executable, as ``bench/chaos.py --tracefence``
    runs it: without this checkout on ``PYTHONPATH``, its own package is the one imported), or for :func:`launcher`."""
    env = clean_env(**extra)
    if command:
        env.pop("PYTHONPATH", None)
    return env


def sigint_default() -> None:
    """``preexec_fn`` for a child a test interrupts with SIGINT: the default disposition, so Python installs its
    KeyboardInterrupt handler even where the test run itself was started with SIGINT ignored (a shell's background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def fatal(line: str) -> str:
    """The message of ``tracefence serve``'s fatal log line (``cannot start``, ``cannot listen``): a JSON log line
    at ``CRITICAL``, through the one handler, as every line of the service is."""
    entry = json.loads(line)
    assert (entry["level"], entry["logger"]) == ("CRITICAL", "otel_tracefence.service"), entry
    return entry["message"]


def tracefence(*args: str, cwd: Path | None = None, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "otel_tracefence", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=clean_env(**env))


class ServeProcess:
    """``tracefence serve`` as a real subprocess; its JSON log lines on stderr are read as they come."""

    def __init__(self, *args: str, cwd: Path, preexec_fn: Callable[[], None] | None = None, command: Sequence[str] = (), **env: str) -> None:
        self.proc = subprocess.Popen(
            [*(command or launcher()), "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=command_env(command, **env),
            preexec_fn=preexec_fn,  # e.g. a lowered descriptor limit (resource.setrlimit) for the process alone
        )
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def logs(self) -> list[dict[str, Any]]:
        out = []
        with self._lock:
            lines = list(self.lines)
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"message": line, "raw": True})
        return out

    def log(self, message: str, timeout: float = 20.0) -> dict[str, Any]:
        def find():
            if self.proc.poll() is not None and not any(e.get("message") == message for e in self.logs()):
                self._reader.join(timeout=2)
                raise AssertionError(f"serve exited {self.proc.returncode} before logging {message!r}: {self.stderr()}")
            return next((e for e in self.logs() if e.get("message") == message), None)

        return wait_for(find, timeout, what=f"log line {message!r}")

    def stderr(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def router_log(serve: ServeProcess, message: str, timeout: float = 30.0) -> dict[str, Any]:
    """The router's own log line ``message`` (workers' lines carry ``tracefence.worker``)."""

    def find():
        exited = serve.proc.poll() is not None
        found = next((e for e in serve.logs() if e.get("message") == message and "tracefence.worker" not in e), None)
        if found is None and exited:
            serve._reader.join(timeout=2)
            found = next((e for e in serve.logs() if e.get("message") == message and "tracefence.worker" not in e), None)
            if found is None:
                raise AssertionError(f"serve exited {serve.proc.returncode} before logging {message!r}: {serve.stderr()}")
        return found

    return wait_for(find, timeout, what=f"router log line {message!r}")


def descriptor_limit(limit: int) -> Callable[[], None]:
    """A ``preexec_fn`` that lowers the child's ``RLIMIT_NOFILE`` to ``limit`` descriptors (soft and hard)."""

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return lower
