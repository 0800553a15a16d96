"""Soak: several concurrent OTLP clients against ``tracefence serve`` for a bounded time, checking that
memory stays under a bound derived from the configured limits and that no acknowledged span is lost.

Processes (all on loopback):
  * this one: starts the others, samples the service's VmRSS every second, checks and prints;
  * ``python -m otel_tracefence serve`` with explicit bounds (``--max-traces``, ``--intake-queue-spans``,
    ``--forward-queue-spans``, ``--decided-cache-size``; given as ``OTEL_TRACEFENCE_*`` variables), a
    real SQLite review queue, decision wait 0 and ``--max-wait-ms``; started and stopped (SIGTERM)
    with ``bench/service.py``'s ``Service``;
  * a counting upstream ``TraceService`` (this file with --upstream-child) that records every span
    it receives **by span id** (a bit per span; duplicates counted);
  * --clients client processes (this file with --client-child), each a plain ``TraceServiceStub``
    with one Export call in flight, as fast as the service acknowledges, for --seconds. A call
    refused with ``UNAVAILABLE`` (back-pressure) is retried after the ``RetryInfo`` delay the service
    gave, with the same spans; a trace counts as acknowledged only when the call carrying it
    returned OK.

The traces are ``bench/service.py``'s agent traces (10 spans: an ``invoke_agent`` root, 4 chat
spans, 3 ``execute_tool`` spans, 2 plain spans; the root last), --traces-per-request whole traces
per call. Span ids encode (client, trace number, span index), so the upstream can say exactly
which spans of which acknowledged traces it never got. Every --review-every-th trace's write timed
out (class ``review``: a review item is written to SQLite); every --rootless-every-th trace never
sends its root, so it is held until --max-wait-ms and decided partial (or evicted past
--max-traces).

At the end: every client stops, the main process waits until the upstream has counted every
acknowledged span (or --drain-wait-s), then stops the service with SIGTERM (it decides what it
still holds and drains its queues), then asks the upstream which acknowledged spans are missing.

Checks (exit status 1 if one fails):
  * memory: the service's VmRSS never exceeds the bound (printed with its terms):
      VmRSS after start + SLACK_MIB
      + (max_traces x spans per trace + intake_queue_spans + forward_queue_spans) x SPAN_KIB
      + decided_cache_size x DECIDED_KIB
    SPAN_KIB is 4: ``bench/service.py --held 10000`` measured 23.7 KiB per 9-span trace held
    (2.6 KiB per span), rounded up by half again; DECIDED_KIB is 4 (a remembered trace keeps its
    few steps for late spans); SLACK_MIB, 64, covers gRPC threads, in-flight requests and allocator
    arenas. Also printed: VmRSS over the run by thirds, to show it levels off rather than climbs;
  * no lost spans: every span of every acknowledged trace reached the upstream (by span id), and
    the service dropped none (``dropped_spans`` in its ``tracefence serve stopped`` log line);
  * the review queue: the SQLite file holds one item for every acknowledged review trace.

--upstream-delay-ms makes the upstream slow, so the forward queue fills up to its back-pressure
mark and memory is measured near the bounds rather than far below them.

Printed: acknowledged spans/s, Export latency p50/p99 (OK calls, client side), refusals
(``UNAVAILABLE``) and rejected spans (partial success), drops, duplicates seen upstream, the
limits the service reported in its ``listening`` log line.

    .venv/bin/python bench/soak.py [--seconds 120] [--clients 4] [--traces-per-request 20] [--upstream-delay-ms 0]
    SOAK_SECONDS=300 make soak
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from concurrent import futures
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import GRPC_OPTIONS, ROOT_INDEX, SPANS_PER_TRACE, Service, Upstream, agent_trace, percentile  # noqa: E402

SPAN_KIB = 4.0
DECIDED_KIB = 4.0
SLACK_MIB = 64.0
WRITE_INDEX = 5  # the turn-2 execute_tool span of agent_trace(): the trace's write
FULL_MASK = sum(1 << i for i in range(1, SPANS_PER_TRACE + 1))  # span indexes 1 (the root) .. 10
ROOTLESS_MASK = FULL_MASK & ~(1 << 1)
_T_BITS = (1 << 40) - 1


def decode(span_id: bytes) -> tuple[int, int, int]:
    """(client salt, trace number, span index) from an agent_trace() span id."""
    value = int.from_bytes(span_id, "big")
    return value >> 48, (value >> 8) & _T_BITS, value & 0xFF


# -- the counting upstream (child process) ---------------------------------------------------------------


def upstream_child(delay_s: float) -> None:
    """Serve a TraceService that sets one bit per span id (answering each call after ``delay_s``);
    print {"port"}; answer commands on stdin: ``stats``; ``wait N TIMEOUT_S``;
    ``check {"acked": {salt: [[t0, t1], ...]}, "rootless_every": K}``."""
    cond = threading.Condition()
    masks: dict[int, array] = {}
    state = {"spans": 0, "calls": 0, "duplicates": 0}

    class Counting(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            if delay_s:
                time.sleep(delay_s)
            ids = [span.span_id for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
            with cond:
                for span_id in ids:
                    salt, t, index = decode(span_id)
                    table = masks.setdefault(salt, array("H"))
                    if t >= len(table):
                        table.extend(array("H", bytes(2 * (t + 1 - len(table) + 4096))))
                    bit = 1 << index
                    if table[t] & bit:
                        state["duplicates"] += 1
                    else:
                        table[t] |= bit
                        state["spans"] += 1
                state["calls"] += 1
                cond.notify_all()
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=GRPC_OPTIONS)
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Counting(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"port": port}), flush=True)
    for line in sys.stdin:
        command, _, rest = line.strip().partition(" ")
        if not command:
            continue
        with cond:
            if command == "wait":
                target, timeout_s = rest.split()
                deadline = time.monotonic() + float(timeout_s)
                while state["spans"] < int(target) and time.monotonic() < deadline:
                    cond.wait(timeout=max(0.0, deadline - time.monotonic()))
                reply = dict(state)
            elif command == "check":
                reply = _check(json.loads(rest), masks)
            else:
                reply = dict(state)
        print(json.dumps(reply), flush=True)
    server.stop(1).wait()


def _check(query: dict, masks: dict[int, array]) -> dict:
    rootless_every = query["rootless_every"]
    expected = missing = 0
    examples: list[str] = []
    acked_traces: dict[int, set[int]] = {}
    for salt_text, ranges in query["acked"].items():
        salt = int(salt_text)
        table = masks.get(salt, array("H"))
        seen = acked_traces.setdefault(salt, set())
        for t0, t1 in ranges:
            for t in range(t0, t1):
                seen.add(t)
                want = ROOTLESS_MASK if rootless_every and t % rootless_every == rootless_every - 1 else FULL_MASK
                got = table[t] if t < len(table) else 0
                expected += bin(want).count("1")
                lost = want & ~got
                if lost:
                    missing += bin(lost).count("1")
                    if len(examples) < 5:
                        examples.append(f"client {salt} trace {t}: span indexes {[i for i in range(16) if lost >> i & 1]}")
    # Spans the upstream got of traces never acknowledged (a call given up at the end, or one whose
    # answer was lost): not a loss, reported for completeness.
    unacked = sum(
        bin(mask).count("1")
        for salt, table in masks.items()
        for t, mask in enumerate(table)
        if mask and t not in acked_traces.get(salt, ())
    )
    return {"expected": expected, "missing": missing, "examples": examples, "received_of_unacknowledged_traces": unacked}


def soak_upstream(delay_ms: float) -> Upstream:
    """The counting upstream of ``bench/service.py``, run from this file so it can answer slowly."""
    return Upstream([sys.executable, __file__, "--upstream-child", "--upstream-delay-ms", str(delay_ms)])


# -- a client (child process) -------------------------------------------------------------------------------


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def build_request(salt: int, t0: int, count: int, review_every: int, rootless_every: int, start_ns: int) -> tuple[ExportTraceServiceRequest, int]:
    """``count`` whole agent traces numbered from ``t0``, in one request; and its span count."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend([_kv("service.name", f"soak-agent-{salt}"), _kv("service.instance.id", f"soak-{salt}")])
    scope = resource_spans.scope_spans.add()
    scope.scope.name = "soak.agent"
    for t in range(t0, t0 + count):
        spans = agent_trace(salt, t, start_ns + t * 50_000_000)
        if review_every and t % review_every == 0:
            spans[WRITE_INDEX].attributes.append(_kv("tracefence.status", "timeout"))  # an uncertain write: review
        if rootless_every and t % rootless_every == rootless_every - 1:
            del spans[ROOT_INDEX]  # the root never comes: held until max_wait, decided partial
        scope.spans.extend(spans)
    return request, len(scope.spans)


