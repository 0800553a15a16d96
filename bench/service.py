"""The same agent-shaped OTLP requests through ``tracefence serve``, the rotel collector and a bare Python
gRPC relay, side by side: each peer forwards to a counting upstream in its own process.

Agent-shaped traces: 10 spans each (an ``invoke_agent`` root, 4 chat spans, 3
``execute_tool`` spans with 8 attributes each, 2 plain spans), pre-built as OTLP
protobuf requests of --batch spans in the order an SDK exports them (children
first, the root last), cut every --batch spans: whole traces per request except
the one cut at each boundary, whose root then comes in the next request.

Peers, each a process of its own, each with its own counting upstream process:
  * ``tracefence``: ``python -m otel_tracefence serve --endpoint 127.0.0.1:0 --upstream http://127.0.0.1:<upstream>
    --review-db <tmp> --decision-wait-ms 0 --max-wait-ms 30000`` from this checkout;
  * ``tracefence-2w``: the same command with ``--workers 2`` (a router and two worker processes; its CPU and
    memory are the sums over the three);
  * ``tracefence-noindex``: the same command with the write index off (``OTEL_TRACEFENCE_WRITE_INDEX_MAX_ENTRIES=0``):
    ``tracefence/tracefence-noindex`` is the store-backed index's cost;
  * ``tracefence@base`` (with ``--baseline DIR``): the same command from another checkout
    (``PYTHONPATH=DIR``), e.g. ``git worktree add /tmp/base <rev>``: before/after in one run;
  * ``rotel``: the ``rotel-agent`` binary of the ``rotel`` wheel (a test dependency), ``start
    --exporter otlp --otlp-exporter-protocol grpc`` with its default batching;
  * ``relay``: this file with --relay-child, a gRPC server that hands each Export's bytes, unparsed,
    to the upstream and returns its answer (the least a Python OTLP hop can do).

Every repeat runs every peer once, in turn (interleaved, so drift on the machine hits them alike),
each from a fresh start: warm-up, then the throughput run (--requests Export calls of --batch spans,
--concurrency calls in flight, a plain ``TraceServiceStub``), then a paced probe (--probes whole
10-span traces, one Export every 1/--probe-rate s, one at a time on an idle peer).

    .venv/bin/python bench/service.py [--requests 200] [--batch 512] [--concurrency 4] [--repeat 3]
                                      [--peers tracefence,rotel,relay] [--baseline DIR] [--held 10000]
                                      [--profile out/service.pyspy.txt]

Per peer and run it reports:
  * spans/s from the first Export until the upstream holds every span (not until acknowledgement);
  * CPU microseconds per span of the peer's process (utime + stime from ``/proc/<pid>/stat``, all threads,
    over the throughput run until the upstream holds every span) and of its upstream;
  * upstream Export calls per 100k spans;
  * Export latency (client side) and end-to-end latency (Export sent -> the upstream holds all 10 spans of
    the probe trace; ``time.monotonic`` is system-wide on Linux, so the two processes' stamps compare) p50/p99;
  * peak memory: the peer's VmHWM at the end of the run.
Then the paired ratios of each run, tracefence/rotel, tracefence/relay (and tracefence/tracefence@base,
tracefence-2w/tracefence, tracefence-2w/rotel, ...),
as min / median / max. With --held N, the memory per held span of ``tracefence serve`` (and the baseline):
N traces sent without roots (--max-wait-ms 600000), VmHWM against VmHWM right after start.
Every child process is stopped with SIGTERM (killed after a timeout), also on error. --profile attaches
``py-spy record`` to the (last) tracefence service during its throughput run and prints the top functions.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from agent_shape import tool_attributes

GRPC_OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20), ("grpc.so_reuseport", 0)]
SPANS_PER_TRACE = 10
ROOT_INDEX = SPANS_PER_TRACE - 1  # the root ends last, so an SDK exports it last
PROBE_MARK = 0x7E  # first byte of a probe trace's id: the upstream stamps when each probe trace is complete
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the traces ------------------------------------------------------------------------------------


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def agent_trace(salt: int, t: int, start_ns: int) -> list[Span]:
    """One agent trace (as bench/processor.py runs it), its spans in SDK export order: children, then the root."""
    trace_id = struct.pack(">QQ", 0x7F00_0000_0000_0000 | salt << 40 | t, t + 1)
    root_id = struct.pack(">Q", (salt << 48) | (t << 8) | 1)
    ids = iter(range(2, 64))
    spans: list[Span] = []
    clock = start_ns

    def child(name: str, kind: int, attrs: dict) -> None:
        nonlocal clock
        span_id = struct.pack(">Q", (salt << 48) | (t << 8) | next(ids))
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=root_id,
                name=name,
                kind=kind,
                start_time_unix_nano=clock,
                end_time_unix_nano=clock + 1_000_000,
                attributes=[_kv(k, v) for k, v in attrs.items()],
                flags=0x100,  # W3C flags with "parent is not remote" known
            )
        )
        clock += 2_000_000

    for turn in range(3):
        child("chat model", Span.SPAN_KIND_CLIENT, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
        child(f"execute_tool tool_{turn}", Span.SPAN_KIND_INTERNAL, tool_attributes(t, turn))
    child("chat model", Span.SPAN_KIND_CLIENT, {"gen_ai.operation.name": "chat"})
    child("validate output", Span.SPAN_KIND_INTERNAL, {})
    child("render answer", Span.SPAN_KIND_INTERNAL, {})
    spans.append(
        Span(
            trace_id=trace_id,
            span_id=root_id,
            name="invoke_agent billing",
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start_ns - 1_000_000,
            end_time_unix_nano=clock,
            attributes=[_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", "billing")],
            flags=0x100,
        )
    )
    assert len(spans) == SPANS_PER_TRACE
    return spans


def build_requests(salt: int, traces: int, batch: int, *, with_roots: bool = True) -> list[ExportTraceServiceRequest]:
    """Requests of ``batch`` spans (the last may be shorter): one resource and scope, as the SDK's OTLP exporter sends."""
    start = time.time_ns() - 3_600_000_000_000
    stream = (span for t in range(traces) for i, span in enumerate(agent_trace(salt, t, start + t * 50_000_000)) if with_roots or i != ROOT_INDEX)
    requests: list[ExportTraceServiceRequest] = []
    request = scope = None
    for span in stream:
        if request is None or len(scope.spans) >= batch:
            request = ExportTraceServiceRequest()
            resource_spans = request.resource_spans.add()
            resource_spans.resource.attributes.extend(
                [_kv("service.name", "billing-agent"), _kv("telemetry.sdk.language", "python"), _kv("telemetry.sdk.name", "opentelemetry"), _kv("service.instance.id", "bench-1")]
            )
            scope = resource_spans.scope_spans.add()
            scope.scope.name = "bench.agent"
            scope.scope.version = "1.0"
            requests.append(request)
        scope.spans.append(span)
    return requests


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def probe_requests(count: int) -> list[ExportTraceServiceRequest]:
    """``count`` whole traces, one request each, their trace ids marked with ``PROBE_MARK``."""
    requests = build_requests(9, count, SPANS_PER_TRACE)
    for request in requests:
        for span in request.resource_spans[0].scope_spans[0].spans:
            span.trace_id = bytes([PROBE_MARK]) + span.trace_id[1:]
    return requests


