"""Idle OTLP/HTTP connections past the descriptor limit: do the gRPC and HTTP receivers still answer?

    .venv/bin/python bench/http_connection_flood.py [--limit 1024] [--idle 1100] [--hold-s 12] [--root DIR] [--flood grpc]

Starts ``tracefence serve`` (from this checkout, or ``--root``: another checkout, to compare) at ``RLIMIT_NOFILE``
``--limit``, opens ``--idle`` connections to its OTLP/HTTP port (``--flood grpc``: its gRPC port) that send nothing, and while they are held sends one
canary span over gRPC and one over HTTP (the SDK's exporters, 5 s each, no retries past that). Prints the
canaries' results, the service's descriptors, its log's size and its lines about accept failures (asyncio's
``socket.accept() out of system resource``), then, after ``--hold-s`` seconds, an HTTP canary again. Issue 30's
chaos check: at 1,024 and 1,100 idle connections both receivers stopped and the log grew 130 MB in 21 s. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ROOT = Path(__file__).resolve().parent.parent


def canary() -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("canary").start_as_current_span("canary"):
        pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def timed(export) -> str:
    started = time.monotonic()
    try:
        result = export()
    except Exception as exc:  # noqa: BLE001 - a figure, whatever happened
        result = repr(exc)[:80]
    return f"{getattr(result, 'name', result)} in {time.monotonic() - started:.1f}s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1024)
    parser.add_argument("--idle", type=int, default=1100)
    parser.add_argument("--hold-s", type=float, default=12.0)
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--flood", choices=("http", "grpc"), default="http", help="the port the idle connections go to")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.idle + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.idle + 256), hard))  # this client holds them too
    with tempfile.TemporaryDirectory() as folder:
        log_path = Path(folder) / "serve.log"
        env = {**os.environ, "PYTHONPATH": str(args.root), "TRACEFENCE_PURE_PYTHON": "1"}
        with open(log_path, "w") as log:
            serve = subprocess.Popen(
                [sys.executable, "-m", "otel_tracefence", "serve", "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
                 "--review-db", f"{folder}/r.db", "--output-file", f"{folder}/out.jsonl"],
                cwd=folder, env=env, stderr=log, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (args.limit, args.limit)),
            )  # fmt: skip
        idle: list[socket.socket] = []
        try:
            listening = None
            while listening is None and serve.poll() is None:
                for line in log_path.read_text().splitlines():
                    if '"tracefence serve listening"' in line:
                        listening = json.loads(line)
                time.sleep(0.1)
            assert listening, "serve did not start"
            opened = threading.Event()

            def flood() -> None:
                for _ in range(args.idle):
                    try:
                        port = listening["http_port"] if args.flood == "http" else listening["port"]
                        idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
                    except OSError:
                        break
                opened.set()

            threading.Thread(target=flood, daemon=True).start()
            opened.wait(60)
            time.sleep(1.0)
            fds = len(os.listdir(f"/proc/{serve.pid}/fd"))
            grpc_exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{listening['port']}", insecure=True, timeout=5)
            http_exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{listening['http_port']}/v1/traces", timeout=5)
            grpc_result = timed(lambda: grpc_exporter.export(canary()))
            http_result = timed(lambda: http_exporter.export(canary()))
            time.sleep(args.hold_s)
            http_later = timed(lambda: http_exporter.export(canary()))
            grpc_later = timed(lambda: grpc_exporter.export(canary()))
            text = log_path.read_text()
            accept_failures = text.count("out of system resource")
            print(f"root {args.root}: RLIMIT_NOFILE {args.limit}, {len(idle)} idle connections opened to the {args.flood} port")
            print(f"service descriptors while held: {fds}; alive: {serve.poll() is None}")
            print(f"gRPC canary: {grpc_result}; HTTP canary: {http_result}; {args.hold_s:g}s later HTTP: {http_later}, gRPC: {grpc_later}")
            print(f"log: {len(text)} bytes, {text.count(chr(10))} lines, {accept_failures} accept failures (EMFILE)")
            grpc_exporter.shutdown()
            http_exporter.shutdown()
        finally:
            for sock in idle:
                sock.close()
            serve.kill()
            serve.wait()


if __name__ == "__main__":
    main()
