"""Idle OTLP/HTTP connections past the descriptor limit: do the gRPC and HTTP receivers still answer?

    .venv/bin/python bench/http_connection_flood.py [--limit 1024] [--idle 1100] [--hold-s 12] [--root DIR | --tracefence PATH] [--flood grpc]

Starts ``tracefence serve`` (from this checkout, or ``--root``: another checkout, or ``--tracefence``: another install's
executable, to compare) at ``RLIMIT_NOFILE``
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
from typing import Any, Callable, Sequence

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from service_helpers import canary_spans, command_env  # noqa: E402 - the tests' helpers, after the path


def timed(export: Callable[[], Any]) -> tuple[str, float]:
    """The export's result (its name, or the exception's repr) and the seconds it took."""
    started = time.monotonic()
    try:
        result = export()
    except Exception as exc:  # noqa: BLE001 - a figure, whatever happened
        result = repr(exc)[:80]
    return str(getattr(result, "name", result)), time.monotonic() - started


def _listening(serve: subprocess.Popen, log_path: Path) -> dict[str, Any]:
    while serve.poll() is None:
        for line in log_path.read_text().splitlines():
            if '"tracefence serve listening"' in line:
                return json.loads(line)
        time.sleep(0.1)
    raise RuntimeError(f"serve exited {serve.returncode} before listening: {log_path.read_text()[-300:]}")


def flood(command: Sequence[str], env: dict[str, str], *, limit: int = 1024, idle: int = 1100, hold_s: float = 12.0, target: str = "http") -> dict[str, Any]:
    """Run ``command serve`` at ``RLIMIT_NOFILE`` ``limit``, hold ``idle`` silent connections to its ``target`` port
    ("http" or "grpc"), and export a canary span over gRPC and over HTTP meanwhile, then again ``hold_s`` s later.
    Returns the figures: ``opened`` (connections), ``fds`` (the service's descriptors while held), ``alive``,
    ``grpc``/``http``/``grpc_later``/``http_later`` (each the result's name and seconds), ``log_bytes``,
    ``log_lines``, ``accept_failures`` (asyncio's EMFILE lines). Raises RuntimeError if serve does not start.
    Every process and socket it opens is closed before it returns."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < idle + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, idle + 256), hard))  # this client holds them too
    with tempfile.TemporaryDirectory() as folder:
        log_path = Path(folder) / "serve.log"
        with open(log_path, "w") as log:
            serve = subprocess.Popen(
                [*command, "serve", "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
                 "--review-db", f"{folder}/r.db", "--output-file", f"{folder}/out.jsonl"],
                cwd=folder, env=env, stderr=log, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
            )  # fmt: skip
        held: list[socket.socket] = []
        try:
            listening = _listening(serve, log_path)
            port = listening["http_port"] if target == "http" else listening["port"]
            opened = threading.Event()

            def open_idle() -> None:
                for _ in range(idle):
                    try:
                        held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
                    except OSError:
                        break
                opened.set()

            threading.Thread(target=open_idle, daemon=True).start()
            opened.wait(60)
            time.sleep(1.0)
            figures: dict[str, Any] = {"opened": len(held), "fds": len(os.listdir(f"/proc/{serve.pid}/fd"))}
            grpc_exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{listening['port']}", insecure=True, timeout=5)
            http_exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{listening['http_port']}/v1/traces", timeout=5)
            figures["grpc"] = timed(lambda: grpc_exporter.export(canary_spans()))
            figures["http"] = timed(lambda: http_exporter.export(canary_spans()))
            time.sleep(hold_s)
            figures["http_later"] = timed(lambda: http_exporter.export(canary_spans()))
            figures["grpc_later"] = timed(lambda: grpc_exporter.export(canary_spans()))
            grpc_exporter.shutdown()
            http_exporter.shutdown()
            figures["alive"] = serve.poll() is None
            text = log_path.read_text()
            figures.update(log_bytes=len(text), log_lines=text.count("\n"), accept_failures=text.count("out of system resource"))
            return figures
        finally:
            for sock in held:
                sock.close()
            serve.kill()
            serve.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1024)
    parser.add_argument("--idle", type=int, default=1100)
    parser.add_argument("--hold-s", type=float, default=12.0)
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--tracefence", type=Path, help="another install's tracefence executable (instead of --root)")
    parser.add_argument("--flood", choices=("http", "grpc"), default="http", help="the port the idle connections go to")
    args = parser.parse_args()
    if args.tracefence:
        command, env = [str(args.tracefence)], command_env([str(args.tracefence)])
    else:
        command, env = [sys.executable, "-m", "otel_tracefence"], {**os.environ, "PYTHONPATH": str(args.root), "TRACEFENCE_PURE_PYTHON": "1"}
    f = flood(command, env, limit=args.limit, idle=args.idle, hold_s=args.hold_s, target=args.flood)
    print(f"{args.tracefence or args.root}: RLIMIT_NOFILE {args.limit}, {f['opened']} idle connections opened to the {args.flood} port")
    print(f"service descriptors while held: {f['fds']}; alive: {f['alive']}")
    shown = {k: f"{f[k][0]} in {f[k][1]:.1f}s" for k in ("grpc", "http", "http_later", "grpc_later")}
    print(f"gRPC canary: {shown['grpc']}; HTTP canary: {shown['http']}; {args.hold_s:g}s later HTTP: {shown['http_later']}, gRPC: {shown['grpc_later']}")
    print(f"log: {f['log_bytes']} bytes, {f['log_lines']} lines, {f['accept_failures']} accept failures (EMFILE)")


if __name__ == "__main__":
    main()
