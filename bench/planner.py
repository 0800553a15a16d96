"""Planner benchmark: time ``plan_trace`` on agent-shaped traces of growing size.

Run by hand (``make bench`` runs it with the defaults)::

    .venv/bin/python bench/planner.py [--sizes 1000,10000,100000,1000000] [--repeat N]

For each size, one trace of that many ``ToolStep`` values is built in a fresh
subprocess from a seeded ``random.Random`` (same seed, same trace, on every
machine). Arguments are canonicalized once, up front, with
``otel_tracefence.normalize.values.arguments_from_value``, so only the planner
is timed. Each subprocess then times, with ``time.perf_counter``:

* ``plan_trace`` over the steps, best of N runs (N = ``--repeat``, default 3;
  ``--repeat-large``, default 1, for 1,000,000 steps or more; a size whose run
  is short gets more, up to 50, until 0.5 s is spent on it), with the garbage
  collector on, as in a service, and counting the full collections it triggers;
* ``plan_trace`` again with the collector off (``gc.disable()``): the planner's
  own work;
* a baseline doing the least any planner must do over the same steps: one pass
  grouping them in a dict keyed by ``(tool, arguments_sha256)`` (collector off,
  best of at least 5 runs).

and reports ``ru_maxrss`` (the process's peak resident set size, as the kernel
counts it) after building the trace and after the first planner run. The parent
prints the tables; see ``bench/README.md`` for what the columns mean.

Time per step should stay flat as the trace grows: the planner groups by
hashing, caps the related ids it lists, and sorts steps that arrive already in
trace order (timsort is linear on ordered input). "x smallest" is the time per
step at each size over the time per step at the smallest size; "x base" is the
planner's time over the baseline's, a figure that means about the same on a slow
or a fast machine.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter

DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
LARGE = 1_000_000  # sizes from here on use --repeat-large runs
SEED = 20240611
MIN_SECONDS = 0.5  # sizes whose run is short get more runs, up to MAX_RUNS, to spend at least this long
MAX_RUNS = 50
BASELINE_RUNS = 5  # the baseline is cheap: always at least this many runs, best taken

READ_TOOLS = ("search_docs", "get_order", "list_files", "read_file", "http_get", "lookup_customer")
WRITE_TOOLS = ("create_ticket", "send_email", "charge_card", "update_record", "delete_file", "post_message")
UNKNOWN_TOOLS = ("run_script", "mcp_call", "browser_action")

# The mix (fractions of all steps). Repeats and reused keys point back at a
# uniformly chosen earlier step, so their groups stay small and their number
# grows in proportion to the trace: every size has the same shape.
P_READ = 0.60  # declared reads, status ok
P_WRITE_OK = 0.30  # writes, status ok, result recorded
P_WRITE_TIMEOUT = 0.05  # writes, status timeout, no result
# the rest (~0.05): effect unknown (no declaration, no rule, no hint), status ok
P_READ_REPEAT = 1 / 12  # of reads: same tool and arguments as an earlier read (~5% of steps)
P_WRITE_KEY = 0.90  # of writes: an idempotency key is recorded
P_WRITE_CONFLICT = 0.01  # of keyed writes: reuse an earlier write's key with other arguments
P_WRITE_REPEAT = 0.01  # of writes: repeat an earlier write (same tool, arguments and key)


def _rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports ru_maxrss in KiB)."""
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / (1 << 20)