# -- the counting upstream (child process) -------------------------------------------------------------


def upstream_child() -> None:
    """Serve a counting TraceService; print {"port"}; then answer commands on stdin, one JSON line each:
    ``wait N TIMEOUT_S`` -> {"count", "calls", "reached_at"} (monotonic clock, system-wide on Linux),
    ``reset``, ``count``, ``probes`` -> {"probes": {trace id hex: monotonic time its last span arrived}}."""
    cond = threading.Condition()
    state = {"count": 0, "last_at": 0.0, "calls": 0}
    probe_spans: collections.Counter[bytes] = collections.Counter()
    probe_done: dict[str, float] = {}

    class Counting(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            now = time.monotonic()
            n = 0
            marked = []
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    n += len(ss.spans)
                    for span in ss.spans:
                        if span.trace_id[:1] == b"\x7e":
                            marked.append(span.trace_id)
            with cond:
                state["count"] += n
                state["calls"] += 1
                state["last_at"] = now
                for trace_id in marked:
                    probe_spans[trace_id] += 1
                    if probe_spans[trace_id] == SPANS_PER_TRACE:
                        probe_done[trace_id.hex()] = now
                cond.notify_all()
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=GRPC_OPTIONS)
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Counting(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"port": port}), flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command:
            continue
        with cond:
            if command[0] == "wait":
                target, deadline = int(command[1]), time.monotonic() + float(command[2])
                while state["count"] < target and time.monotonic() < deadline:
                    cond.wait(timeout=max(0.0, deadline - time.monotonic()))
            elif command[0] == "reset":
                state.update(count=0, calls=0, last_at=0.0)
                probe_spans.clear()
                probe_done.clear()
            elif command[0] == "probes":
                print(json.dumps({"probes": probe_done}), flush=True)
                continue
            reply = {"count": state["count"], "calls": state["calls"], "reached_at": state["last_at"]}
        print(json.dumps(reply), flush=True)
    server.stop(1).wait()


