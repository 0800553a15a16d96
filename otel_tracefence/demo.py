"""``make demo``: plan the example traces shipped in ``examples/`` and print them as tables."""

from __future__ import annotations

import sys
from pathlib import Path

from otel_tracefence.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run() -> int:
    for path in sorted(EXAMPLES.glob("*")):
        if path.suffix in (".json", ".ndjson", ".csv"):
            print(f"\n== tracefence plan {path.relative_to(EXAMPLES.parent)} --format table")
            sys.stdout.flush()
            main(["plan", str(path), "--format", "table"])
    return 0


if __name__ == "__main__":
    sys.exit(run())
