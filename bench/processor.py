"""Spans per second through a TracerProvider with TraceFenceSpanProcessor in front of BatchSpanProcessor,
against BatchSpanProcessor alone, measured in the same run.

Agent-shaped traces: 10 spans each (an agent root, model calls, and 3 tool spans
with 8 attributes each). The exporter at the end counts spans and drops them, so
what is measured is the pipeline in the agent's process, not a network.

    .venv/bin/python bench/processor.py [--traces 3000] [--repeat 7] [--held 10000] [--baseline DIR [--rounds 3]]

Runs are paired: each repeat measures Batch alone, then the fence in front of it, one after the
other, and the ratio of that pair is taken, so drift on a shared machine hits both sides of a
ratio alike. Prints spans/s of each set-up and the ratio fence/Batch as median (min-max) over the
pairs (bar >= 0.65, goal >= 0.8), by wall time and by CPU time of the process (all threads: the
Batch worker included), which other work on a shared machine disturbs less; and peak memory
(ru_maxrss of a fresh subprocess) with --held traces held undecided. With ``--baseline DIR`` (another
checkout), --rounds fresh children of this checkout and of the baseline alternate, each running
--repeat pairs, and both sets are printed. ``--instructions`` counts instructions per span with
``valgrind --tool=callgrind`` instead (each set-up less its own start and warm-up), and prints the
ratio Batch alone / fence + Batch, the throughput ratio a machine with nothing else to do would
show; with ``--baseline`` for that checkout too. ``--engine compiled|python|both`` measures this checkout's
compiled engine, its pure-Python one (``TRACEFENCE_PURE_PYTHON=1``), or both, alternating (bench/engines.py);
the default runs whatever is installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_shape import run_agent_traces
from callgrind import count_instructions
from engines import CHOICES, check_engine, engine_env
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class CountingExporter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans):
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def measure(kind: str, traces: int) -> tuple[float, float]:
    """(spans per wall second, spans per CPU second of this process, all threads) through one set-up."""
    exporter = CountingExporter()
    provider = TracerProvider()
    batch = BatchSpanProcessor(exporter, max_queue_size=1 << 20, max_export_batch_size=512)
    if kind == "fence":
        from otel_tracefence.sdk import TraceFenceSpanProcessor

        check_engine()

        provider.add_span_processor(TraceFenceSpanProcessor(batch, review_sink=None))
    else:
        provider.add_span_processor(batch)
    start, cpu_start = time.perf_counter(), time.process_time()
    run_agent_traces(provider, traces)
    provider.force_flush()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    provider.shutdown()
    assert exporter.count == traces * 10, (kind, exporter.count)
    return traces * 10 / elapsed, traces * 10 / cpu


def paired(traces: int, repeat: int) -> dict:
    """``repeat`` pairs (Batch alone, then the fence in front of it): spans/s of each and the ratio of each pair,
    by wall time and by CPU time (robust to other work on the machine)."""
    import otel_tracefence

    measure("batch", 200)
    measure("fence", 200)  # warm up imports and caches
    out: dict = {"module": f"{otel_tracefence.__file__}, {getattr(otel_tracefence, 'engine', lambda: 'python')()} engine", "batch": [], "fence": [], "wall": [], "cpu": []}
    for _ in range(repeat):
        (batch_wall, batch_cpu), (fence_wall, fence_cpu) = measure("batch", traces), measure("fence", traces)
        out["batch"].append(batch_wall)
        out["fence"].append(fence_wall)
        out["wall"].append(fence_wall / batch_wall)
        out["cpu"].append(fence_cpu / batch_cpu)
    return out


def instructions(kind: str, traces: int, checkout: Path | None, engine: str = "installed") -> int:
    """Instructions callgrind counts for ``traces`` traces through one set-up (all threads), less the same
    child's set-up and warm-up (a run with 0 traces): stable on a busy machine, unlike time."""
    env = {**engine_env(engine), **({"PYTHONPATH": str(checkout.resolve())} if checkout is not None else {})}
    counts = [count_instructions([__file__, "--instructions-child", kind, "--traces", str(n)], env, cwd_in_tmp=True) for n in (0, traces)]
    return counts[1] - counts[0]


