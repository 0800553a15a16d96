"""The persistent queue's cost in throughput (issue 9): ``tracefence serve`` with and without
``--persistent-queue-dir``, in paired, interleaved runs (a fresh service each run), against the same
counting upstream (a separate process) and the same agent-shaped requests as bench/service.py.

Prints end-to-end spans/s (first Export until the upstream has every span) with the queue off and on,
each run's ratio on/off, and min/median/max over the rounds, and the Export call latency p50/p99 both ways.

    .venv/bin/python bench/persistent_queue.py [--requests 200] [--batch 512] [--rounds 3] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import SPANS_PER_TRACE, Service, Upstream, build_requests, percentile, send, span_count  # noqa: E402


def run(upstream: Upstream, requests, warmup, concurrency: int, *, persistent: bool) -> tuple[float, list[float]]:
    total = sum(map(span_count, requests))
    with tempfile.TemporaryDirectory(prefix="tracefence-pq-") as tmp:
        extra = ("--persistent-queue-dir", str(Path(tmp) / "queue")) if persistent else ()
        service = Service(Path(tmp), upstream.port, max_wait_ms=30_000, max_traces=10_000, extra_args=extra)
        try:
            upstream.ask("reset")
            send(service.port, warmup, concurrency)
            upstream.ask(f"wait {sum(map(span_count, warmup))} 60")
            upstream.ask("reset")
            start, latencies = send(service.port, requests, concurrency)
            done = upstream.ask(f"wait {total} 180")
            if done["count"] < total:
                raise RuntimeError(f"the upstream has {done['count']} of {total} spans")
            return done["count"] / (done["reached_at"] - start), latencies
        finally:
            service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    traces = -(-args.requests * args.batch // SPANS_PER_TRACE)
    warmup = build_requests(1, 20 * args.batch // SPANS_PER_TRACE, args.batch)
    requests = build_requests(2, traces, args.batch)
    print(f"{len(requests)} requests of <= {args.batch} spans ({sum(map(span_count, requests))} spans), concurrency {args.concurrency}, {args.rounds} paired rounds")
    upstream = Upstream([sys.executable, str(Path(__file__).resolve().parent / "service.py"), "--upstream-child"])
    rates = {False: [], True: []}
    latencies = {False: [], True: []}
    ratios = []
    try:
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            got = {}
            for persistent in order:
                got[persistent], lat = run(upstream, requests, warmup, args.concurrency, persistent=persistent)
                rates[persistent].append(got[persistent])
                latencies[persistent].extend(lat)
            ratios.append(got[True] / got[False])
            print(f"  round {round_ + 1}: off {got[False]:,.0f} spans/s, on {got[True]:,.0f} spans/s, ratio on/off {ratios[-1]:.2f}", flush=True)
    finally:
        upstream.stop()

    def summary(values: list[float], fmt: str = ",.0f") -> str:
        return f"min {min(values):{fmt}} / median {statistics.median(values):{fmt}} / max {max(values):{fmt}}"

    print(f"spans/s, persistent queue off: {summary(rates[False])}")
    print(f"spans/s, persistent queue on:  {summary(rates[True])}")
    print(f"ratio on/off: {summary(ratios, '.2f')}")
    for persistent in (False, True):
        lat = latencies[persistent]
        print(f"Export latency, queue {'on ' if persistent else 'off'}: p50 {percentile(lat, 0.5) * 1000:.1f} ms, p99 {percentile(lat, 0.99) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
