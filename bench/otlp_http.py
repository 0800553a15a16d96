"""Export calls acknowledged per second by ``tracefence serve`` over OTLP/HTTP (protobuf and JSON), against
OTLP/gRPC measured in the same run: the baseline is the gRPC receiver of the same process.

One ``python -m otel_tracefence serve`` subprocess (both receivers on loopback ports it picks,
``--output-file /dev/null``, ``--decision-wait-ms 0``) and this process as the client, one call
in flight, with the agent-shaped requests of ``bench/service.py`` (10-span traces, --batch spans
per request), encoded before the clock starts:

  * grpc: the request bytes through a gRPC unary call to ``TraceService/Export``;
  * http/protobuf: ``POST /v1/traces`` with ``requests.Session`` (keep-alive), the Python SDK's own transport;
  * http/json: the same, the body being the request as OTLP/JSON (``otel_tracefence.otlp.json_writer``).

Rounds are paired and interleaved: each round sends --requests fresh requests (new trace ids) over
each transport, in a rotating order, pausing --settle seconds between transports so the service's
intake has drained. A refusal (503 / UNAVAILABLE) is waited out and resent, and counted.

    .venv/bin/python bench/otlp_http.py [--rounds 5] [--requests 20] [--batch 256] [--settle 5]

Prints spans/s per transport per round, then the ratios http/grpc per round as min / median / max.
The service is stopped with SIGTERM (killed after a timeout), also on error.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import requests

from otel_tracefence.otlp.json_writer import request_to_json
from service import GRPC_OPTIONS, SPANS_PER_TRACE, build_requests, span_count, stop_process

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TRANSPORTS = ("grpc", "http/protobuf", "http/json")


class Serve:
    """``tracefence serve`` with both receivers on free loopback ports, read from its ``listening`` log line."""

    def __init__(self, workdir: Path) -> None:
        command = [
            sys.executable, "-m", "otel_tracefence", "serve",
            "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
            "--output-file", "/dev/null", "--review-db", str(workdir / "review.db"),
            "--decision-wait-ms", "0",
        ]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.ports: dict[str, int] = {}
        ready = threading.Event()

        def read() -> None:
            for line in self.process.stderr:
                if not self.ports and "tracefence serve listening" in line:
                    entry = json.loads(line)
                    self.ports = {"grpc": int(entry["port"]), "http": int(entry["http_port"])}
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or not self.ports:
            stop_process(self.process, 5)
            raise RuntimeError("tracefence serve did not report its ports")

    def stop(self) -> None:
        stop_process(self.process, 30)


class Sender:
    """Sends pre-encoded bodies over one transport, one call in flight; counts refusals waited out."""

    def __init__(self, transport: str, ports: dict[str, int]) -> None:
        self.transport = transport
        self.refused = 0
        if transport == "grpc":
            self._channel = grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}", options=GRPC_OPTIONS)
            grpc.channel_ready_future(self._channel).result(timeout=10)
            self._call = self._channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        else:
            self._session = requests.Session()
            self._url = f"http://127.0.0.1:{ports['http']}/v1/traces"
            self._headers = {"Content-Type": "application/json" if transport == "http/json" else "application/x-protobuf"}

    def encode(self, request) -> bytes:
        return request_to_json(request).encode() if self.transport == "http/json" else request.SerializeToString()

    def send(self, body: bytes) -> None:
        while True:
            if self.transport == "grpc":
                try:
                    self._call(body, timeout=60)
                    return
                except grpc.RpcError as exc:
                    if exc.code() is not grpc.StatusCode.UNAVAILABLE:
                        raise
            else:
                response = self._session.post(self._url, data=body, headers=self._headers, timeout=60)
                if response.status_code == 200:
                    return
                if response.status_code != 503:
                    raise RuntimeError(f"{self.transport}: HTTP {response.status_code}: {response.content[:200]!r}")
            self.refused += 1
            time.sleep(1.0)

    def close(self) -> None:
        if self.transport == "grpc":
            self._channel.close()
        else:
            self._session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds (default 5)")
    parser.add_argument("--requests", type=int, default=20, help="Export calls per transport per round (default 20)")
    parser.add_argument("--batch", type=int, default=256, help="spans per Export (default 256)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between transports, for the intake to drain (default 5)")
    args = parser.parse_args()

    traces = -(-args.requests * args.batch // SPANS_PER_TRACE)
    workdir = Path(tempfile.mkdtemp(prefix="tracefence-bench-http-"))
    serve = Serve(workdir)
    senders = {t: Sender(t, serve.ports) for t in TRANSPORTS}
    rates: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
    try:
        salt = 100
        for warm in TRANSPORTS:  # connections made, code paths warm
            for request in build_requests(salt, 2 * args.batch // SPANS_PER_TRACE, args.batch):
                senders[warm].send(senders[warm].encode(request))
            salt += 1
        time.sleep(args.settle)
        for round_index in range(args.rounds):
            order = TRANSPORTS[round_index % 3 :] + TRANSPORTS[: round_index % 3]
            line = []
            for transport in order:
                batch = build_requests(salt, traces, args.batch)[: args.requests]
                salt += 1
                sender = senders[transport]
                bodies = [sender.encode(r) for r in batch]
                spans = sum(map(span_count, batch))
                start = time.perf_counter()
                for body in bodies:
                    sender.send(body)
                rate = spans / (time.perf_counter() - start)
                rates[transport].append(rate)
                line.append(f"{transport} {rate:,.0f}")
                time.sleep(args.settle)
            print(f"round {round_index + 1}: spans/s acknowledged: " + ", ".join(line), flush=True)
    finally:
        for sender in senders.values():
            sender.close()
        serve.stop()

    print(f"\n{args.rounds} paired rounds, {args.requests} calls of {args.batch} spans per transport per round, one call in flight")
    for transport in TRANSPORTS[1:]:
        ratios = [h / g for h, g in zip(rates[transport], rates["grpc"])]
        print(
            f"{transport} / grpc spans/s: min {min(ratios):.2f}  median {statistics.median(ratios):.2f}  max {max(ratios):.2f}"
            f"   (refusals waited out: {senders[transport].refused}; grpc: {senders['grpc'].refused})"
        )


if __name__ == "__main__":
    main()
