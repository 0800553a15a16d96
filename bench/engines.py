"""Which engine a benchmark child runs: the compiled one, the pure-Python one, or whatever is installed.

See docs/DECISIONS.md, 115: ``TRACEFENCE_PURE_PYTHON=1`` loads the pure-Python modules; a child asked for
an engine checks it got it (``TRACEFENCE_BENCH_ENGINE``), so a missing or stale build is not measured as
the compiled engine.
"""

from __future__ import annotations

import os

CHOICES = ("installed", "compiled", "python", "both")


def engine_env(engine: str) -> dict[str, str]:
    """The environment of a child that runs ``engine`` (``installed``, ``compiled`` or ``python``)."""
    env = {name: value for name, value in os.environ.items() if name != "TRACEFENCE_PURE_PYTHON"}
    if engine == "python":
        env["TRACEFENCE_PURE_PYTHON"] = "1"
    if engine != "installed":
        env["TRACEFENCE_BENCH_ENGINE"] = engine  # checked by the child
    return env


def check_engine() -> None:
    """In a child: refuse to measure another engine than the one asked for (a stale or missing build)."""
    import otel_tracefence

    wanted = os.environ.get("TRACEFENCE_BENCH_ENGINE")
    if wanted and otel_tracefence.engine() != wanted:
        raise SystemExit(f"asked for the {wanted} engine, loaded {otel_tracefence.engine()}: reinstall (make setup)")
