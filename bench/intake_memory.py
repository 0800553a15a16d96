"""One Export of N tiny spans against ``tracefence serve`` at its default bounds: the answer, and the service's
peak (VmHWM) and current (VmRSS) memory before and 8 s after.

    .venv/bin/python bench/intake_memory.py [--spans 1000000] [--port 45123]

The service runs from this checkout (``python -m otel_tracefence serve``, no upstream: spans go to an OTLP/JSON
file in a temporary folder) and is killed at the end. Linux only (reads /proc).
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
    parser.add_argument("--port", type=int, default=45123)
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    service = subprocess.Popen(
        [sys.executable, "-m", "otel_tracefence", "serve", "--endpoint", f"127.0.0.1:{args.port}",
         "--review-db", f"{folder}/r.db", "--output-file", f"{folder}/o.jsonl"],
        cwd=folder, env=env, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        request = trace_service_pb2.ExportTraceServiceRequest()
        scope_spans = request.resource_spans.add().scope_spans.add()
        scope_spans.spans.extend(
            Span(trace_id=bytes([i % 251 + 1]) * 16, span_id=(i + 1).to_bytes(8, "big"), name="t", start_time_unix_nano=1, end_time_unix_nano=2)
            for i in range(args.spans)
        )
        data = request.SerializeToString()
        print(f"request: {args.spans} spans, {len(data)} bytes; service before: {memory(service.pid)}")
        with grpc.insecure_channel(f"127.0.0.1:{args.port}", options=[("grpc.max_send_message_length", -1)]) as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            started = time.monotonic()
            try:
                export(data, timeout=120)
                print(f"accepted in {time.monotonic() - started:.1f} s")
            except grpc.RpcError as error:
                print(f"refused in {time.monotonic() - started:.1f} s: {error.code().name}: {error.details()}")
        time.sleep(8)
        print(f"service 8 s later: {memory(service.pid)}")
    finally:
        service.kill()
        service.wait(timeout=30)


if __name__ == "__main__":
    main()
