"""Spans per second through ``tracefence serve`` (client -> service -> counting upstream), against the floor
measured in the same run: parsing and re-serializing the same ``ExportTraceServiceRequest``s with protobuf alone.

Agent-shaped traces: 10 spans each (an ``invoke_agent`` root, 4 chat spans, 3
``execute_tool`` spans with 8 attributes each, 2 plain spans), pre-built as OTLP
protobuf requests of --batch spans in the order an SDK exports them (children
first, the root last), cut every --batch spans: whole traces per request except
the one cut at each boundary, whose root then comes in the next request.

Three processes:
  * this one: builds the requests, measures the floor, and is the client (a plain
    ``TraceServiceStub`` calling ``Export``, --concurrency calls in flight);
  * ``python -m otel_tracefence serve --endpoint 127.0.0.1:0 --upstream http://127.0.0.1:<upstream>
    --review-db <tmp> --decision-wait-ms 0``; its port is read from its
    ``tracefence serve listening`` log line;
  * a counting upstream ``TraceService`` server (this file with --upstream-child)
    that counts spans and stamps when the expected count is reached.

    .venv/bin/python bench/service.py [--requests 200] [--batch 512] [--held 10000] [--concurrency 1]
                                      [--profile out/service.pyspy.txt]

Prints end-to-end spans/s (first Export until the upstream has counted every
span), the floor's spans/s, their ratio (goal: >= 0.5), the p50/p99 latency of each
Export call (client side) with the same calls straight to the upstream for
reference, and the service's peak memory (VmHWM) with --held traces held (their
spans sent without roots, --max-wait-ms 600000) against its VmHWM right after
start. Every child process is stopped with SIGTERM (killed after a timeout),
also on error. --profile attaches ``py-spy record`` to the service during the
throughput phase and prints the top functions.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
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
    request = None
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


# -- the floor ---------------------------------------------------------------------------------------


def floor_spans_per_s(blobs: list[bytes], spans: int) -> float:
    start = time.perf_counter()
    for blob in blobs:
        message = ExportTraceServiceRequest()
        message.ParseFromString(blob)
        message.SerializeToString()
    return spans / (time.perf_counter() - start)


# -- the counting upstream (child process) -------------------------------------------------------------


def upstream_child() -> None:
    """Serve a counting TraceService; print {"port"}; then answer commands on stdin, one JSON line each:
    ``wait N TIMEOUT_S`` -> {"count", "reached_at"} (monotonic clock, system-wide on Linux), ``reset``, ``count``."""
    cond = threading.Condition()
    state = {"count": 0, "last_at": 0.0, "calls": 0}

    class Counting(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            n = span_count(request)
            with cond:
                state["count"] += n
                state["calls"] += 1
                state["last_at"] = time.monotonic()
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
            reply = {"count": state["count"], "calls": state["calls"], "reached_at": state["last_at"]}
        print(json.dumps(reply), flush=True)
    server.stop(1).wait()


class Upstream:
    """A counting upstream in a child process (``command``: how to start it), asked over its stdin/stdout."""

    def __init__(self, command: list[str] | None = None) -> None:
        command = command or [sys.executable, __file__, "--upstream-child"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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


# -- the service (child process) --------------------------------------------------------------------


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


class Service:
    """``python -m otel_tracefence serve`` in a subprocess; its stderr (JSON log lines) is read by a thread."""

    def __init__(self, workdir: Path, upstream_port: int, *, max_wait_ms: float, max_traces: int, extra_args: tuple[str, ...] = ()) -> None:
        env = {**os.environ, "OTEL_TRACEFENCE_MAX_TRACES": str(max_traces)}
        command = [
            sys.executable, "-m", "otel_tracefence", "serve",
            "--endpoint", "127.0.0.1:0",
            "--http-endpoint", "none",
            "--upstream", f"http://127.0.0.1:{upstream_port}",
            "--review-db", str(workdir / "review.db"),
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
            if not self.port and "tracefence serve listening" in line:
                try:
                    self.port = int(json.loads(line)["port"])
                except (ValueError, KeyError):
                    pass
                self._listening.set()
        self._listening.set()

    def status(self, field: str) -> float:
        """A ``/proc/<pid>/status`` field in MiB (VmHWM, VmRSS)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        raise KeyError(field)

    def logged(self, word: str) -> list[dict]:
        out = []
        for line in self.lines:
            if word in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    out.append({"message": line.strip()})
        return out

    def stop(self, timeout_s: float = 30) -> float:
        took = stop_process(self.process, timeout_s)
        self._reader.join(timeout=5)
        return took


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


