"""Whether ``tracefence serve`` is ready for traffic (``/readyz``), checked in the background.

Ready once it started, while every check passes, and until its stop begins: each upstream answers (a TCP
connection to it opens; for an output file, its folder takes a new file) and the review store takes writes (a
SQLite database: its folder and files open read-write and its volume has ``review_db_min_free_bytes`` free; a
PostgreSQL one: a connection answers). The checks run on a thread of their own every ``CHECK_EVERY_S`` seconds (a
probe never waits on an upstream), the first at once; until it finished the service is not ready (``starting``).
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse
from typing import Callable

CHECK_EVERY_S = 5.0
CONNECT_TIMEOUT_S = 2.0
Check = Callable[[], "str | None"]  # None: passed; else what is wrong


def host_port(endpoint: str, default_port: int | None = None) -> tuple[str, int]:
    """The host and port an upstream ``endpoint`` connects to (``host:port`` or a URL; a URL with no port: 443 for
    ``https``, 80 for ``http``). Raises ``ValueError``."""
    text = endpoint.strip()
    if text.startswith("unix:"):
        raise ValueError(f"{endpoint}: not a TCP address")
    parts = urllib.parse.urlsplit(text if "://" in text else "//" + text)
    port = parts.port or default_port or {"https": 443, "http": 80}.get(parts.scheme)
    if not parts.hostname or port is None:
        raise ValueError(f"{endpoint}: no host and port")
    return parts.hostname, port


def upstream_check(endpoint: str) -> Check:
    """A TCP connection to ``endpoint`` opens within ``CONNECT_TIMEOUT_S``."""

    def check() -> str | None:
        try:
            host, port = host_port(endpoint)
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return None
        except (OSError, ValueError) as exc:
            return f"upstream {endpoint} does not answer: {exc}"

    return check


def folder_check(path: str) -> Check:
    """The folder of ``path`` (an output file) takes new files."""

    def check() -> str | None:
        folder = os.path.dirname(os.path.abspath(path))
        return None if os.access(folder, os.W_OK) else f"the folder {folder} of {path} takes no writes"

    return check


class Readiness:
    """The checks (``name`` -> check), run every ``every_s`` seconds once :meth:`start` is called; ``accepting``
    says whether the service still takes calls (False once its stop began)."""

    def __init__(self, checks: dict[str, Check], accepting: Callable[[], bool], every_s: float = CHECK_EVERY_S) -> None:
        self._checks = checks
        self._accepting = accepting
        self._every_s = every_s
        self._problems: dict[str, str] | None = None  # None: the first round has not finished
        self._started = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """The service started: check now and then every ``every_s`` seconds."""
        self._started = True
        self._thread = threading.Thread(target=self._run, name="tracefence-readiness", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def check_now(self) -> dict[str, str]:
        """Run every check once; the problems found (name -> what is wrong)."""
        problems: dict[str, str] = {}
        for name, check in self._checks.items():
            try:
                problem = check()
            except Exception as exc:  # noqa: BLE001 - a check that fails is a problem, never a crash
                problem = f"{name}: the check failed: {exc!r}"
            if problem:
                problems[name] = problem
        return problems

    def _run(self) -> None:
        while not self._stop.is_set():
            self._problems = self.check_now()
            self._stop.wait(self._every_s)

    def status(self) -> tuple[bool, dict[str, str]]:
        """``(ready, problems)``; the problems name ``starting`` or ``stopping`` when that is why."""
        if not self._started:
            return False, {"starting": "the service is starting"}
        if not self._accepting():
            return False, {"stopping": "the service is stopping: it takes no more calls"}
        problems = self._problems
        if problems is None:
            return False, {"starting": "the first checks have not finished"}
        return not problems, dict(problems)


def review_store_check(review_db: str, min_free_bytes: int, store: object) -> Check:
    """The review store takes writes: a SQLite database's folder takes a new file, its files are writable
    (``os.access``: never opened, since closing any descriptor of a database file drops the locks SQLite holds on it
    in this process) and its volume has ``min_free_bytes`` free; a PostgreSQL one answers a lookup."""
    from otel_tracefence.review.sqlite_room import free_bytes
    from otel_tracefence.review.targets import is_postgres_url

    def check() -> str | None:
        if is_postgres_url(review_db):
            store.get("0" * 32)  # type: ignore[attr-defined]  # raises when the server does not answer
            return None
        folder = os.path.dirname(os.path.abspath(review_db))
        probe = os.path.join(folder, f".{os.path.basename(review_db)}.ready-{os.getpid()}")
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(probe)
        except OSError as exc:
            return f"review database {review_db}: its folder {folder} takes no new file ({exc.strerror or exc})"
        for name in (review_db, f"{review_db}-wal", f"{review_db}-shm"):
            if os.path.exists(name) and not os.access(name, os.R_OK | os.W_OK):
                return f"review database {review_db}: {name} is not writable"
        if min_free_bytes > 0 and (free := free_bytes(review_db)) < min_free_bytes:
            return f"review database {review_db}: its volume has {free} bytes free, less than review_db_min_free_bytes ({min_free_bytes})"
        return None

    return check
