"""Shared parts of the review page tests: a queue with known items, ``tracefence ui`` in a subprocess, Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from otel_tracefence.pipeline.documents import plan_document
from otel_tracefence.core.config import TraceFenceConfig

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
TOKEN = "s3cret-review-token"

# The queue the tests read: (trace id, service, rows). Classes: review (conflict), review (timeout),
# static, injected; two services.
ROWS = {
    "t-conflict": ("billing", [
        {"call_id": "a1", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotency_key": "tk-1", "arguments": {"ticket": 7, "state": "closed"}},
        {"call_id": "a2", "tool": "ticket.update", "effect": "write", "status": "ok", "idempotency_key": "tk-1", "arguments": {"ticket": 7, "state": "reopened"}},
        {"call_id": "a3", "tool": "customer.lookup", "effect": "read", "status": "ok", "arguments": {"customer": "acme"}},
    ]),
    "t-timeout": ("billing", [
        {"call_id": "b1", "tool": "invoice.create", "effect": "write", "status": "timeout", "idempotency_key": "inv-1", "arguments": {"customer": "globex", "amount_cents": 990}},
    ]),
    "t-static": ("pager", [
        {"call_id": "c1", "tool": "pager.create", "effect": "write", "status": "ok", "arguments": {"service": "billing"}},
    ]),
    "t-injected": ("pager", [
        {"call_id": "d1", "tool": "pager.create", "effect": "write", "status": "ok", "arguments": {"service": "db"}, "result": {"page": "p-1"}},
    ]),
}
CLASSES = {"t-conflict": "review", "t-timeout": "review", "t-static": "static", "t-injected": "injected"}


def make_queue(path: Path | str) -> Path | str:
    """A review database at ``path`` (a SQLite file, or a ``postgresql://`` URL) holding the :data:`ROWS`
    traces, planned as ``tracefence plan`` plans them, written oldest first in this order: ``t-injected`` is
    the newest."""
    import json

    from otel_tracefence.review import open_review_store

    config = TraceFenceConfig()
    with open_review_store(path) as store:
        for trace_id, (service, rows) in ROWS.items():
            text = "\n".join(json.dumps({"trace_id": trace_id, **row}) for row in rows)
            outcome = plan_document(text, "ndjson", config)
            assert not outcome.rejected and outcome.plans[0].replay_class.value == CLASSES[trace_id], outcome
            store.upsert(outcome.plans[0], service_name=service)
    return path


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class UiProcess:
    """``tracefence ui`` running in a subprocess on 127.0.0.1, its standard error in ``log``."""

    process: subprocess.Popen
    url: str
    log: Path

    def stop(self) -> str:
        """Stop it (SIGTERM, as an operator would) and return what it logged."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.log.read_text(encoding="utf-8", errors="replace")


def start_ui(db: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> UiProcess:
    """Start ``tracefence ui --db DB --listen 127.0.0.1:<free port>`` and wait until it answers."""
    port = free_port()
    log = tmp / f"ui-{port}.log"
    handle = log.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_tracefence", "ui", "--db", str(db), "--listen", f"127.0.0.1:{port}", *extra],
        stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=tmp,
    )
    handle.close()
    url = f"http://127.0.0.1:{port}"
    ui = UiProcess(process, url, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/inspect", timeout=2):
                return ui
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"tracefence ui did not start: {ui.stop()}") from None
            time.sleep(0.1)


def ensure_chromium() -> str:
    """Debian's ``chromium`` at :data:`CHROMIUM`, installed with apt-get when missing (never ``playwright install``)."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.fail(f"{CHROMIUM} is missing and there is no apt-get to install Debian's chromium package")
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run([apt, "install", "-y", "-q", *lock, "chromium"], env=env, capture_output=True).returncode != 0:
        subprocess.run([apt, "update", "-q", *lock], env=env, check=True, capture_output=True)
        done = subprocess.run([apt, "install", "-y", "-q", *lock, "chromium"], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"apt-get install chromium failed: {done.stderr[-2000:]}")
    return CHROMIUM


def screenshot(page, name: str) -> None:
    """Save the page as ``test-artifacts/<name>.png`` (gitignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