def held_memory(held: int) -> None:
    """In this (fresh) process: hold `held` traces undecided (roots never end) and print ru_maxrss in MiB."""
    from otel_tracefence.sdk import TraceFenceSpanProcessor

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    provider = TracerProvider()
    processor = TraceFenceSpanProcessor(BatchSpanProcessor(CountingExporter()), review_sink=None, max_traces=held + 1)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    roots = []
    for t in range(held):
        root = tracer.start_span("invoke_agent")
        from opentelemetry import trace

        ctx = trace.set_span_in_context(root)
        for i in range(9):
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": '{"a": 1}'} if i % 3 == 0 else {}
            tracer.start_span(f"child {i}", context=ctx, attributes=attrs).end()
        roots.append(root)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"held_traces": len(processor._fence.buffer), "base_mib": base / 1024, "peak_mib": peak / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=7, help="paired runs (default 7)")
    parser.add_argument("--held", type=int, default=10000)
    parser.add_argument("--baseline", type=Path, help="another checkout: its processor measured the same way, alternating with this one")
    parser.add_argument("--rounds", type=int, default=3, help="with --baseline: rounds of (this, baseline) children (default 3)")
    parser.add_argument("--held-memory-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--instructions", action="store_true", help="count instructions per span with valgrind's callgrind instead of timing")
    parser.add_argument("--engine", choices=CHOICES, default="installed", help="this checkout's engine (default: as installed)")
    parser.add_argument("--pairs-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--instructions-child", choices=("batch", "fence"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.instructions_child:
        measure(args.instructions_child, 200)  # warm-up, in both runs of the child
        if args.traces:
            measure(args.instructions_child, args.traces)
        return
    if args.instructions:
        engines = ("compiled", "python") if args.engine == "both" else (args.engine,)
        sets = [(f"this, {engine} engine", None, engine) for engine in engines]
        for name, checkout, engine in sets + ([("baseline", args.baseline, "installed")] if args.baseline is not None else []):
            batch, fence = (instructions(kind, args.traces, checkout, engine) / (args.traces * 10) for kind in ("batch", "fence"))
            print(f"{name}: Batch alone {batch:,.0f} instructions/span, fence + Batch {fence:,.0f}: ratio Batch/(fence + Batch) {batch / fence:.3f}")
        return
    if args.held_memory_child:
        held_memory(args.held)
        return
    if args.pairs_child:
        print(json.dumps(paired(args.traces, args.repeat)))
        return

    def spread(values: list[float], fmt: str) -> str:
        return f"{fmt.format(statistics.median(values))} (min {fmt.format(min(values))}, max {fmt.format(max(values))})"

    print(f"traces: {args.traces} x 10 spans (3 tool spans with 8 attributes), {args.repeat} paired runs per set")
    engines = ("compiled", "python") if args.engine == "both" else (args.engine,)
    sets = [(f"this, {engine} engine" if args.engine != "installed" else "this", engine_env(engine)) for engine in engines]
    if args.baseline is not None:
        sets.append(("baseline", {**engine_env("installed"), "PYTHONPATH": str(args.baseline.resolve())}))
    runs = {"this": paired(args.traces, args.repeat)} if len(sets) == 1 and args.engine == "installed" else {name: {} for name, _ in sets}
    if len(runs) > 1 or args.engine != "installed":
        for _ in range(args.rounds):  # alternating fresh children, so drift on the machine hits both alike
            for name, env in sets:
                child = subprocess.run(
                    [sys.executable, __file__, "--pairs-child", "--traces", str(args.traces), "--repeat", str(args.repeat)],
                    capture_output=True, text=True, check=True, env=env, cwd=tempfile.gettempdir(),
                )  # fmt: skip
                got = json.loads(child.stdout)
                for key, values in got.items():
                    runs[name][key] = values if key == "module" else runs[name].get(key, []) + values
    for name, got in runs.items():
        print(f"{name} ({got['module']}):")
        print(f"  BatchSpanProcessor alone            : {spread(got['batch'], '{:.0f}')} spans/s")
        print(f"  TraceFenceSpanProcessor + Batch     : {spread(got['fence'], '{:.0f}')} spans/s")
        print(f"  ratio of each pair, wall time       : {spread(got['wall'], '{:.3f}')}   (bar >= 0.65, goal 0.8)")
        print(f"  ratio of each pair, CPU time        : {spread(got['cpu'], '{:.3f}')}")
    out = subprocess.run([sys.executable, __file__, "--held-memory-child", "--held", str(args.held)], capture_output=True, text=True, check=True)
    mem = json.loads(out.stdout)
    print(f"peak memory with {mem['held_traces']} traces held: {mem['peak_mib']:.0f} MiB (process baseline {mem['base_mib']:.0f} MiB)")


if __name__ == "__main__":
    main()