def _retry_delay(error: grpc.RpcError, default: float) -> float:
    for key, value in error.trailing_metadata() or ():
        if key == "google.rpc.retryinfo-bin":
            info = error_details_pb2.RetryInfo.FromString(value)
            return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return default


def client_child(args: argparse.Namespace) -> None:
    """Print {"ready"}; on a line on stdin, export for --seconds; print a JSON summary."""
    channel = grpc.insecure_channel(f"127.0.0.1:{args.port}", options=GRPC_OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=30)
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()
    start_ns = time.time_ns() - 3_600_000_000_000
    started = time.monotonic()
    deadline = started + args.seconds
    give_up = deadline + 10.0  # a call still refused this long after the end is not acknowledged
    latencies: list[float] = []
    acked: list[list[int]] = []
    summary = {"salt": args.salt, "calls_ok": 0, "unavailable": 0, "other_errors": 0, "error_codes": {}, "rejected_spans": 0, "acked_spans": 0, "given_up_spans": 0}
    t = 0
    while time.monotonic() < deadline:
        request, spans = build_request(args.salt, t, args.traces_per_request, args.review_every, args.rootless_every, start_ns)
        while True:
            began = time.perf_counter()
            try:
                response = stub.Export(request, timeout=30)
            except grpc.RpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.UNAVAILABLE:
                    summary["unavailable"] += 1
                    delay = _retry_delay(exc, 1.0)
                else:
                    summary["other_errors"] += 1
                    summary["error_codes"][code.name] = summary["error_codes"].get(code.name, 0) + 1
                    delay = 0.5
                if time.monotonic() + delay > give_up:
                    summary["given_up_spans"] += spans
                    break
                time.sleep(delay)
                continue
            latencies.append(time.perf_counter() - began)
            summary["calls_ok"] += 1
            summary["acked_spans"] += spans
            summary["rejected_spans"] += response.partial_success.rejected_spans
            if acked and acked[-1][1] == t:
                acked[-1][1] = t + args.traces_per_request
            else:
                acked.append([t, t + args.traces_per_request])
            break
        t += args.traces_per_request
    summary.update(seconds=time.monotonic() - started, acked=acked, latencies=latencies)
    channel.close()
    print(json.dumps(summary), flush=True)


