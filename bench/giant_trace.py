"""One giant trace through ``tracefence serve`` (issue 9): cost per span against ordinary traces, and a small
trace's delivery while the giant one is in flight.

Two measures, each against a baseline measured in the same run, in paired, interleaved rounds (a fresh
``python -m otel_tracefence serve --decision-wait-ms 0`` for every run, its review queue on disk):

* **time per span**: --spans spans (default 100,000) of one trace, agent-shaped (3 tool spans in 10, the
  root last), against the same number of spans as traces of --baseline-spans spans (default 1,000); time
  from the first Export until the upstream has every span. Goal: ratio <= 1.5.
* **small-trace latency**: while the giant trace is being sent by one client, another client sends a
  small agent trace (10 spans, root last) every 0.5 s; the time from its Export's acknowledgement to its
  arrival upstream. Goal: max <= decision wait + 2 s (the decision wait is 0 here, so 2 s).

The upstream is an in-process OTLP/gRPC server recording when each trace's spans arrive.

    .venv/bin/python bench/giant_trace.py [--spans 100000] [--baseline-spans 1000] [--rounds 3] [--batch 2000]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agent_shape import tool_attributes  # noqa: E402
from service import GRPC_OPTIONS, Service, _kv, agent_trace, span_count  # noqa: E402


class Recording(trace_service_pb2_grpc.TraceServiceServicer):
    """Counts spans, and stamps when each trace's spans arrive (monotonic clock)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.count = 0
        self.arrived: dict[bytes, tuple[int, float]] = {}  # trace id -> (spans so far, monotonic time of the last)

    def Export(self, request, context):
        now = time.monotonic()
        with self.cond:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        seen, _ = self.arrived.get(span.trace_id, (0, 0.0))
                        self.arrived[span.trace_id] = (seen + 1, now)
                    self.count += len(ss.spans)
            self.cond.notify_all()
        return ExportTraceServiceResponse()

    def wait(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while self.count < count and time.monotonic() < deadline:
                self.cond.wait(timeout=max(0.0, deadline - time.monotonic()))
            return self.count >= count


def one_trace(salt: int, spans: int) -> list[Span]:
    """``spans`` spans of one agent-shaped trace (3 tool spans in 10, each with its own call id), the root last."""
    trace_id = struct.pack(">QQ", 0x6A00_0000_0000_0000 | salt, spans)
    root_id = struct.pack(">Q", salt << 32 | 1)
    start = time.time_ns() - 3_600_000_000_000
    out = []
    for i in range(spans - 1):
        turn = i % 10
        if turn in (1, 4, 7):
            name, attrs = f"execute_tool tool_{i % 3}", tool_attributes(salt * 1_000_000 + i, (turn - 1) // 3)
            attrs = {**attrs, "gen_ai.tool.call.id": f"call_{salt}_{i}", "tracefence.idempotency_key": f"k-{salt}-{i}"}
        else:
            name, attrs = "chat model", {"gen_ai.operation.name": "chat"}
        out.append(
            Span(
                trace_id=trace_id, span_id=struct.pack(">Q", salt << 32 | (i + 2)), parent_span_id=root_id, name=name,
                start_time_unix_nano=start + i * 1000, end_time_unix_nano=start + i * 1000 + 500,
                attributes=[_kv(k, v) for k, v in attrs.items()], flags=0x100,
            )
        )  # fmt: skip
    out.append(Span(trace_id=trace_id, span_id=root_id, name="invoke_agent giant", start_time_unix_nano=start - 1, end_time_unix_nano=start + spans * 1000, flags=0x100))
    return out


def requests_of(spans: list[Span], batch: int) -> list[ExportTraceServiceRequest]:
    out = []
    for at in range(0, len(spans), batch):
        request = ExportTraceServiceRequest()
        rs = request.resource_spans.add()
        rs.resource.attributes.append(_kv("service.name", "giant-agent"))
        ss = rs.scope_spans.add()
        ss.scope.name = "bench.giant"
        ss.spans.extend(spans[at : at + batch])
        out.append(request)
    return out


def run(requests: list[ExportTraceServiceRequest], *, small: bool) -> tuple[float, list[float]]:
    """Send ``requests`` through a fresh service; the seconds until the upstream has every span, and (with
    ``small``) the delivery latencies of small traces sent meanwhile by another client."""
    upstream = Recording()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=GRPC_OPTIONS)
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(upstream, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with tempfile.TemporaryDirectory(prefix="tracefence-giant-") as tmp:
        service = Service(Path(tmp), port, max_wait_ms=600_000, max_traces=10_000)
        total = sum(span_count(r) for r in requests)
        latencies: list[float] = []
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{service.port}", options=GRPC_OPTIONS)
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            done = threading.Event()
            small_sent = 0

            def small_client() -> None:
                nonlocal small_sent
                # A connection of its own, as another client process has (gRPC shares one between channels alike).
                other = grpc.insecure_channel(f"127.0.0.1:{service.port}", options=[*GRPC_OPTIONS, ("grpc.use_local_subchannel_pool", 1)])
                small_stub = trace_service_pb2_grpc.TraceServiceStub(other)
                t = 0
                while not done.is_set():
                    spans = agent_trace(999, t, time.time_ns())
                    request = requests_of(spans, 100)[0]
                    small_stub.Export(request, timeout=60)
                    acked = time.monotonic()
                    trace_id = spans[0].trace_id
                    with upstream.cond:
                        while upstream.arrived.get(trace_id, (0, 0))[0] < len(spans) and time.monotonic() - acked < 30:
                            upstream.cond.wait(timeout=0.1)
                        latencies.append(upstream.arrived.get(trace_id, (0, acked + 30))[1] - acked)
                    small_sent += len(spans)
                    t += 1
                    done.wait(0.5)
                other.close()

            helper = threading.Thread(target=small_client, daemon=True) if small else None
            start = time.monotonic()
            if helper is not None:
                helper.start()
            for request in requests:
                while True:
                    try:
                        stub.Export(request, timeout=60)
                        break
                    except grpc.RpcError as error:  # back-pressure: retry as an OTLP client does
                        if error.code() != grpc.StatusCode.UNAVAILABLE:
                            raise
                        time.sleep(0.2)
            ok = upstream.wait(total, 600)
            took = time.monotonic() - start
            done.set()
            if helper is not None:
                helper.join(timeout=60)
            if not ok:
                raise RuntimeError(f"the upstream has {upstream.count} of {total} spans after 600 s")
            channel.close()
        finally:
            service.stop()
            server.stop(1).wait()
    return took, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--baseline-spans", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2_000, help="spans per Export call")
    args = parser.parse_args()
    giant = requests_of(one_trace(1, args.spans), args.batch)
    ordinary_spans = [s for t in range(args.spans // args.baseline_spans) for s in one_trace(100 + t, args.baseline_spans)]
    ordinary = requests_of(ordinary_spans, args.batch)
    print(f"{args.spans} spans: one trace vs {args.spans // args.baseline_spans} traces of {args.baseline_spans}; {args.rounds} paired rounds")
    ratios, per_span, latencies = [], {"giant": [], "ordinary": []}, []
    for round_ in range(args.rounds):
        order = [("ordinary", ordinary), ("giant", giant)] if round_ % 2 == 0 else [("giant", giant), ("ordinary", ordinary)]
        took = {}
        for name, requests in order:
            took[name], small = run(requests, small=name == "giant")
            per_span[name].append(took[name] / args.spans * 1e6)
            latencies.extend(small)
        ratios.append(took["giant"] / took["ordinary"])
        print(f"  round {round_ + 1}: giant {took['giant']:.2f} s, ordinary {took['ordinary']:.2f} s, ratio {ratios[-1]:.2f}", flush=True)

    def summary(values: list[float], unit: str = "") -> str:
        return f"min {min(values):.2f}{unit} / median {statistics.median(values):.2f}{unit} / max {max(values):.2f}{unit}"

    print(f"time per span, one {args.spans}-span trace: {summary(per_span['giant'], ' us')}")
    print(f"time per span, {args.baseline_spans}-span traces: {summary(per_span['ordinary'], ' us')}")
    print(f"ratio giant / ordinary (goal <= 1.5): {summary(ratios)}")
    if latencies:
        print(f"small trace from another client while the giant one is in flight, ack -> upstream ({len(latencies)} traces; goal <= 2 s): {summary(latencies, ' s')}")


if __name__ == "__main__":
    main()