def build_steps(n: int, seed: int = SEED) -> list:
    """One trace of ``n`` agent-shaped tool steps, in trace order, arguments already canonical."""
    from otel_tracefence.core.config import Limits
    from otel_tracefence.core.model import Effect, EffectSource, ToolStatus, ToolStep
    from otel_tracefence.normalize.values import arguments_from_value

    limits = Limits()
    rng = random.Random(seed)
    trace_id = f"{seed:032x}"
    start = 1_700_000_000_000_000_000
    steps: list[ToolStep] = []
    reads: list[tuple[str, tuple[str, str]]] = []  # (tool, (json, sha256)) of earlier reads
    writes: list[tuple[str, tuple[str, str], str | None]] = []  # (tool, (json, sha256), key) of earlier writes
    keyed: list[tuple[str, str]] = []  # (tool, key) of earlier keyed writes

    def canonical(args: dict) -> tuple[str, str]:
        a = arguments_from_value(args, limits)
        assert a.json is not None and a.sha256 is not None, a
        return a.json, a.sha256  # keep only what a ToolStep holds, not the parsed value

    def result_hash(i: int) -> str:
        return hashlib.sha256(b"result %d" % i).hexdigest()

    for i in range(n):
        r = rng.random()
        key = None
        result = None
        if r < P_READ:
            effect, status, source = Effect.READ, ToolStatus.OK, EffectSource.DECLARED
            if reads and rng.random() < P_READ_REPEAT:
                tool, args = reads[rng.randrange(len(reads))]
            else:
                tool = rng.choice(READ_TOOLS)
                args = canonical({"query": f"{tool} item {i}", "limit": rng.randint(1, 50), "filters": {"lang": "en", "page": rng.randint(1, 9)}})
                reads.append((tool, args))
            result = result_hash(i)
        elif r < P_READ + P_WRITE_OK + P_WRITE_TIMEOUT:
            effect, source = Effect.WRITE, EffectSource.DECLARED
            status = ToolStatus.OK if r < P_READ + P_WRITE_OK else ToolStatus.TIMEOUT
            if writes and rng.random() < P_WRITE_REPEAT:
                tool, args, key = writes[rng.randrange(len(writes))]
            else:
                tool = rng.choice(WRITE_TOOLS)
                if rng.random() < P_WRITE_KEY:
                    if keyed and rng.random() < P_WRITE_CONFLICT:
                        tool, key = keyed[rng.randrange(len(keyed))]  # same key, other arguments
                    else:
                        key = f"idem-{seed}-{i}"
                        keyed.append((tool, key))
                body = {"target": f"{tool}/{i}", "amount": rng.randint(1, 10_000), "note": f"step {i} of the agent's plan"}
                if key is not None:
                    body["idempotency_key"] = key
                args = canonical(body)
                writes.append((tool, args, key))
            if status is ToolStatus.OK:
                result = result_hash(i)
        else:
            effect, status, source = Effect.UNKNOWN, ToolStatus.OK, EffectSource.NONE
            tool = rng.choice(UNKNOWN_TOOLS)
            args = canonical({"command": f"{tool} --step {i}", "timeout_s": rng.randint(1, 120)})
            result = result_hash(i)
        steps.append(
            ToolStep(
                trace_id=trace_id,
                call_id=f"call_{i:08d}",
                tool=tool,
                effect=effect,
                status=status,
                effect_source=source,
                span_id=f"{rng.getrandbits(64):016x}",
                idempotency_key=key,
                arguments_json=args[0],
                arguments_sha256=args[1],
                arguments_unavailable=None,
                result_recorded=result is not None,
                result_sha256=result,
                start_time_unix_nano=start + i * 1_000_000 + rng.randrange(1_000),
                sequence=i,
            )
        )
    return steps


def baseline(steps: list) -> dict:
    """The least any planner must do: one pass grouping the steps by (tool, arguments_sha256)."""
    table: dict = {}
    for step in steps:
        key = (step.tool, step.arguments_sha256)
        group = table.get(key)
        if group is None:
            table[key] = [step]
        else:
            group.append(step)
    return table


def _timed_plan(plan_trace, steps: list) -> tuple[float, float, object, int]:
    """One planner run: wall seconds, CPU seconds, the plan, and how many full (generation 2) collections ran inside it."""
    full_before = gc.get_stats()[2]["collections"]
    cpu = time.process_time()
    t = time.perf_counter()
    plan = plan_trace(steps[0].trace_id, steps)
    seconds = time.perf_counter() - t
    cpu = time.process_time() - cpu
    return seconds, cpu, plan, gc.get_stats()[2]["collections"] - full_before


