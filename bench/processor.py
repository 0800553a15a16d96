"""Spans per second through a TracerProvider with TraceFenceSpanProcessor in front of BatchSpanProcessor,
against BatchSpanProcessor alone, measured in the same run.

Agent-shaped traces: 10 spans each (an agent root, model calls, and 3 tool spans
with 8 attributes each). The exporter at the end counts spans and drops them, so
what is measured is the pipeline in the agent's process, not a network.

    .venv/bin/python bench/processor.py [--traces 3000] [--repeat 3] [--held 10000]

Runs are paired: each repeat measures Batch alone, then the fence in front of it, one after the
other, and the ratio of that pair is taken, so drift on a shared machine hits both sides of a
ratio alike. Prints spans/s of each set-up and the ratio fence/Batch as median (min-max) over the
pairs (bar >= 0.65, goal >= 0.8), and peak memory (ru_maxrss of a fresh subprocess) with --held
traces held undecided.
"""

from __future__ import annotations

import argparse
import json
import statistics
import resource
import subprocess
import sys
import time

from agent_shape import run_agent_traces
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class CountingExporter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans):
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def measure(kind: str, traces: int) -> float:
    exporter = CountingExporter()
    provider = TracerProvider()
    batch = BatchSpanProcessor(exporter, max_queue_size=1 << 20, max_export_batch_size=512)
    if kind == "fence":
        from otel_tracefence.sdk import TraceFenceSpanProcessor

        provider.add_span_processor(TraceFenceSpanProcessor(batch, review_sink=None))
    else:
        provider.add_span_processor(batch)
    start = time.perf_counter()
    run_agent_traces(provider, traces)
    provider.force_flush()
    elapsed = time.perf_counter() - start
    provider.shutdown()
    assert exporter.count == traces * 10, (kind, exporter.count)
    return traces * 10 / elapsed


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
    parser.add_argument("--held-memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.held_memory_child:
        held_memory(args.held)
        return
    measure("batch", 200)
    measure("fence", 200)  # warm up imports and caches
    results = {"batch": [], "fence": []}
    for _ in range(args.repeat):  # paired: Batch alone then the fence, one after the other
        for kind in results:
            results[kind].append(measure(kind, args.traces))
    ratios = [f / b for f, b in zip(results["fence"], results["batch"])]

    def spread(values: list[float], fmt: str) -> str:
        return f"{fmt.format(statistics.median(values))} (min {fmt.format(min(values))}, max {fmt.format(max(values))})"

    print(f"traces: {args.traces} x 10 spans (3 tool spans with 8 attributes), {args.repeat} paired runs")
    print(f"BatchSpanProcessor alone            : {spread(results['batch'], '{:.0f}')} spans/s")
    print(f"TraceFenceSpanProcessor + Batch     : {spread(results['fence'], '{:.0f}')} spans/s")
    print(f"ratio of each pair (bar >= 0.65)    : {spread(ratios, '{:.3f}')}")
    out = subprocess.run([sys.executable, __file__, "--held-memory-child", "--held", str(args.held)], capture_output=True, text=True, check=True)
    mem = json.loads(out.stdout)
    print(f"peak memory with {mem['held_traces']} traces held: {mem['peak_mib']:.0f} MiB (process baseline {mem['base_mib']:.0f} MiB)")


if __name__ == "__main__":
    main()