def relay_child(upstream_port: int) -> None:
    """A bare Python OTLP/gRPC relay: each Export's bytes, unparsed, to the upstream; its answer back. Prints {"port"}."""
    channel = grpc.insecure_channel(f"127.0.0.1:{upstream_port}", options=GRPC_OPTIONS)
    forward = channel.unary_unary(EXPORT_METHOD)  # no serializers: bytes in, bytes out

    def export(request: bytes, context) -> bytes:
        return forward(request, timeout=60)

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": grpc.unary_unary_rpc_method_handler(export)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler], options=GRPC_OPTIONS)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"port": port}), flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    server.stop(1).wait()
    channel.close()


class Upstream:
    """A counting upstream in a child process, asked over its stdin/stdout."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, "--upstream-child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("counting upstream did not start")
        self.port = json.loads(line)["port"]
        self._lock = threading.Lock()

    def ask(self, command: str) -> dict:
        with self._lock:  # one question and its answer at a time, whichever thread asks
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("counting upstream died")
        return json.loads(line)

    def stop(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        stop_process(self.process, 5)


# -- the peers (child processes) --------------------------------------------------------------------


def stop_process(process: subprocess.Popen, timeout_s: float) -> float:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL; the seconds it took."""
    start = time.monotonic()
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            print(f"  (pid {process.pid} did not stop within {timeout_s:.0f} s of SIGTERM: killed)", file=sys.stderr)
            process.kill()
            process.wait()
    return time.monotonic() - start


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status_mib(pid: int, field: str) -> float:
    """A ``/proc/<pid>/status`` field in MiB (VmHWM, VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def wait_ready(port: int, process: subprocess.Popen, what: str, timeout_s: float = 30) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited {process.returncode} at start")
            try:
                grpc.channel_ready_future(channel).result(timeout=0.5)
                return
            except grpc.FutureTimeoutError:
                pass
        raise RuntimeError(f"{what} did not accept connections within {timeout_s:.0f} s")
    finally:
        channel.close()


class Peer:
    """One process between the client and its upstream: ``process``, ``port``, ``stop()``."""

    process: subprocess.Popen
    port: int
    name: str

    def stop(self, timeout_s: float = 30) -> float:
        return stop_process(self.process, timeout_s)

    def errors(self) -> list[str]:
        return []

    def pids(self) -> list[int]:
        """The peer's processes: itself and its children (the workers of ``serve --workers N``)."""
        pid = self.process.pid
        children = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                children += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
        return [pid, *children]