def worker(n: int, repeat: int, seed: int, shuffle: bool) -> dict:
    """Runs in a fresh subprocess: build one trace of ``n`` steps, time the planner and the baseline."""
    from otel_tracefence.planner import plan_trace

    rss_start = _rss_mib()
    t0 = time.perf_counter()
    gc.disable()  # building is not timed; the collector would only slow it down
    steps = build_steps(n, seed)
    if shuffle:
        random.Random(seed + 1).shuffle(steps)
    gc.enable()
    gc.collect()
    build_s = time.perf_counter() - t0
    rss_steps = _rss_mib()

    # The planner as it runs in a service: the cyclic garbage collector on, at its default thresholds.
    plan_times = []
    full_gcs = []
    cpu_times = []
    summary = None
    run = 0
    while run < repeat:
        seconds, cpu, plan, full = _timed_plan(plan_trace, steps)
        plan_times.append(seconds)
        cpu_times.append(cpu)
        full_gcs.append(full)
        if run == 0:
            rss_plan = _rss_mib()  # peak so far: the steps, plus the planner's peak on its first run
            decisions = Counter(d.decision.value for d in plan.steps)
            reason_counts = Counter(r for d in plan.steps for r in d.reasons)
            summary = {
                "replay_class": plan.replay_class.value,
                "decisions": dict(sorted(decisions.items())),
                "reasons": dict(sorted(reason_counts.items())),
                "max_related": max(len(d.related_call_ids) for d in plan.steps),
            }
            assert len(plan.steps) == n
            # A run of a small trace lasts milliseconds, and one scheduler hiccup would make the
            # reference of every "x smallest": run it until MIN_SECONDS have been spent on it.
            repeat = max(repeat, min(MAX_RUNS, math.ceil(MIN_SECONDS / seconds)))
        del plan
        gc.collect()
        run += 1

    # The same with the collector off: what is left is the planner's own work (and the memory hierarchy).
    nogc_times = []
    for _ in range(repeat):
        gc.disable()
        seconds, _, plan, _ = _timed_plan(plan_trace, steps)
        gc.enable()
        nogc_times.append(seconds)
        del plan
        gc.collect()

    # The baseline with the collector off, so it is the same small, steady amount of work at every size.
    base_times = []
    for _ in range(max(repeat, BASELINE_RUNS)):  # cheap, and the denominator of every "x base"
        gc.disable()
        t = time.perf_counter()
        table = baseline(steps)
        base_times.append(time.perf_counter() - t)
        gc.enable()
        del table
        gc.collect()

    return {
        "steps": n,
        "repeat": repeat,
        "build_s": build_s,
        "plan_s": min(plan_times),
        "plan_runs_s": plan_times,
        "plan_best_cpu_share": cpu_times[plan_times.index(min(plan_times))] / min(plan_times),
        "full_gcs": full_gcs,
        "plan_nogc_s": min(nogc_times),
        "baseline_s": min(base_times),
        "rss_start_mib": rss_start,
        "rss_steps_mib": rss_steps,
        "rss_plan_mib": rss_plan,
        "rss_peak_mib": _rss_mib(),
        "summary": summary,
    }


