"""The store-backed write index's cost per trace: SQLite against PostgreSQL, in the same run.

Starts a throwaway PostgreSQL server (tests/postgres_server.py, fsync ON) and, for each round, plans ``--traces``
one-write traces (each its own key, so every lookup finds nothing and every trace writes one row, as in a
steady stream of new work) through :class:`~otel_tracefence.pipeline.write_index.StoreWriteIndex` on a fresh
SQLite review file and on a fresh PostgreSQL database, alternating which goes first. Each trace is one lookup
and one write transaction (the index's whole per-trace cost). Prints rows (traces) per second, min / median /
max over the rounds.

    .venv/bin/python bench/write_index.py [--traces 2000] [--rounds 3]
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

from otel_tracefence.core.model import OK, WRITE, ToolStep  # noqa: E402
from otel_tracefence.pipeline.write_index import StoreWriteIndex  # noqa: E402
from otel_tracefence.planner import plan_trace  # noqa: E402
from otel_tracefence.review import open_review_store  # noqa: E402
from otel_tracefence.review.open import open_write_index_backend  # noqa: E402


def _plans(count: int, salt: str) -> list:
    plans = []
    for n in range(count):
        trace = f"{salt}{n:028x}"[-32:]
        step = ToolStep(
            trace_id=trace, call_id="c1", tool="invoice.create", effect=WRITE, status=OK, idempotency_key=f"inv-{salt}-{n}",
            arguments_sha256=f"{n:064x}", arguments_json="{}", arguments_unavailable=None, result_recorded=True, start_time_unix_nano=n,
        )  # fmt: skip
        plans.append(plan_trace(trace, (step,)))
    return plans


def _rate(target: str, plans: list) -> float:
    with open_review_store(target):
        index = StoreWriteIndex(open_write_index_backend(target), retention_s=86_400, max_entries=1_000_000)
        start = time.perf_counter()
        for plan in plans:
            index.plan_against(plan)
        elapsed = time.perf_counter() - start
        assert index.failures == 0
        index.close()
    return len(plans) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from postgres_server import PostgresServer

    server = PostgresServer(fsync=True)
    rates: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for r in range(args.rounds):
                targets = {"sqlite": str(Path(folder) / f"review-{r}.db"), "postgresql": server.new_database()}
                for name in (("sqlite", "postgresql") if r % 2 == 0 else ("postgresql", "sqlite")):
                    rates[name].append(_rate(targets[name], _plans(args.traces, f"{r:02x}")))
    finally:
        server.close()
    for name, values in rates.items():
        values.sort()
        print(f"{name:<11} rows/s min {values[0]:8.0f}  median {statistics.median(values):8.0f}  max {values[-1]:8.0f}")


if __name__ == "__main__":
    main()
