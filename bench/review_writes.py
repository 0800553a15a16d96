"""Traces per second the service's fence hands on when every trace goes to the review queue (SQLite, synced).

A trace whose class needs review is written to the review store before its spans are handed on: with one
synced commit per trace, the review writes alone cap the traces going to review. This runs the service's fence
(``Fence`` with the service's views and annotation, a SQLite review store in a temporary folder, every replay
class queued for review) on bench/service.py's agent-shaped requests (512 spans each, 10-span traces, roots
last), in two ways a service decides traces:

* ``batch``: ``decision_wait_ms`` 0, each request's traces decided by the batch that ends them;
* ``timer``: ``decision_wait_ms`` 20 (as ``serve``'s default wait, shorter), decided by the fence's timer thread.

Wall time from the first span given to the fence until every span is handed on, as traces per second; the
checkout and the baseline (``--baseline DIR``, a checkout) in fresh subprocesses, interleaved, ``--rounds`` times.

    .venv/bin/python bench/review_writes.py [--requests 20] [--rounds 3] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BATCH = 512
MODES = {"batch": 0.0, "timer": 20.0}


def measure(root: Path, requests: int, wait_ms: float) -> float:
    """Traces per second through the fence of the checkout at ``root``, every trace written for review."""
    sys.path[:0] = [str(root), str(HERE)]
    import otel_tracefence  # noqa: PLC0415 - imported from the checkout asked for

    if not Path(otel_tracefence.__file__).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"imported {otel_tracefence.__file__}, not from {root}")
    from service import SPANS_PER_TRACE, build_requests

    from otel_tracefence.core.config import TraceFenceConfig
    from otel_tracefence.pipeline.fence import Fence
    from otel_tracefence.review import open_review_store
    from otel_tracefence.service import otlp_spans

    made = build_requests(3, requests * BATCH // SPANS_PER_TRACE, BATCH)
    slices = []
    sequence = 0
    for request in made:
        items, refused = otlp_spans.read_request(otlp_spans.lazy_request(request.SerializeToString()))
        assert not refused
        views = []
        for item in items:
            view = otlp_spans.held_view(item, sequence)
            sequence += 1
            views.append((view, item, view.parent_span_id is None))
        slices.append(views)
    spans = sum(len(s) for s in slices)
    handed = [0]
    done = threading.Event()

    def emit(items: list) -> None:
        handed[0] += len(items)
        if handed[0] >= spans:
            done.set()

    with tempfile.TemporaryDirectory() as folder:
        config = TraceFenceConfig(decision_wait_ms=wait_ms, review_classes=["review", "static", "injected", "dynamic"])
        store = open_review_store(str(Path(folder) / "review.db"))
        fence = Fence(
            config, emit=emit, annotate_span=otlp_spans.annotate_item, service_name=lambda item: item.origin.service_name if item is not None else "",
            component="service", review_sink=store, decision_wait_ms=wait_ms, max_wait_ms=30_000, read_view=otlp_spans.planning_view,
        )  # fmt: skip
        start = time.monotonic()
        for views in slices:
            fence.add_batch(views)
        if not done.wait(600):
            raise SystemExit(f"handed on {handed[0]} of {spans} spans")
        took = time.monotonic() - start
        written = len(store.list(page_size=1000)[0])
        fence.shutdown()
    traces = spans // SPANS_PER_TRACE
    if written < min(traces, 1000):
        raise SystemExit(f"{written} review items written, {traces} traces")
    return traces / took


def _child(root: Path, requests: int, mode: str) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(root), "--requests", str(requests), "--mode", mode], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--mode", choices=sorted(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(f"{measure(args.child, args.requests, MODES[args.mode]):.1f}")
        return
    for mode in MODES:
        ratios = []
        for round_number in range(1, args.rounds + 1):
            mine = _child(HERE.parent, args.requests, mode)
            if args.baseline is None:
                print(f"{mode} round {round_number}: {mine:.0f} review traces/s")
                continue
            base = _child(args.baseline, args.requests, mode)
            ratios.append(mine / base)
            print(f"{mode} round {round_number}: this {mine:.0f} review traces/s, baseline {base:.0f}, ratio {mine / base:.2f}")
        if ratios:
            print(f"{mode}: ratio this/baseline min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