def _run_worker(n: int, repeat: int, seed: int, shuffle: bool) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(n), "--repeat", str(repeat), "--seed", str(seed)]
    if shuffle:
        cmd.append("--shuffle")
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _print_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="comma-separated trace sizes (steps); default %(default)s")
    parser.add_argument("--repeat", type=int, default=3, help=f"runs per size below {LARGE:,} steps, best taken; short runs get more, to last {MIN_SECONDS} s (default %(default)s)")
    parser.add_argument("--repeat-large", type=int, default=1, help=f"runs per size of {LARGE:,} steps or more (default %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the generated traces (default %(default)s)")
    parser.add_argument("--shuffle", action="store_true", help="hand the planner the steps in a random order (it must sort them)")
    parser.add_argument("--verbose", action="store_true", help="also print each size's decisions and reason counts")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.repeat, args.seed, args.shuffle)))
        return 0

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    started = time.perf_counter()
    print(f"otel-tracefence planner benchmark: python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} cpu(s), seed {args.seed}, input {'shuffled' if args.shuffle else 'in trace order'}")
    load = "n/a" if not hasattr(os, "getloadavg") else ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"one trace per size, each in a fresh subprocess; times are the best of the runs shown; load average at start {load}\n")
    rows = []
    for n in sizes:
        repeat = args.repeat_large if n >= LARGE else args.repeat
        row = _run_worker(n, repeat, args.seed, args.shuffle)
        rows.append(row)
        print(f"  {n:>9,} steps: built in {row['build_s']:.1f} s, planned {row['repeat']}x", file=sys.stderr, flush=True)

    ref = rows[0]["plan_s"] / rows[0]["steps"]
    ref_nogc = rows[0]["plan_nogc_s"] / rows[0]["steps"]
    _print_table(
        ("steps", "runs", "plan s", "steps/s", "us/step", "x smallest", "x base", "full GCs", "gc off us/step", "x smallest", "x base", "base us/step"),
        [
            (
                f"{row['steps']:,}",
                str(row["repeat"]),
                f"{row['plan_s']:.3f}",
                f"{row['steps'] / row['plan_s']:,.0f}",
                f"{row['plan_s'] / row['steps'] * 1e6:.2f}",
                f"{row['plan_s'] / row['steps'] / ref:.2f}",
                f"{row['plan_s'] / row['baseline_s']:.0f}",
                str(row["full_gcs"][0]),
                f"{row['plan_nogc_s'] / row['steps'] * 1e6:.2f}",
                f"{row['plan_nogc_s'] / row['steps'] / ref_nogc:.2f}",
                f"{row['plan_nogc_s'] / row['baseline_s']:.0f}",
                f"{row['baseline_s'] / row['steps'] * 1e6:.3f}",
            )
            for row in rows
        ],
    )
    print()
    _print_table(
        ("steps", "build s", "RSS start MiB", "RSS steps MiB", "RSS after plan MiB", "plan raised peak MiB", "bytes/step"),
        [
            (
                f"{row['steps']:,}",
                f"{row['build_s']:.1f}",
                f"{row['rss_start_mib']:,.0f}",
                f"{row['rss_steps_mib']:,.0f}",
                f"{row['rss_plan_mib']:,.0f}",
                f"{row['rss_plan_mib'] - row['rss_steps_mib']:,.0f}",
                f"{(row['rss_plan_mib'] - row['rss_steps_mib']) * (1 << 20) / row['steps']:,.0f}",
            )
            for row in rows
        ],
    )

    print("""
us/step: plan_trace with the garbage collector on, at its default thresholds (as in a service).
  x smallest: over the smallest size's us/step (flat, near 1, is linear growth).
  x base: over the baseline's time on the same steps.
full GCs: generation-2 (full) collections CPython ran inside the first timed plan_trace call.
gc off: plan_trace again with gc.disable(): the planner's own work, without the collector; the
  'x smallest' and 'x base' after it are the same ratios for that run.
base us/step: the baseline, one pass grouping the same steps in a dict keyed by (tool, arguments_sha256),
  the least any planner must do (run with gc off, so it is the same work at every size; what growth
  it shows is the memory hierarchy: the steps stop fitting in the CPU caches).
RSS: ru_maxrss, the peak resident set size of the whole worker process (interpreter, modules, steps,
  plan), a high-water mark. 'RSS steps': after building the trace. 'RSS after plan': after the first
  planner run. 'plan raised peak': how far that run raised the high-water mark, i.e. the plan it
  returns plus what it holds while working (groups, sorted copy), less any freed memory reused.
'on CPU' below: the best run's process CPU time over its wall time; well under 100% means other
  work on the machine took the CPU from the benchmark, and the figures are inflated.""")
    for row in rows:
        s = row["summary"]
        runs = row["plan_runs_s"]
        print(f"\n{row['steps']:,} steps: class {s['replay_class']}, decisions {s['decisions']}, max related ids {s['max_related']}"
              + (f", runs best/median/worst {min(runs):.3f}/{statistics.median(runs):.3f}/{max(runs):.3f} s" if len(runs) > 1 else "")
              + f", best run on CPU {row['plan_best_cpu_share']:.0%} of its wall time"
              + f", full GCs per run {sorted(set(row['full_gcs']))}")
        if args.verbose:
            print(f"  reasons {s['reasons']}")
    load = "n/a" if not hasattr(os, "getloadavg") else ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\ntotal wall time {time.perf_counter() - started:.0f} s; load average at end {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
