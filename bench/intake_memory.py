"""One Export of N spans against ``tracefence serve`` at its default bounds: the answer, and the service's
peak (VmHWM) and current (VmRSS) memory before and ``--settle-s`` (8) s after.

    .venv/bin/python bench/intake_memory.py [--spans 1000000] [--span-bytes 0] [--held-every 0] [--port 45123] [--root DIR]

Each span is a trace of its own (a root: decided at once), except every ``--held-every``-th, which has a parent
that never comes, so the service holds it (``max_wait_ms``, 30 s) while the rest of its request is forwarded:
what that costs in memory shows whether a held span keeps its whole request alive. ``--span-bytes`` pads each
span's name. The service runs from this checkout, or ``--root`` (another checkout, to compare), with no
upstream (spans go to an OTLP/JSON file in a temporary folder) and is killed at the end. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1.trace_pb2 import Span

ROOT = Path(__file__).resolve().parent.parent


def memory(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS of ``pid`` in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            key, value = line.split(":")
            out[key] = int(value.split()[0]) // 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--span-bytes", type=int, default=0)
    parser.add_argument("--held-every", type=int, default=0)
    parser.add_argument("--requests", type=int, default=1, help="send the request this many times, 1 s apart, each with new ids")
    parser.add_argument("--port", type=int, default=45123)
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--settle-s", type=float, default=8.0, help="wait this long after the last request before the last reading")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(args.root)
    service = subprocess.Popen(
        [sys.executable, "-m", "otel_tracefence", "serve", "--endpoint", f"127.0.0.1:{args.port}", "--http-endpoint", "none",
         "--review-db", f"{folder}/r.db", "--output-file", f"{folder}/o.jsonl"],
        cwd=folder, env=env, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        name = "t" + "x" * args.span_bytes
        with grpc.insecure_channel(f"127.0.0.1:{args.port}", options=[("grpc.max_send_message_length", -1)]) as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            for r in range(args.requests):
                request = trace_service_pb2.ExportTraceServiceRequest()
                scope_spans = request.resource_spans.add().scope_spans.add()
                scope_spans.spans.extend(
                    Span(
                        trace_id=(r * args.spans + i + 1).to_bytes(16, "big"),
                        span_id=(i + 1).to_bytes(8, "big"),
                        parent_span_id=b"\x01" * 8 if args.held_every and i % args.held_every == 0 else b"",
                        name=name,
                        start_time_unix_nano=1,
                        end_time_unix_nano=2,
                    )
                    for i in range(args.spans)
                )
                data = request.SerializeToString()
                if r == 0:
                    print(f"request: {args.spans} spans, {len(data)} bytes, x{args.requests}; service before: {memory(service.pid)}")
                started = time.monotonic()
                try:
                    export(data, timeout=120)
                    print(f"accepted in {time.monotonic() - started:.1f} s; service: {memory(service.pid)}")
                except grpc.RpcError as error:
                    print(f"refused in {time.monotonic() - started:.1f} s: {error.code().name}: {error.details()}")
                time.sleep(1)
        time.sleep(args.settle_s)
        print(f"service {args.settle_s:g} s later: {memory(service.pid)}")
    finally:
        service.kill()
        service.wait(timeout=30)


if __name__ == "__main__":
    main()