def start_clients(args: argparse.Namespace, port: int) -> list[subprocess.Popen]:
    clients = []
    for salt in range(1, args.clients + 1):
        command = [
            sys.executable, __file__, "--client-child", "--port", str(port), "--salt", str(salt),
            "--seconds", str(args.seconds), "--traces-per-request", str(args.traces_per_request),
            "--review-every", str(args.review_every), "--rootless-every", str(args.rootless_every),
        ]  # fmt: skip
        clients.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for client in clients:
        line = client.stdout.readline()
        if not line or not json.loads(line).get("ready"):
            raise RuntimeError("a client did not start")
    return clients


# -- main -----------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 120)), help="how long the clients send (default $SOAK_SECONDS, else 120)")
    parser.add_argument("--clients", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--traces-per-request", type=int, default=20, help="whole traces per Export call (default 20: 200 spans)")
    parser.add_argument("--review-every", type=int, default=10, help="every Nth trace's write timed out: a review item (default 10)")
    parser.add_argument("--rootless-every", type=int, default=50, help="every Nth trace has no root: held until --max-wait-ms (default 50)")
    parser.add_argument("--max-traces", type=int, default=2000, help="service bound: traces held (default 2000)")
    parser.add_argument("--intake-queue-spans", type=int, default=20000, help="service bound: spans acknowledged, not yet read (default 20000)")
    parser.add_argument("--forward-queue-spans", type=int, default=50000, help="service bound: spans waiting for the upstream (default 50000)")
    parser.add_argument("--decided-cache-size", type=int, default=10000, help="service bound: decided traces remembered (default 10000)")
    parser.add_argument("--max-wait-ms", type=float, default=5000, help="longest a trace is held (default 5000)")
    parser.add_argument("--upstream-delay-ms", type=float, default=0, help="the upstream answers each call this late: a slow backend (default 0)")
    parser.add_argument("--drain-wait-s", type=float, default=60, help="after the clients stop, how long to wait for the upstream to count everything (default 60)")
    parser.add_argument("--upstream-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--salt", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_child:
        upstream_child(args.upstream_delay_ms / 1000)
        return 0
    if args.client_child:
        client_child(args)
        return 0

    os.environ.update(
        OTEL_TRACEFENCE_SERVICE__INTAKE_QUEUE_SPANS=str(args.intake_queue_spans),
        OTEL_TRACEFENCE_SERVICE__FORWARD_QUEUE_SPANS=str(args.forward_queue_spans),
        OTEL_TRACEFENCE_DECIDED_CACHE_SIZE=str(args.decided_cache_size),
    )  # read by the service child (Service passes os.environ on, with OTEL_TRACEFENCE_MAX_TRACES)
    workdir = Path(tempfile.mkdtemp(prefix="tracefence-soak-"))
    upstream = service = None
    clients: list[subprocess.Popen] = []
    samples: list[tuple[float, float]] = []
    stop_sampling = threading.Event()
    try:
        upstream = soak_upstream(args.upstream_delay_ms)
        service = Service(workdir, upstream.port, max_wait_ms=args.max_wait_ms, max_traces=args.max_traces)
        listening = service.logged("tracefence serve listening")[0]
        base = service.status("VmRSS")
        spans_per_trace = SPANS_PER_TRACE
        held_spans = args.max_traces * spans_per_trace + args.intake_queue_spans + args.forward_queue_spans
        bound = base + SLACK_MIB + held_spans * SPAN_KIB / 1024 + args.decided_cache_size * DECIDED_KIB / 1024
        print(f"service: pid {service.process.pid}, port {service.port}; VmRSS after start {base:.0f} MiB")
        print(f"service reported limits: {json.dumps(listening.get('limits'))}")
        print(
            f"memory bound: {base:.0f} MiB after start + {SLACK_MIB:.0f} slack + ({args.max_traces} traces x {spans_per_trace} spans + "
            f"{args.intake_queue_spans} intake + {args.forward_queue_spans} forward) spans x {SPAN_KIB:.0f} KiB + "
            f"{args.decided_cache_size} decided x {DECIDED_KIB:.0f} KiB = {bound:.0f} MiB"
        )
        clients = start_clients(args, service.port)
        print(f"{args.clients} clients ready; sending for {args.seconds:.0f} s, {args.traces_per_request * SPANS_PER_TRACE} spans per call", flush=True)
        began = time.monotonic()

        def sample() -> None:
            next_report = 10.0
            while not stop_sampling.wait(1.0):
                try:
                    rss = service.status("VmRSS")
                except (OSError, KeyError):
                    return
                elapsed = time.monotonic() - began
                samples.append((elapsed, rss))
                if elapsed >= next_report:
                    next_report += 10.0
                    counted = upstream.ask("stats")["spans"]
                    print(f"  t={elapsed:5.0f} s  VmRSS {rss:6.0f} MiB  upstream counted {counted:>10,} spans", flush=True)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for client in clients:
            client.stdin.write("go\n")
            client.stdin.flush()
        summaries = []
        for client in clients:
            out, _ = client.communicate(timeout=args.seconds + 120)
            summaries.append(json.loads(out.strip().splitlines()[-1]))
        sent_s = max(s["seconds"] for s in summaries)
        acked_spans = sum(s["acked_spans"] for s in summaries)
        t_wait = time.monotonic()
        reached = upstream.ask(f"wait {acked_spans} {args.drain_wait_s}")
        waited = time.monotonic() - t_wait
        time.sleep(1.5)
        stop_sampling.set()
        sampler.join(timeout=5)
        peak = service.status("VmHWM")
        stop_s = service.stop(timeout_s=60)
        stopped = service.logged("tracefence serve stopped")
        errors = service.logged('"ERROR"')
        service = None
        check = upstream.ask("check " + json.dumps({"acked": {str(s["salt"]): s["acked"] for s in summaries}, "rootless_every": args.rootless_every}))
        final = upstream.ask("stats")
        with sqlite3.connect(workdir / "review.db") as conn:
            review_items = conn.execute("SELECT count(*) FROM review_items").fetchone()[0]
        review_expected = sum(
            1 for s in summaries for t0, t1 in s["acked"] for t in range(t0, t1) if args.review_every and t % args.review_every == 0
        )
    finally:
        stop_sampling.set()
        for client in clients:
            if client.poll() is None:
                client.kill()
                client.wait()
        if service is not None:
            service.stop()
        if upstream is not None:
            upstream.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    latencies = [x for s in summaries for x in s["latencies"]]
    unavailable = sum(s["unavailable"] for s in summaries)
    other = sum(s["other_errors"] for s in summaries)
    rejected = sum(s["rejected_spans"] for s in summaries)
    given_up = sum(s["given_up_spans"] for s in summaries)
    dropped = sum(int(e.get("dropped_spans", 0)) for e in stopped)
    max_rss = max(r for _, r in samples) if samples else float("nan")
    thirds = [[r for e, r in samples if k * sent_s / 3 <= e < (k + 1) * sent_s / 3] for k in range(3)]
    load = os.getloadavg()
    print()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    print(f"run: {args.clients} clients x {sent_s:.0f} s, {args.traces_per_request} traces ({args.traces_per_request * SPANS_PER_TRACE} spans) per call, one call in flight each; "
          f"1 in {args.review_every} traces review, 1 in {args.rootless_every} without a root; upstream answers after {args.upstream_delay_ms:.0f} ms")  # fmt: skip
    print(f"acknowledged: {acked_spans:,} spans in {sum(s['calls_ok'] for s in summaries):,} calls = {acked_spans / sent_s:,.0f} spans/s")
    print(f"Export latency (OK calls, client side): p50 {1000 * percentile(latencies, 0.5):.1f} ms, p99 {1000 * percentile(latencies, 0.99):.1f} ms, max {1000 * max(latencies):.1f} ms")
    print(f"refused with UNAVAILABLE (back-pressure, retried): {unavailable:,} calls; other errors: {other} {json.dumps({k: v for s in summaries for k, v in s['error_codes'].items()})}; "
          f"rejected spans (partial success): {rejected}; given up at the end: {given_up} spans")  # fmt: skip
    print(f"upstream: {reached['spans']:,} spans counted {waited:.1f} s after the clients stopped (before SIGTERM); "
          f"{final['spans']:,} after the service stopped ({stop_s:.1f} s from SIGTERM); duplicates {final['duplicates']}")  # fmt: skip
    for entry in stopped:
        print(f"service said: {json.dumps({k: v for k, v in entry.items() if k not in ('time', 'logger', 'level')})}")
    if errors:
        print(f"service logged {len(errors)} error line(s); first: {errors[0].get('message')}")
    print("VmRSS by third of the run (median / max MiB): " + ", ".join(f"{statistics.median(t):.0f} / {max(t):.0f}" if t else "-" for t in thirds))
    print(f"VmRSS: max seen {max_rss:.0f} MiB (VmHWM {peak:.0f} MiB), bound {bound:.0f} MiB")
    checks = {
        f"memory: VmHWM {peak:.0f} MiB <= bound {bound:.0f} MiB": peak <= bound,
        f"no lost spans: {check['missing']} of {check['expected']:,} acknowledged spans missing upstream": check["missing"] == 0,
        f"no drops: the service dropped {dropped} spans": dropped == 0 and bool(stopped),
        f"review queue: {review_items:,} items in SQLite for {review_expected:,} acknowledged review traces": review_items == review_expected,
    }
    for text, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    for example in check["examples"]:
        print(f"  missing: {example}")
    print(f"(spans received of traces never acknowledged: {check['received_of_unacknowledged_traces']})")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