class Service(Peer):
    """``python -m otel_tracefence serve`` in a subprocess (from ``checkout`` when given); its stderr (JSON log lines) read by a thread."""

    def __init__(
        self, workdir: Path, upstream_port: int, *, max_wait_ms: float, max_traces: int, name: str = "tracefence",
        checkout: Path | None = None, extra_args: tuple[str, ...] = (), settings: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_TRACEFENCE_", "OTEL_EXPORTER_OTLP"))}
        env["OTEL_TRACEFENCE_MAX_TRACES"] = str(max_traces)
        env.update(settings or {})  # OTEL_TRACEFENCE_* settings of this run
        # The checkout asked for, else this file's own: a venv shared by worktrees has another one installed.
        env["PYTHONPATH"] = str(checkout if checkout is not None else Path(__file__).resolve().parent.parent)
        command = [
            sys.executable, "-m", "otel_tracefence", "serve",
            "--endpoint", "127.0.0.1:0",
            *(() if checkout is not None else ("--http-endpoint", "none")),  # a baseline checkout may predate it
            "--upstream", f"http://127.0.0.1:{upstream_port}",
            "--review-db", str(workdir / f"review-{name}.db"),
            "--decision-wait-ms", "0",
            "--max-wait-ms", str(max_wait_ms),
            *extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.port = 0
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(60) or not self.port:
            tail = "".join(self.lines[-20:])
            stop_process(self.process, 5)
            raise RuntimeError(f"tracefence serve did not report its port; stderr:\n{tail}")

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)
            if not self.port and "tracefence serve listening" in line and '"tracefence.worker"' not in line:
                try:
                    self.port = int(json.loads(line)["port"])
                except (ValueError, KeyError):
                    pass
                self._listening.set()
        self._listening.set()

    def logged(self, word: str) -> list[dict]:
        out = []
        for line in self.lines:
            if word in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    out.append({"message": line.strip()})
        return out

    def errors(self) -> list[str]:
        return [str(e.get("message")) for e in self.logged('"ERROR"') + self.logged('"WARNING"')]

    def stop(self, timeout_s: float = 30) -> float:
        took = stop_process(self.process, timeout_s)
        self._reader.join(timeout=5)
        return took


def rotel_binary() -> Path | None:
    """The ``rotel-agent`` executable the ``rotel`` wheel ships (its ``Agent.agent_path``), or None."""
    try:
        from rotel.agent import Agent
    except ImportError:
        return None
    path = Path(Agent().agent_path)
    return path if path.is_file() else None


def free_ports(n: int) -> list[int]:
    """Ports free on loopback now (rotel 0.0.1a15 cannot bind port 0)."""
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


class Rotel(Peer):
    """The rotel collector: OTLP/gRPC in, OTLP/gRPC out to the upstream, default batching."""

    def __init__(self, binary: Path, workdir: Path, upstream_port: int) -> None:
        self.name = "rotel"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ROTEL_"))}
        for attempt in range(3):
            grpc_port, http_port = free_ports(2)
            command = [
                str(binary), "start",
                "--pid-file", str(workdir / "rotel.pid"),
                "--log-file", str(workdir / "rotel-daemon.log"),
                "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
                "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
                "--exporter", "otlp",
                "--otlp-exporter-endpoint", f"http://127.0.0.1:{upstream_port}",
                "--otlp-exporter-protocol", "grpc",
            ]  # fmt: skip
            with open(workdir / "rotel.log", "ab") as sink:
                self.process = subprocess.Popen(command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
            try:
                wait_ready(grpc_port, self.process, "rotel")
                self.port = grpc_port
                return
            except RuntimeError:
                stop_process(self.process, 5)
                if attempt == 2:
                    raise


class Relay(Peer):
    """This file with --relay-child."""

    def __init__(self, upstream_port: int) -> None:
        self.name = "relay"
        self.process = subprocess.Popen([sys.executable, __file__, "--relay-child", str(upstream_port)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("relay did not start")
        self.port = json.loads(line)["port"]


# -- the client ----------------------------------------------------------------------------------------


def send(port: int, requests: list[ExportTraceServiceRequest], concurrency: int) -> tuple[float, list[float]]:
    """Export every request (``concurrency`` calls in flight, in order); the monotonic start and each call's seconds."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    try:
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        latencies: list[float] = []
        lock = threading.Lock()
        pending = iter(requests)

        def worker() -> None:
            while True:
                with lock:
                    request = next(pending, None)
                if request is None:
                    return
                t0 = time.perf_counter()
                stub.Export(request, timeout=60)
                took = time.perf_counter() - t0
                with lock:
                    latencies.append(took)

        start = time.monotonic()
        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if len(latencies) != len(requests):
            raise RuntimeError(f"only {len(latencies)} of {len(requests)} Export calls succeeded")
        return start, latencies
    finally:
        channel.close()


def probe(port: int, requests: list[ExportTraceServiceRequest], rate: float) -> tuple[dict[str, float], list[float]]:
    """One Export every 1/rate s, one at a time: the monotonic time each probe trace was sent, and each call's seconds."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    try:
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        sent: dict[str, float] = {}
        latencies: list[float] = []
        next_at = time.monotonic()
        for request in requests:
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            next_at += 1 / rate
            t0 = time.monotonic()
            stub.Export(request, timeout=60)
            latencies.append(time.monotonic() - t0)
            sent[request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()] = t0
        return sent, latencies
    finally:
        channel.close()


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 1)) - 1))]


