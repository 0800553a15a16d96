"""``tracefence serve`` with ``/metrics`` (its own meter provider and the Prometheus reader recording every
instrument) against the same service with ``service.prometheus_metrics: false`` (the no-op meter): spans/s until
the upstream holds every span and CPU microseconds per span of the service, 200 Export calls of 512 agent-shaped
spans (``bench/service.py``'s requests, counting upstream, warm-up), paired rounds interleaved.

    .venv/bin/python bench/self_metrics.py [rounds]
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service as b  # noqa: E402 - bench/service.py, beside this file

data_requests = b.build_requests(1, 200 * 512 // 10, 512)
warm = b.build_requests(2, 20 * 512 // 10, 512)
total = sum(b.span_count(r) for r in data_requests)
warm_total = sum(b.span_count(r) for r in warm)
results = {"false": [], "true": []}
for round_ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for prom in ("false", "true"):
        up = b.Upstream()
        peer = None
        try:
            peer = b.Service(Path(tempfile.mkdtemp()), up.port, max_wait_ms=30000, max_traces=10000, extra_args=("--http-endpoint", "127.0.0.1:0"),
                             settings={"OTEL_TRACEFENCE_SERVICE__PROMETHEUS_METRICS": prom})
            b.send(peer.port, warm, 4)
            up.ask(f"wait {warm_total} 60")
            up.ask("reset")
            pid = peer.process.pid
            c0 = b.cpu_seconds(pid)
            start, _ = b.send(peer.port, data_requests, 4)
            done = up.ask(f"wait {total} 120")
            c1 = b.cpu_seconds(pid)
            results[prom].append((total / (done["reached_at"] - start), (c1 - c0) / total * 1e6))
        finally:
            if peer is not None:
                peer.stop()
            up.stop()
for prom, rs in results.items():
    print(f"prometheus_metrics={prom}: spans/s {[round(r[0]) for r in rs]}, CPU us/span {[round(r[1], 1) for r in rs]}")
ratios = [t[1] / f[1] for t, f in zip(results["true"], results["false"])]
print("CPU per span, with/without, per round:", [round(r, 3) for r in ratios], "median", round(statistics.median(ratios), 3))
