"""``python -m otel_tracefence`` as a user runs it: a subprocess, checked for tracebacks (the CLI tests of every package)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

def run(*args: str, stdin: str | bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    # The runner's own OTEL_TRACEFENCE_* settings (a config file, tool rules) must not change the plans.
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_TRACEFENCE_")}
    proc = subprocess.run(
        [sys.executable, "-m", "otel_tracefence", *args],
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    proc.stdout = proc.stdout.decode("utf-8")
    proc.stderr = proc.stderr.decode("utf-8")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc
