"""One OTLP/JSON body of N spans POSTed to ``tracefence serve``'s OTLP/HTTP receiver at its default bounds
(``intake_queue_spans`` 100,000): the answer, its time, and the service's peak memory (VmHWM) before and after.

    .venv/bin/python bench/json_span_bound.py [--spans 600000] [--root DIR]

Issue 30: past the span bound the body must be refused (413) at about the gRPC path's cost, counted while read,
not after the whole body is parsed. ``--root``: another checkout to compare (e.g. the main branch, before); the
service runs from it with ``PYTHONPATH`` set and ``TRACEFENCE_PURE_PYTHON=1``, no upstream (an output file in a
temporary folder), and is killed at the end. Linux only (/proc). Not a test: figures to read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent


def memory(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS of ``pid`` in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            key, value = line.split(":")
            out[key] = int(value.split()[0]) // 1024
    return out


def body(spans: int) -> bytes:
    """An OTLP/JSON request of ``spans`` small spans (each a root of its own trace; 86 bytes each, as the chaos run's
    51.6 MB body of 600,000), under the 64 MiB ``max_message_bytes`` up to 780,000 spans."""
    parts = [f'{{"traceId":"{n + 1:032x}","spanId":"{n + 1:016x}","name":"op"}}' for n in range(spans)]
    return ('{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{"name":"bench"},"spans":[' + ",".join(parts) + "]}]}]}").encode()


def refuse(command: Sequence[str], env: dict[str, str], spans: int) -> dict[str, Any]:
    """POST one OTLP/JSON body of ``spans`` spans to ``command serve`` (started and killed here). Returns ``status``
    (the HTTP answer), ``message``, ``seconds`` (to the answer), ``megabytes`` (the body's size, MB) and the service's
    memory in MiB before and after (``before``, ``after``: dicts of VmHWM, VmRSS). Raises RuntimeError if serve does
    not start."""
    data = body(spans)
    with tempfile.TemporaryDirectory() as folder:
        serve = subprocess.Popen(
            [*command, "serve", "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
             "--review-db", f"{folder}/r.db", "--output-file", f"{folder}/out.jsonl"],
            cwd=folder, env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            port = None
            for line in serve.stderr:  # type: ignore[union-attr]
                if '"tracefence serve listening"' in line:
                    port = json.loads(line)["http_port"]
                    break
            if not port:
                raise RuntimeError(f"serve exited {serve.wait()} before listening")
            before = memory(serve.pid)
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=data, headers={"Content-Type": "application/json"})
            started = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=300) as answer:
                    status, text = answer.status, answer.read().decode()
            except urllib.error.HTTPError as refused:
                status, text = refused.code, refused.read().decode()
            elapsed = time.monotonic() - started
            after = memory(serve.pid)
        finally:
            serve.kill()
            serve.wait()
    message = json.loads(text).get("message", "") if text.startswith("{") else text
    return {"status": status, "message": message, "seconds": elapsed, "megabytes": len(data) / 1e6, "before": before, "after": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=600_000)
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.root), "TRACEFENCE_PURE_PYTHON": "1"}
    got = refuse([sys.executable, "-m", "otel_tracefence"], env, args.spans)
    before, after = got["before"], got["after"]
    print(f"root {args.root}: {args.spans} spans, {got['megabytes']:.1f} MB of OTLP/JSON")
    print(f"answer {got['status']} in {got['seconds']:.2f}s: {got['message'][:160]}")
    print(f"service memory: VmHWM {before['VmHWM']} -> {after['VmHWM']} MiB (peak), VmRSS {before['VmRSS']} -> {after['VmRSS']} MiB")


if __name__ == "__main__":
    main()
