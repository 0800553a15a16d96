"""CPU per span of ``tracefence serve``'s data path in one process, against a baseline checkout in the same run.

bench/service.py measures the whole service beside rotel, over gRPC, on a busy machine where wall time
swings by 2x. This runs the part that is the service's own work, in one process and without sockets:
the checkout's ``TraceExport.export_protobuf`` (decode, id checks, intake), its intake thread (views,
holding, planning on the fence, annotation), its ``TraceFenceService._emit`` (the request each forward
queue gets) and a ``Forwarder`` (merging batches) whose target encodes what it is given as gRPC would
and drops it. The requests are bench/service.py's agent-shaped ones (512 spans each, 10-span traces,
roots last). Left out: gRPC itself (receiving, sending) and the upstream.

    .venv/bin/python bench/service_path.py [--requests 40] [--rounds 5] [--baseline DIR] [--instructions]

Each round runs this checkout and the baseline (``git worktree add /tmp/base <rev>``) in fresh
subprocesses, interleaved: CPU µs per span (``time.process_time``, every thread of the process) from the
first Export until the forward queue has taken every span, after a warm-up request; then min / median /
max of the ratio this / baseline. With ``--instructions``, instructions per span counted by
``valgrind --tool=callgrind`` instead (stable on a busy machine): a child with --requests R less one with
--requests 0 (same start, warm-up and requests built, none sent), over R x 512 spans.

``--reader`` / ``--baseline-reader`` (``wire`` or ``protobuf``): the ``service.span_reader`` each side runs (issue 29);
``--baseline . --baseline-reader protobuf`` compares this checkout's two readers in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from callgrind import count_instructions, print_against_baseline  # bench/ is the script's folder, first on the path

HERE = Path(__file__).resolve().parent
BATCH = 512


def measure(root: Path, requests: int, built: int | None = None, reader: str = "wire") -> float:
    """CPU µs per span of the data path of the checkout at ``root`` (imported first on the path): ``requests``
    requests sent, of ``built`` built (default ``requests``; the instruction count builds as many for its
    --requests 0 child, so that the difference is the path alone)."""
    sys.path[:0] = [str(root), str(HERE)]
    import otel_tracefence  # noqa: PLC0415 - imported from the checkout asked for

    if not Path(otel_tracefence.__file__).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"imported {otel_tracefence.__file__}, not from {root}")
    from service import build_requests  # this checkout's bench/service.py: the same requests for both

    from otel_tracefence.core.config import TraceFenceConfig
    from otel_tracefence.pipeline.fence import Fence
    from otel_tracefence.service import otlp_spans
    from otel_tracefence.service.export import TraceExport
    from otel_tracefence.service.forward import SENT, Forwarder
    from otel_tracefence.service.intake import Intake
    from otel_tracefence.service.server import TraceFenceService

    class Dropping:
        """A target that encodes each request as the gRPC stub would put it on the wire, and drops it."""

        name, max_message_bytes = "drop", 4 * 1024 * 1024

        def send(self, request):  # noqa: ANN001
            if isinstance(request, list):
                request = b"".join(request)
            if not isinstance(request, bytes):
                request = request.SerializeToString()
            return SENT

        def close(self) -> None:
            pass

    built = max(requests, built or 0)
    made = build_requests(1, max(built, 1) * BATCH // 10 + 10, BATCH)[:built]
    assert all(len(request.resource_spans[0].scope_spans[0].spans) == BATCH for request in made)
    data = [r.SerializeToString() for r in made][:requests]
    warm = build_requests(2, BATCH // 10, BATCH)[0].SerializeToString()
    forwarder = Forwarder(Dropping(), 10**7, batch_wait_s=0.05)
    server = SimpleNamespace(forwarders=[forwarder], _emit_lock=threading.Lock(), _emit_closed=False, emitted_spans=0)
    extra = {"read_view": otlp_spans.planning_view} if hasattr(otlp_spans, "planning_view") else {}
    wire = reader == "wire" and hasattr(otlp_spans, "wire_planning_view")  # service.span_reader, in a checkout that has it
    if wire:
        extra = {"read_view": otlp_spans.wire_planning_view}
    fence = Fence(
        TraceFenceConfig(decision_wait_ms=0), emit=lambda items: TraceFenceService._emit(server, items), annotate_span=otlp_spans.annotate_item,
        service_name=lambda item: item.origin.service_name if item is not None else "", component="service", review_sink=None,
        decision_wait_ms=0, max_wait_ms=30_000, **extra,
    )
    intake = Intake(fence, 10**7, 10**10)
    export = TraceExport(intake, lambda: None, 1.0, **({"wire_reader": True} if wire else {}))

    def settle(spans: int) -> None:
        while forwarder.sent_spans < spans or intake.depth:
            time.sleep(0.002)

    try:  # the collector as `tracefence serve` sets it once started (a checkout that has the setting)
        from otel_tracefence.service.gc_settings import tune_for_service
    except ImportError:
        pass
    else:
        tune_for_service()
    warm_spans, spans = BATCH // 10 * 10, requests * BATCH
    export.export_protobuf(warm)
    settle(warm_spans)
    start = time.process_time()
    for body in data:
        export.export_protobuf(body)
    settle(warm_spans + spans)
    used = time.process_time() - start
    forwarder.drain(10)
    intake.drain(10)
    return used / spans * 1e6 if requests else 0.0


def instructions(root: Path, args: argparse.Namespace, reader: str) -> float:
    """Instructions per span for the checkout at ``root``, counted by callgrind: a child with --requests R
    less one with --requests 0 (same start, warm-up and requests built), over R x 512 spans."""
    built = ["--built", str(args.requests)]  # both children build the same requests: only the path differs
    counts = [count_instructions([__file__, "--child", str(root), "--requests", str(requests), "--reader", reader, *built]) for requests in (0, args.requests)]
    return (counts[1] - counts[0]) / (args.requests * BATCH)


def _child(root: Path, args: argparse.Namespace, reader: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", str(root), "--requests", str(args.requests), "--reader", reader],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--instructions", action="store_true", help="count instructions with valgrind's callgrind instead of timing")
    parser.add_argument("--reader", choices=("wire", "protobuf"), default="wire", help="this checkout's service.span_reader (default wire)")
    parser.add_argument("--baseline-reader", choices=("wire", "protobuf"), default="protobuf",
                        help="the baseline's (default protobuf; a checkout without the setting reads with protobuf anyway)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--built", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(f"{measure(args.child, args.requests, args.built, args.reader):.3f}")
        return
    this = HERE.parent
    if args.instructions:
        baseline = instructions(args.baseline, args, args.baseline_reader) if args.baseline is not None else None
        print_against_baseline(instructions(this, args, args.reader), baseline)
        return
    ratios = []
    for round_number in range(1, args.rounds + 1):
        mine = _child(this, args, args.reader)
        if args.baseline is None:
            print(f"round {round_number}: {mine:.1f} us CPU/span")
            continue
        base = _child(args.baseline, args, args.baseline_reader)
        ratios.append(mine / base)
        print(f"round {round_number}: this {mine:.1f} us CPU/span, baseline {base:.1f} us CPU/span, ratio {mine / base:.2f}")
    if ratios:
        print(f"ratio this/baseline: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
