"""Issue 9's poison batch, reproduced: one 5 MB span, then --traces agent traces, sent to ``tracefence serve``
whose upstream takes gRPC's default 4 MiB per request (the Collector's default too). Prints how many of the later
spans reached the upstream and when, then stops the service with SIGTERM and prints its stop line.

    .venv/bin/python bench/poison.py [--traces 4800] [--wait-s 60] [--root DIR]

Three processes: this one (the client and, in a thread, the upstream: a gRPC ``TraceService`` with a 4 MiB
receive limit that counts spans), and ``python -m otel_tracefence serve`` from this checkout or ``--root``
(another checkout, to compare) with ``--decision-wait-ms 0``. The traces are ``bench/service.py``'s (10 spans).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import Service, build_requests, span_count  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FOUR_MIB = 4 * 1024 * 1024


class CountingUpstream(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0
        self.first_at: float | None = None
        self.lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=[("grpc.max_receive_message_length", FOUR_MIB)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request, context):
        with self.lock:
            self.spans += span_count(request)
        return ExportTraceServiceResponse()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=4800)
    parser.add_argument("--wait-s", type=float, default=60.0)
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = str(args.root)
    upstream = CountingUpstream()
    poison = build_requests(7, 1, 10)[0]  # one agent trace; its first span gets 5 MB
    poison.resource_spans[0].scope_spans[0].spans[0].attributes.append(KeyValue(key="upload.body", value=AnyValue(string_value="p" * 5_000_000)))
    later = build_requests(8, args.traces, 1000)
    expected = sum(span_count(r) for r in later) + span_count(poison) - 1
    with tempfile.TemporaryDirectory() as folder:
        service = Service(Path(folder), upstream.port, max_wait_ms=30_000, max_traces=10_000)
        try:
            with grpc.insecure_channel(f"127.0.0.1:{service.port}", options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
                stub = trace_service_pb2_grpc.TraceServiceStub(channel)
                stub.Export(poison, timeout=30)
                started = time.monotonic()
                for request in later:
                    while True:
                        try:
                            stub.Export(request, timeout=30)
                            break
                        except grpc.RpcError as error:
                            if error.code() != grpc.StatusCode.UNAVAILABLE:
                                raise
                            time.sleep(0.5)  # back-pressure: retry
                acked_at = time.monotonic() - started
            deadline = time.monotonic() + args.wait_s
            while upstream.spans < expected and time.monotonic() < deadline:
                time.sleep(0.2)
            took = time.monotonic() - started
            print(f"service from {args.root}")
            print(f"acknowledged: the poison span's trace and {sum(span_count(r) for r in later):,} later spans in {acked_at:.1f} s")
            print(f"upstream (4 MiB limit): {upstream.spans:,} of {expected:,} good spans after {took:.1f} s")
            stopped = service.stop()
            print(f"SIGTERM: exited in {stopped:.1f} s; stop line: {service.logged('tracefence serve stopped')}")
            drops = [e.get("message", "")[:200] for e in service.logged("can never be delivered")]
            print(f"drop lines: {len(drops)}" + (f"; first: {drops[0]}" if drops else ""))
        finally:
            upstream.server.stop(0)


if __name__ == "__main__":
    main()
