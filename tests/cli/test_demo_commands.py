"""Issue 13: the commands ``make demo`` suggests work as printed, without activating .venv."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def retried_id(stdout: str) -> str:
    """The trace id of the retried conversation's trace."""
    return re.search(r"^trace ([0-9a-f]{32}) \(invoke_agent billing\): class review\n  call_retried_1 ", stdout, flags=re.M).group(1)


def test_the_demos_suggested_commands_run_without_an_active_venv(tmp_path: Path):
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != bin_dir)
    demo = subprocess.run([sys.executable, "-m", "otel_tracefence.demo"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert demo.returncode == 0, demo.stderr
    # The retried conversation (issue 25): held as a retry of the timed-out one, naming its trace.
    timed_out = re.search(r"^trace ([0-9a-f]{32}) \(invoke_agent billing\): class review\n  call_globex_1 +invoice.create +review +write_timeout", demo.stdout, flags=re.M)
    retried = re.search(r"^  call_retried_1 +invoice.create +review +retry_of_held_write +related: - +earlier trace: ([0-9a-f]{32})$", demo.stdout, flags=re.M)
    assert timed_out and retried and retried.group(1) == timed_out.group(1), demo.stdout
    # Reconciled with the billing stand-in (issue 25): both held invoices found once, the ticket's conflict left open.
    reconciled = sorted(re.findall(r"^  ([0-9a-f]{32})  (resolved|left open) +(.+)$", demo.stdout, flags=re.M))
    ticket = re.search(r"^trace ([0-9a-f]{32}) \(invoke_agent billing\): class review\n  call_7_1 ", demo.stdout, flags=re.M).group(1)
    found = "found_once   by otel_tracefence.demo_billing:find_invoice"
    assert reconciled == sorted([(timed_out.group(1), "resolved", found), (ticket, "left open", "no reconciler for ticket.update"), (retried_id(demo.stdout), "resolved", found)])
    assert demo.stdout.count("invoice.create: found_once: billing has invoice in_globex_990 with key inv-globex-990\n") == 2
    script = str(Path(sys.executable).parent / "tracefence")
    suggested = re.findall(r"\(try: (.+?)\)$|^tools they show: (.+)$", demo.stdout, flags=re.M)
    commands = [a or b for a, b in suggested]
    assert commands == [
        f"{script} plan out/demo-spans.otlp.jsonl --format table",
        f"{script} tools out/demo-spans.otlp.jsonl",
        f"{script} review --db out/demo-review.db show <trace id prefix>",
        f"{script} reconcile --db out/demo-review.db --config out/demo-reconcile.yaml",
    ]
    trace_id = re.search(r"^([0-9a-f]{32})  open", demo.stdout, flags=re.M).group(1)
    for command in commands:
        proc = subprocess.run(shlex.split(command.replace("<trace id prefix>", trace_id[:8])), capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
        assert proc.returncode == 0, (command, proc.stderr)
        assert proc.stdout
        if " tools " in command:  # the manual's command-line page shows this table
            readme = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
            shown = readme[readme.index("$ tracefence tools out/demo-spans.otlp.jsonl\n") :].split("\n", 1)[1].split("```", 1)[0]
            assert proc.stdout == shown
