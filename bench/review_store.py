"""The review store's operations on PostgreSQL against SQLite, measured in the same run.

Starts a throwaway PostgreSQL server (tests/postgres_server.py: Debian's package, initdb in a temporary
folder, 127.0.0.1, fsync ON here so that a commit costs what it costs in production) and, for each
round, times the same operations on a fresh SQLite file (WAL, synchronous=FULL: the baseline) and on a
fresh PostgreSQL database, alternating which store goes first. Operations, ``--items`` of each:

* ``insert``: upsert of a new item (the item and its ``plan_written`` event);
* ``redeliver``: upsert of the same plan again (the item only: no event);
* ``resolve``: a resolution (the item and its ``resolved`` event);
* ``get``: one item by trace id;
* ``list``: one page of 100 items, newest first.

Prints, per operation, microseconds per operation for each store (median of the rounds) and the ratio
PostgreSQL / SQLite as min / median / max over the rounds (each ratio from one round's paired runs).

    .venv/bin/python bench/review_store.py [--items 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, StepDecision, ToolStatus, ToolStep, TracePlan  # noqa: E402
from otel_tracefence.review import open_review_store  # noqa: E402

OPERATIONS = ("insert", "redeliver", "resolve", "get", "list")


def _plan(trace_id: str) -> TracePlan:
    step = ToolStep(
        trace_id=trace_id,
        call_id="call_1",
        span_id="00f067aa0ba902b7",
        tool="payments.charge",
        effect=Effect.WRITE,
        effect_source=EffectSource.DECLARED,
        status=ToolStatus.TIMEOUT,
        idempotency_key="order-17",
        arguments_json='{"amount_cents":1250}',
        arguments_sha256="95ea3adad0f5a1dfbc893c81031692d97e8bb570ea8f670dd856c002f6644db1",
        arguments_unavailable=None,
        start_time_unix_nano=1_700_000_000_000_000_000,
    )
    return TracePlan(trace_id, ReplayClass.REVIEW, (StepDecision(step, Decision.REVIEW, ("write_timeout",)),))


def _run(target: str, items: int) -> dict[str, float]:
    """Microseconds per operation on a fresh store at ``target``."""
    plans = [_plan(f"{i:032x}") for i in range(items)]
    out: dict[str, float] = {}
    with open_review_store(target) as store:
        for op in OPERATIONS:
            started = time.perf_counter()
            for i, plan in enumerate(plans):
                if op in ("insert", "redeliver"):
                    store.upsert(plan, service_name="bench")
                elif op == "resolve":
                    store.resolve(plan.trace_id, resolved_by="bench", note="checked")
                elif op == "get":
                    store.get(plan.trace_id)
                else:
                    store.list(page_size=100)
            out[op] = (time.perf_counter() - started) / items * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from postgres_server import PostgresServer

    server = PostgresServer(fsync=True)
    runs: dict[str, list[dict[str, float]]] = {"sqlite": [], "postgresql": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                order = ("sqlite", "postgresql") if r % 2 == 0 else ("postgresql", "sqlite")
                for kind in order:
                    if kind == "sqlite":
                        runs[kind].append(_run(str(Path(tmp) / f"round-{r}.db"), args.items))
                    else:
                        url = server.new_database()
                        runs[kind].append(_run(url, args.items))
                        server.drop_database(url)
    finally:
        server.close()
    print(f"review store, {args.items} items, {args.rounds} rounds (interleaved); microseconds per operation, median of rounds")
    print(f"{'operation':<10} {'sqlite':>10} {'postgresql':>11}   ratio pg/sqlite min / median / max")
    for op in OPERATIONS:
        s = statistics.median(run[op] for run in runs["sqlite"])
        p = statistics.median(run[op] for run in runs["postgresql"])
        ratios = sorted(pg[op] / sq[op] for sq, pg in zip(runs["sqlite"], runs["postgresql"]))
        print(f"{op:<10} {s:>10.0f} {p:>11.0f}   {ratios[0]:.2f} / {statistics.median(ratios):.2f} / {ratios[-1]:.2f}")


if __name__ == "__main__":
    main()