def percentile(values: list[float], q: float) -> float:
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


# -- main -------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="Export calls in the measured run (default 200)")
    parser.add_argument("--batch", type=int, default=512, help="spans per Export (default 512)")
    parser.add_argument("--held", type=int, default=10000, help="traces held for the memory figure (default 10000)")
    parser.add_argument("--concurrency", type=int, default=1, help="Export calls in flight (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="floor repeats (best is kept; default 3)")
    parser.add_argument("--profile", type=Path, help="attach py-spy to the service for the throughput phase; collapsed stacks here")
    parser.add_argument("--upstream-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_child:
        upstream_child()
        return

    traces = -(-args.requests * args.batch // SPANS_PER_TRACE)
    t_build = time.perf_counter()
    warmup = build_requests(1, 20 * args.batch // SPANS_PER_TRACE, args.batch)
    requests = build_requests(2, traces, args.batch)
    held_requests = build_requests(3, args.held, args.batch, with_roots=False) if args.held else []
    total = sum(map(span_count, requests))
    held_total = sum(map(span_count, held_requests))
    blobs = [r.SerializeToString() for r in requests]
    print(
        f"built {len(requests)} requests of <= {args.batch} spans ({traces} traces x {SPANS_PER_TRACE} spans = {total} spans, "
        f"{sum(map(len, blobs)) / len(blobs) / 1024:.0f} KiB each on average) in {time.perf_counter() - t_build:.1f} s"
    )

    floors = [floor_spans_per_s(blobs, total) for _ in range(args.repeat)]
    workdir = Path(tempfile.mkdtemp(prefix="tracefence-bench-"))
    upstream = service = profiler = None
    try:
        upstream = Upstream()
        print(f"counting upstream: a separate process (pid {upstream.process.pid}), port {upstream.port}")

        # Reference: the same calls straight to the upstream (gRPC round trip, no service).
        upstream.ask("reset")
        send(upstream.port, warmup, args.concurrency)
        upstream.ask("reset")
        direct_start, direct_lat = send(upstream.port, requests, args.concurrency)
        direct = upstream.ask(f"wait {total} 60")
        direct_rate = direct["count"] / (direct["reached_at"] - direct_start)

        # Throughput and latency through the service.
        service = Service(workdir, upstream.port, max_wait_ms=30_000, max_traces=10_000)
        print(f"service: pid {service.process.pid}, port {service.port}, VmHWM after start {service.status('VmHWM'):.0f} MiB")
        upstream.ask("reset")
        send(service.port, warmup, args.concurrency)
        warm = upstream.ask(f"wait {sum(map(span_count, warmup))} 60")
        upstream.ask("reset")
        if args.profile:
            args.profile.parent.mkdir(parents=True, exist_ok=True)
            profiler = start_profiler(service.process.pid, args.profile)
        start, latencies = send(service.port, requests, args.concurrency)
        sent_at = time.monotonic()
        done = upstream.ask(f"wait {total} 120")
        if profiler is not None:
            stop_profiler(profiler)
        counted, reached = done["count"], done["reached_at"]
        service_rate = counted / (reached - start) if counted else 0.0
        rss_after = service.status("VmHWM")
        service.stop()
        errors = service.logged('"ERROR"') + service.logged('"WARNING"')
        service = None

        floors += [floor_spans_per_s(blobs, total) for _ in range(max(1, args.repeat - 1))]  # again after, against drift
        floor = max(floors)

        # Memory with --held traces held (no roots; long maximum wait), in a fresh service.
        held = None
        if args.held:
            upstream.ask("reset")
            service = Service(workdir, upstream.port, max_wait_ms=600_000, max_traces=max(10_000, args.held))
            base = service.status("VmHWM")
            t0 = time.monotonic()
            send(service.port, held_requests, args.concurrency)
            intake_s = time.monotonic() - t0
            time.sleep(0.5)
            peak, rss = service.status("VmHWM"), service.status("VmRSS")
            before_stop = upstream.ask("count")["count"]
            stop_s = service.stop(timeout_s=120)
            after_stop = upstream.ask(f"wait {held_total} 5")
            stopped = service.logged("tracefence serve stopped")
            held = dict(base=base, peak=peak, rss=rss, intake_s=intake_s, before_stop=before_stop, stop_s=stop_s, after_stop=after_stop["count"], stopped=stopped, errors=service.logged('"ERROR"'))
            service = None
    finally:
        if profiler is not None:
            stop_profiler(profiler)
        if service is not None:
            service.stop()
        if upstream is not None:
            upstream.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    load = os.getloadavg()
    print()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    print(f"requests: {len(requests)} Export calls of {args.batch} spans, {args.concurrency} in flight; {traces} agent traces, {total} spans")
    print(f"floor: protobuf parse + serialize alone : {floor:10.0f} spans/s (best of {len(floors)}: {', '.join(f'{f:.0f}' for f in floors)})")
    print(f"client -> upstream directly (reference) : {direct_rate:10.0f} spans/s")
    print(f"client -> tracefence serve -> upstream  : {service_rate:10.0f} spans/s ({counted}/{total} spans counted upstream in {upstream_calls(done)} calls, "
          f"{reached - start:.2f} s; the last Export returned after {sent_at - start:.2f} s)")  # fmt: skip
    print(f"ratio service / floor (goal >= 0.5)     : {service_rate / floor:10.3f}")
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    d50, d99 = percentile(direct_lat, 0.5), percentile(direct_lat, 0.99)
    print(f"Export latency through the service      : p50 {1000 * p50:7.1f} ms, p99 {1000 * p99:7.1f} ms, max {1000 * max(latencies):7.1f} ms")
    print(f"Export latency straight to the upstream : p50 {1000 * d50:7.1f} ms, p99 {1000 * d99:7.1f} ms (added by the service: p50 {1000 * (p50 - d50):.1f} ms, p99 {1000 * (p99 - d99):.1f} ms)")
    print(f"service VmHWM after the throughput run  : {rss_after:.0f} MiB; warm-up counted {warm['count']} spans")
    if errors:
        print(f"service logged {len(errors)} warning/error line(s) in the throughput run; first: {errors[0].get('message')}")
    if held:
        print(
            f"peak memory with {args.held} traces held ({held_total} spans, roots withheld): VmHWM {held['peak']:.0f} MiB "
            f"(VmRSS {held['rss']:.0f} MiB; baseline VmHWM right after start {held['base']:.0f} MiB; "
            f"+{(held['peak'] - held['base']) * 1024 / args.held:.1f} KiB per trace); intake took {held['intake_s']:.1f} s"
        )
        print(
            f"  held spans forwarded before SIGTERM: {held['before_stop']} (expected 0); SIGTERM -> exit took {held['stop_s']:.1f} s, "
            f"after which the upstream had counted {held['after_stop']}/{held_total}"
        )
        for entry in held["stopped"]:
            print(f"  service said: {json.dumps({k: v for k, v in entry.items() if k not in ('time', 'logger', 'level')})}")
        for entry in held["errors"][:3]:
            print(f"  service error: {entry.get('message')}")
    if args.profile:
        print()
        print(f"profile of the service during the throughput phase ({args.profile}):")
        print_profile(args.profile)


def upstream_calls(reply: dict) -> int:
    return reply.get("calls", 0)


if __name__ == "__main__":
    main()