# -- profile ------------------------------------------------------------------------------------------------


def start_profiler(pid: int, path: Path) -> subprocess.Popen | None:
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        print("  (no py-spy beside this python: --profile skipped)")
        return None
    process = subprocess.Popen(
        [str(py_spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--nonblocking", "--output", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # let it attach
    return process


def stop_profiler(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def print_profile(path: Path, top: int = 25) -> None:
    """Top functions of py-spy's collapsed stacks: by self samples and by inclusive samples."""
    if not path.exists():
        print("  (py-spy wrote no profile)")
        return
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n

        def name(frame: str) -> str:  # "function (path/to/file.py:123)" -> "function (file.py)"
            function, _, where = frame.partition(" (")
            where = where.rstrip(")").rsplit(":", 1)[0]
            parts = where.split("/")
            short = "/".join(parts[parts.index("site-packages") + 1 :]) if "site-packages" in parts else "/".join(parts[-2:])
            return f"{function} ({short})"

        frames = [name(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        print("  (empty profile)")
        return
    print(f"  {total} samples of busy threads (py-spy, 200 Hz, idle threads excluded)")
    print("  top by own time:")
    for frame, n in own.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {frame}")
    print("  top by inclusive time:")
    for frame, n in inclusive.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {frame}")


# -- one run of one peer --------------------------------------------------------------------------------------


def start_peer(kind: str, workdir: Path, upstream: Upstream, args: argparse.Namespace) -> Peer:
    if kind == "tracefence":
        return Service(workdir, upstream.port, max_wait_ms=30_000, max_traces=10_000)
    if kind == "tracefence-noindex":  # the write index off (write_index_max_entries 0): the index's cost, paired
        return Service(workdir, upstream.port, max_wait_ms=30_000, max_traces=10_000, name="tracefence-noindex", settings={"OTEL_TRACEFENCE_WRITE_INDEX_MAX_ENTRIES": "0"})
    if kind == "tracefence-2w":
        return Service(workdir, upstream.port, max_wait_ms=30_000, max_traces=10_000, name="tracefence-2w", extra_args=("--workers", "2"))
    if kind == "tracefence@base":
        return Service(workdir, upstream.port, max_wait_ms=30_000, max_traces=10_000, name="tracefence@base", checkout=args.baseline)
    if kind == "rotel":
        return Rotel(args.rotel_binary, workdir, upstream.port)
    if kind == "relay":
        return Relay(upstream.port)
    raise ValueError(kind)


def run_peer(kind: str, workdir: Path, data: dict, args: argparse.Namespace, profile: Path | None) -> dict:
    """Start ``kind`` and its upstream afresh, warm up, measure throughput then the probe; stop both."""
    upstream = Upstream()
    peer = None
    profiler = None
    try:
        peer = start_peer(kind, workdir, upstream, args)
        send(peer.port, data["warmup"], args.concurrency)
        upstream.ask(f"wait {data['warmup_spans']} 60")
        upstream.ask("reset")
        if profile is not None:
            profiler = start_profiler(peer.process.pid, profile)
        pids = peer.pids()
        cpu0, up_cpu0 = [cpu_seconds(p) for p in pids], cpu_seconds(upstream.process.pid)
        start, latencies = send(peer.port, data["requests"], args.concurrency)
        done = upstream.ask(f"wait {data['total']} 120")
        cpu1, up_cpu1 = [cpu_seconds(p) for p in pids], cpu_seconds(upstream.process.pid)
        if profiler is not None:
            stop_profiler(profiler)
            profiler = None
        counted, reached = done["count"], done["reached_at"]
        if counted < data["total"]:
            raise RuntimeError(f"{kind}: the upstream counted {counted} of {data['total']} spans within 120 s")
        upstream.ask("reset")
        sent, probe_lat = probe(peer.port, data["probes"], args.probe_rate)
        upstream.ask(f"wait {len(data['probes']) * SPANS_PER_TRACE} 30")
        done_at = upstream.ask("probes")["probes"]
        e2e = [done_at[t] - s for t, s in sent.items() if t in done_at]
        if len(e2e) < len(sent):
            raise RuntimeError(f"{kind}: {len(sent) - len(e2e)} of {len(sent)} probe traces never arrived whole")
        return {
            "rate": counted / (reached - start),
            "cpu_us": (sum(cpu1) - sum(cpu0)) / counted * 1e6,  # summed over the peer's processes
            "cpu_us_each": [(b - a) / counted * 1e6 for a, b in zip(cpu0, cpu1)],
            "upstream_cpu_us": (up_cpu1 - up_cpu0) / counted * 1e6,
            "calls_per_100k": done["calls"] / counted * 100_000,
            "export_p50": percentile(probe_lat, 0.5), "export_p99": percentile(probe_lat, 0.99),
            "e2e_p50": percentile(e2e, 0.5), "e2e_p99": percentile(e2e, 0.99),
            "load_p50": percentile(latencies, 0.5),
            "hwm_mib": sum(proc_status_mib(p, "VmHWM") for p in pids),
            "errors": peer.errors(),
        }  # fmt: skip
    finally:
        if profiler is not None:
            stop_profiler(profiler)
        if peer is not None:
            peer.stop()
        upstream.stop()


HELD_DRAIN_TIMEOUT_S = 600  # the held run's drain timeout: what it holds is acknowledged only while a stop could hand it on
HELD_WARM_UP_TRACES = 200  # whole traces sent first, so that the service measures the upstream's rate


def held_memory(name: str, workdir: Path, held_requests: list, args: argparse.Namespace) -> dict:
    """``tracefence serve`` holding --held traces (roots withheld): VmHWM over VmHWM after a warm-up.

    Spans read and not forwarded (held ones too) are acknowledged only while a stop could hand them on at the
    upstream's measured rate within an eighth of ``drain_timeout_s``, and never past 8,192 before a send was
    measured (docs/DECISIONS.md, 195): the held run sets ``drain_timeout_s`` to ``HELD_DRAIN_TIMEOUT_S`` and
    first sends ``HELD_WARM_UP_TRACES`` whole traces, forwarded, so that a rate is measured."""
    upstream = Upstream()
    service = None
    try:
        service = Service(
            workdir, upstream.port, name=name, max_wait_ms=600_000, max_traces=max(10_000, args.held), checkout=args.baseline if name.endswith("@base") else None,
            settings={"OTEL_TRACEFENCE_SERVICE__DRAIN_TIMEOUT_S": str(HELD_DRAIN_TIMEOUT_S)},
        )  # fmt: skip
        warm_up = build_requests(5, HELD_WARM_UP_TRACES, args.batch)
        send(service.port, warm_up, args.concurrency)
        upstream.ask(f"wait {HELD_WARM_UP_TRACES * SPANS_PER_TRACE} 60")
        base = proc_status_mib(service.process.pid, "VmHWM")
        send(service.port, held_requests, args.concurrency)
        time.sleep(0.5)
        peak = proc_status_mib(service.process.pid, "VmHWM")
        before_stop = upstream.ask("count")["count"] - HELD_WARM_UP_TRACES * SPANS_PER_TRACE  # held spans forwarded
        return {"base": base, "peak": peak, "forwarded_before_stop": before_stop}
    finally:
        if service is not None:
            service.stop(timeout_s=120)
        upstream.stop()


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


# -- main -------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="Export calls in each throughput run (default 200)")
    parser.add_argument("--batch", type=int, default=512, help="spans per Export (default 512)")
    parser.add_argument("--concurrency", type=int, default=4, help="Export calls in flight (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of every peer, interleaved (default 3)")
    parser.add_argument("--peers", default="tracefence,rotel,relay", help="comma-separated: tracefence, tracefence-noindex, tracefence-2w, rotel, relay (default: tracefence,rotel,relay)")
    parser.add_argument("--baseline", type=Path, help="another checkout: adds the peer tracefence@base (its serve, PYTHONPATH=DIR)")
    parser.add_argument("--probes", type=int, default=100, help="probe traces per run (default 100)")
    parser.add_argument("--probe-rate", type=float, default=25.0, help="probe Export calls per second (default 25)")
    parser.add_argument("--held", type=int, default=10000, help="traces held for the memory figure (default 10000; 0: skip)")
    parser.add_argument("--profile", type=Path, help="attach py-spy to tracefence serve in its last throughput run; collapsed stacks here")
    parser.add_argument("--upstream-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--relay-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_child:
        upstream_child()
        return
    if args.relay_child is not None:
        relay_child(args.relay_child)
        return

    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        peers.insert(peers.index("tracefence") + 1 if "tracefence" in peers else 0, "tracefence@base")
    args.rotel_binary = rotel_binary()
    if "rotel" in peers and args.rotel_binary is None:
        print("rotel is not installed here (pip install -e '.[test]' brings rotel==0.0.1a15): its peer is skipped")
        peers.remove("rotel")

    traces = -(-args.requests * args.batch // SPANS_PER_TRACE)
    t_build = time.perf_counter()
    warmup = build_requests(1, 20 * args.batch // SPANS_PER_TRACE, args.batch)
    requests = build_requests(2, traces, args.batch)
    data = {
        "warmup": warmup, "warmup_spans": sum(map(span_count, warmup)),
        "requests": requests, "total": sum(map(span_count, requests)),
        "probes": probe_requests(args.probes),
    }  # fmt: skip
    held_requests = build_requests(3, args.held, args.batch, with_roots=False) if args.held else []
    size = sum(r.ByteSize() for r in requests) / len(requests) / 1024
    print(f"built {len(requests)} requests of <= {args.batch} spans ({traces} traces x {SPANS_PER_TRACE} spans = {data['total']} spans, "
          f"{size:.0f} KiB each on average) in {time.perf_counter() - t_build:.1f} s")  # fmt: skip
    print(f"peers: {', '.join(peers)}; {args.repeat} repeats, interleaved; {args.concurrency} Export calls in flight")

    results: dict[str, list[dict]] = {p: [] for p in peers}
    workdir = Path(tempfile.mkdtemp(prefix="tracefence-bench-"))
    held: dict[str, dict] = {}
    try:
        for r in range(args.repeat):
            for kind in peers:
                profile = args.profile if (args.profile and kind == "tracefence" and r == args.repeat - 1) else None
                res = run_peer(kind, workdir, data, args, profile)
                results[kind].append(res)
                each = "" if len(res["cpu_us_each"]) < 2 else f" (router {res['cpu_us_each'][0]:.1f} + workers {' + '.join(f'{c:.1f}' for c in res['cpu_us_each'][1:])})"
                print(f"  repeat {r + 1} {kind:16s} {res['rate']:9.0f} spans/s, {res['cpu_us']:6.1f} us CPU/span{each}, "
                      f"{res['calls_per_100k']:7.0f} upstream calls/100k spans, e2e p50 {1000 * res['e2e_p50']:6.1f} ms, VmHWM {res['hwm_mib']:.0f} MiB", flush=True)  # fmt: skip
        if args.held:
            for name in [p for p in peers if p in ("tracefence", "tracefence@base")]:
                held[name] = held_memory(name, workdir, held_requests, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    load = os.getloadavg()
    print()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    print(f"each run: {len(requests)} Export calls of {args.batch} spans ({data['total']} spans), {args.concurrency} in flight; "
          f"probe: {args.probes} whole traces at {args.probe_rate:g}/s, one in flight")  # fmt: skip
    print("median (min-max) over the runs:")
    print(f"  {'peer':16s} {'spans/s':>24s} {'CPU us/span':>18s} {'upstream us/span':>17s} {'calls/100k':>10s} "
          f"{'Export p50/p99 ms':>18s} {'e2e p50/p99 ms':>16s} {'VmHWM MiB':>10s}")  # fmt: skip
    for kind, runs in results.items():
        col = lambda key: [run[key] for run in runs]  # noqa: E731
        print(f"  {kind:16s} {spread(col('rate'), '{:.0f}'):>24s} {spread(col('cpu_us'), '{:.1f}'):>18s} {statistics.median(col('upstream_cpu_us')):17.1f} "
              f"{statistics.median(col('calls_per_100k')):10.0f} "
              f"{1000 * statistics.median(col('export_p50')):8.1f}/{1000 * statistics.median(col('export_p99')):<8.1f} "
              f"{1000 * statistics.median(col('e2e_p50')):7.1f}/{1000 * statistics.median(col('e2e_p99')):<7.1f} "
              f"{statistics.median(col('hwm_mib')):10.0f}")  # fmt: skip
    print("paired ratios of spans/s (run i of one peer over run i of the other), median (min-max):")
    for mine in [p for p in peers if p in ("tracefence", "tracefence-2w")]:
        for other in [p for p in peers if p != mine and not (mine == "tracefence" and p == "tracefence-2w")]:
            ratios = [a["rate"] / b["rate"] for a, b in zip(results[mine], results[other])]
            print(f"  {mine}/{other:16s}: {spread(ratios)}")
    for kind, runs in results.items():
        errors = [e for run in runs for e in run["errors"]]
        if errors:
            print(f"{kind} logged {len(errors)} warning/error line(s); first: {errors[0]}")
    for name, h in held.items():
        spans = args.held * (SPANS_PER_TRACE - 1)
        print(f"{name}: {args.held} traces held ({spans} spans, roots withheld): VmHWM {h['peak']:.0f} MiB over {h['base']:.0f} MiB after start, "
              f"{(h['peak'] - h['base']) * 1048576 / spans:.0f} B per held span; forwarded before SIGTERM {h['forwarded_before_stop']} (expected 0)")  # fmt: skip
    if args.profile:
        print()
        print(f"profile of tracefence serve during its last throughput run ({args.profile}):")
        print_profile(args.profile)


if __name__ == "__main__":
    main()
