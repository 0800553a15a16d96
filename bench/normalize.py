"""Microseconds per span to normalize and plan agent-shaped traces, against a baseline checkout in the same run.

The traces are made once by the real SDK (a ``TracerProvider`` with an in-memory exporter): 10 spans
each, an ``invoke_agent`` root, 4 chat spans, 3 ``execute_tool`` spans with 8 attributes
(``agent_shape.tool_attributes``) and 2 plain spans, read with ``from_readable`` as the span
processor reads them. What is timed is ``pipeline.plan_spans`` over every trace (best of --repeat).

    .venv/bin/python bench/normalize.py [--traces 300] [--repeat 5] [--rounds 5] [--baseline DIR] [--instructions]
                                        [--engine installed|compiled|python|both]

With ``--baseline DIR`` (another checkout of the project, e.g. ``git worktree add /tmp/base <rev>``),
each round runs this checkout and the baseline in fresh subprocesses, interleaved, and prints the
pairs, then min / median / max of the ratio this / baseline (above 1: this checkout is slower).

With ``--instructions``, instructions per span are counted by ``valgrind --tool=callgrind`` instead (stable
on a busy machine): a child with --repeat R less one with --repeat 0, over R x spans; with ``--baseline``,
the same for the baseline and the ratio.

``--engine`` picks this checkout's engine (docs/DECISIONS.md, 115): ``compiled`` (the Cython extension
modules setup.py built; the child refuses to run on anything else), ``python`` (``TRACEFENCE_PURE_PYTHON=1``),
``both`` (each round runs one then the other, and the ratio compiled / python is printed), or ``installed``
(the default: whatever this environment loads).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from callgrind import count_instructions, print_against_baseline  # noqa: E402 - bench/ first on the path
from engines import check_engine, engine_env  # noqa: E402 - bench/ first on the path


def measure(root: Path, traces: int, repeat: int) -> float:
    """Microseconds per span for the checkout at ``root`` (imported first on the path)."""
    sys.path[:0] = [str(root), str(root / "bench")]
    import otel_tracefence  # noqa: PLC0415 - imported from the checkout asked for

    if not Path(otel_tracefence.__file__).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"imported {otel_tracefence.__file__}, not from {root}")
    if root.resolve() == HERE.parent.resolve():
        check_engine()
    from agent_shape import run_agent_traces
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_tracefence.core.config import TraceFenceConfig
    from otel_tracefence.normalize import from_readable
    from otel_tracefence.pipeline.plan import plan_spans

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    random.seed(20261207)  # the SDK's trace and span ids: the same spans in every run and checkout
    run_agent_traces(provider, traces)
    by_trace: dict[str, list] = {}
    for index, span in enumerate(exporter.get_finished_spans()):
        view = from_readable(span, index)
        by_trace.setdefault(view.trace_id, []).append(view)
    config = TraceFenceConfig()
    spans = sum(len(views) for views in by_trace.values())
    for trace_id, views in by_trace.items():  # warm-up: caches and lazily built tables
        plan_spans(trace_id, views, config)
    gc.collect()  # the measured runs start from one heap state in every checkout: the collector's timing moved
    gc.freeze()  # instruction counts by up to 8% between builds (DECISIONS 999)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for trace_id, views in by_trace.items():
            plan_spans(trace_id, views, config)
        best = min(best, time.perf_counter() - start)
    return best / spans * 1e6 if repeat else 0.0


def instructions(root: Path, args: argparse.Namespace, env: dict[str, str] | None = None) -> float:
    """Instructions per span of ``plan_spans`` for the checkout at ``root``, counted by callgrind: a child
    with --repeat R less one with --repeat 0 (same set-up and warm-up), over R x spans."""
    counts = [count_instructions([__file__, "--child", str(root), "--traces", str(args.traces), "--repeat", str(repeat)], env) for repeat in (0, args.repeat)]
    return (counts[1] - counts[0]) / (args.repeat * args.traces * 10)


def _child(root: Path, args: argparse.Namespace, env: dict[str, str] | None = None) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(root), "--traces", str(args.traces), "--repeat", str(args.repeat)],
        capture_output=True, text=True, check=True, env=env,
    )
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--instructions", action="store_true", help="count instructions with valgrind's callgrind instead of timing")
    parser.add_argument("--engine", choices=("installed", "compiled", "python", "both"), default="installed", help="this checkout's engine (default: as installed)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(f"{measure(args.child, args.traces, args.repeat):.3f}")
        return
    this = HERE.parent
    if args.engine == "both":
        both_engines(this, args)
        return
    this_env = engine_env(args.engine)
    if args.instructions:
        print_against_baseline(instructions(this, args, this_env), instructions(args.baseline, args) if args.baseline is not None else None)
        return
    ratios = []
    for round_number in range(1, args.rounds + 1):
        mine = _child(this, args, this_env)
        if args.baseline is None:
            print(f"round {round_number}: {mine:.2f} us/span")
            continue
        base = _child(args.baseline, args)
        ratios.append(mine / base)
        print(f"round {round_number}: this {mine:.2f} us/span, baseline {base:.2f} us/span, ratio {mine / base:.2f}")
    if ratios:
        print(f"ratio this/baseline: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")


def both_engines(this: Path, args: argparse.Namespace) -> None:
    """The compiled and the pure-Python engine of this checkout, one after the other in each round."""
    envs = {name: engine_env(name) for name in ("compiled", "python")}
    if args.instructions:
        got = {name: instructions(this, args, env) for name, env in envs.items()}
        for name, value in got.items():
            print(f"{name:8} engine: {value:,.0f} instructions per span")
        print(f"ratio compiled/python: {got['compiled'] / got['python']:.3f}")
        return
    ratios = []
    for round_number in range(1, args.rounds + 1):
        got = {name: _child(this, args, env) for name, env in envs.items()}
        ratios.append(got["compiled"] / got["python"])
        print(f"round {round_number}: compiled {got['compiled']:.2f} us/span, python {got['python']:.2f} us/span, ratio {ratios[-1]:.2f}")
    print(f"ratio compiled/python: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
