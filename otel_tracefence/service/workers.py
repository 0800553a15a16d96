"""The worker processes of ``tracefence serve --workers N``: their configuration, start, restart and stop.

Each worker is a ``tracefence serve`` process with the router's configuration except what
:func:`worker_config` changes: it listens on a Unix socket in a private folder (mode 0700, so only the
router's user can reach it; no token, no TLS), serves no OTLP/HTTP, review API or review page, keeps its
persistent queue (if any) in ``<persistent_queue_dir>/worker-<index>`` and writes its own ``output_file`` (with
no upstream: ``tracefence-spans.worker-<index>.otlp.jsonl``).

The group stops by one deadline: the router's stop writes it (:func:`write_stop_deadline`) before it stops its
listeners; from then a worker takes every part the router still hands on (no back-pressure refusals: the clients
were answered already), and its own stop, on the router's SIGTERM, gets all the time left until that deadline
(:func:`stop_budget`), not a fixed share. A worker exits when its router does: ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` on Linux, and
on every platform its signal loop stops when its parent process id changes (:func:`watch_parent`).
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.service import logs

_log = logging.getLogger("otel_tracefence.service")
READY_TIMEOUT_S = 60.0  # a worker that does not answer health checks by then is a failed start
RESTART_PAUSE_S = (0.5, 10.0)  # pause before restarting a worker that died, doubling while it keeps dying young
STABLE_AFTER_S = 30.0  # a worker up this long that dies is restarted after the first pause again
EXIT_S = 1.0  # a worker's exit after its stop returned (its stop line printed, its figures handed on): os._exit
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def worker_socket(folder: str | Path, index: int) -> str:
    """The Unix socket worker ``index`` listens on, in the router's private ``folder``."""
    return str(Path(folder) / f"worker-{index}.sock")


def worker_config(config: TraceFenceConfig, index: int, socket_path: str) -> TraceFenceConfig:
    """The configuration of worker ``index`` from the router's ``config`` (see the module's docstring).

    Raises nothing: the router's configuration was validated already; the Unix socket address is set without
    validation (the public listen-address rule is for ``host:port`` addresses)."""
    settings = config.service
    persistent = str(Path(settings.persistent_queue_dir) / f"worker-{index}") if settings.persistent_queue_dir else ""
    # With no upstream, each worker writes a file of its own: two processes appending to one file could
    # interleave the parts of a long line. tracefence-spans.otlp.jsonl -> tracefence-spans.worker-0.otlp.jsonl
    output = Path(settings.output_file)
    base, dot, rest = output.name.partition(".")
    output_file = str(output.with_name(f"{base}.worker-{index}.{rest}" if dot else f"{base}.worker-{index}"))
    workers = settings.worker_processes

    def share(bound: int) -> int:  # a bound of the whole service, shared out: N workers hold what one process would
        return max(1, math.ceil(bound / workers))

    service = settings.model_copy(
        update={
            "intake_queue_spans": share(settings.intake_queue_spans),
            "intake_queue_bytes": share(settings.intake_queue_bytes),
            "forward_queue_spans": share(settings.forward_queue_spans),
            "output_file": output_file,
            "endpoint": f"unix:{socket_path}",
            "http_endpoint": "",
            "review_endpoint": "",
            "ui_endpoint": "",
            "worker_processes": 1,
            "bearer_token": "",
            "review_token": "",
            "insecure_review_api": False,
            "tls_certificate_file": None,
            "tls_key_file": None,
            "persistent_queue_dir": persistent,
        }
    )
    return config.model_copy(update={"service": service, "max_traces": share(config.max_traces), "decided_cache_size": share(config.decided_cache_size)})


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to send this process SIGTERM when its parent exits (``prctl(PR_SET_PDEATHSIG)``, a no-op
    elsewhere); exit at once when the parent ``parent_pid`` is gone already."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError) as exc:  # no prctl: watch_parent still stops the worker
            _log.warning("worker: prctl(PR_SET_PDEATHSIG) unavailable: %r", exc)
    if os.getppid() != parent_pid:
        raise SystemExit(0)


def watch_parent(parent_pid: int) -> bool:
    """True while the router ``parent_pid`` is still this process's parent (polled by the worker's signal loop)."""
    return os.getppid() == parent_pid


def stop_deadline_path(folder: str | Path) -> Path:
    return Path(folder) / "stop-deadline.json"


def write_stop_deadline(folder: str | Path, seconds_left: float) -> None:
    """The router has begun to stop, and its workers must have stopped ``seconds_left`` seconds from now: written
    (atomically) as a wall-clock time in the router's private folder, for :func:`router_stopping` and
    :func:`stop_budget`. Raises ``OSError`` when the folder cannot be written."""
    path = stop_deadline_path(folder)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"deadline_unix_s": time.time() + seconds_left}), encoding="utf-8")
    os.replace(temporary, path)


def router_stopping(folder: str | Path) -> bool:
    """Whether the router of the private ``folder`` has begun to stop (:func:`write_stop_deadline`)."""
    return stop_deadline_path(folder).exists()


def stop_budget(folder: str | Path) -> float | None:
    """Seconds left until the router's stop deadline (0 when it has passed), or ``None`` when the router wrote
    none (it died without stopping: the worker then takes its own ``drain_timeout_s``)."""
    try:
        deadline = float(json.loads(stop_deadline_path(folder).read_text(encoding="utf-8"))["deadline_unix_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return max(0.0, deadline - time.time())


def stop_summary_path(folder: str | Path, index: int) -> Path:
    return Path(folder) / f"worker-{index}.stopped.json"


def write_stop_summary(folder: str | Path, index: int, summary: dict) -> None:
    """Worker ``index``'s stop line figures, for its router to sum (a file in the router's private folder)."""
    try:
        stop_summary_path(folder, index).write_text(json.dumps(summary, default=str), encoding="utf-8")
    except OSError as exc:  # the router is gone with its folder: nobody to tell
        _log.warning("worker: could not hand the stop line to the router: %s", exc)


def sum_stop_summaries(folder: str | Path, indexes) -> dict:
    """The workers' stop lines summed: ``decided_at_shutdown``, ``dropped_spans``, ``undecided_traces`` and
    ``kept_spans`` added up, ``forwarded_all`` true when every worker said so; ``workers_reported``: how many
    workers wrote theirs (one killed after the deadline writes none)."""
    total = {"decided_at_shutdown": 0, "dropped_spans": 0, "undecided_traces": 0, "kept_spans": 0, "forwarded_all": True, "workers_reported": 0}
    for index in indexes:
        try:
            line = json.loads(stop_summary_path(folder, index).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            total["forwarded_all"] = False
            continue
        total["workers_reported"] += 1
        for key in ("decided_at_shutdown", "dropped_spans", "undecided_traces", "kept_spans"):
            total[key] += int(line.get(key) or 0)
        total["forwarded_all"] = total["forwarded_all"] and bool(line.get("forwarded_all"))
    return total


class WorkerProcess:
    """One worker: its command, its process, and readiness over gRPC health on its socket."""

    def __init__(self, index: int, command: list[str], socket_path: str) -> None:
        self.index = index
        self.command = command
        self.socket_path = socket_path
        self.process: subprocess.Popen | None = None
        self.started_at = 0.0

    def spawn(self) -> None:
        try:
            os.unlink(self.socket_path)  # a dead worker's socket file
        except FileNotFoundError:
            pass
        # The real standard error, not this process's capture of descriptor 2 (logs.NativeStderr): a worker's
        # lines are its own handler's, written once.
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stderr=logs.real_stderr())
        self.started_at = time.monotonic()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait until the worker answers a health check with SERVING. Raises ``OSError`` when it exits first or
        the time runs out."""
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(f"unix:{self.socket_path}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                code = self.process.poll() if self.process is not None else -1
                if code is not None:
                    raise OSError(f"worker {self.index} exited with code {code} before it was ready")
                try:
                    answer = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=0.5, wait_for_ready=True)
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise OSError(f"worker {self.index} did not become ready within {timeout_s:g}s")
                time.sleep(0.05)


class WorkerPool:
    """``count`` worker processes: started (and ready) before the router binds, restarted when one dies, stopped
    with SIGTERM on the router's stop.

    ``command(index)`` gives worker ``index``'s command line. ``restarts`` counts restarts; ``on_restart(index)``
    is called for each (the router's metric).
    """

    def __init__(self, count: int, command, folder: str, on_restart=None) -> None:
        self.folder = folder
        self.workers = [WorkerProcess(i, command(i), worker_socket(folder, i)) for i in range(count)]
        self.restarts = 0
        self._on_restart = on_restart or (lambda index: None)
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None

    def start(self) -> None:
        """Start every worker and wait until each is ready; then watch them. Raises ``OSError`` when one cannot start
        (the others are stopped)."""
        for worker in self.workers:
            worker.spawn()
        try:
            for worker in self.workers:
                worker.wait_ready()
        except OSError:
            self.stop(2.0)
            raise
        # The monitor thread lives until stop(): on Linux a child's PDEATHSIG fires when the thread that started it
        # ends, so the workers it restarts must be started by a thread that outlives them.
        self._monitor = threading.Thread(target=self._watch, name="tracefence-workers", daemon=True)
        self._monitor.start()

    def check_alive(self) -> str | None:
        """A readiness check (``/readyz``): None while every worker runs, else which do not (being restarted)."""
        dead = [w.index for w in self.workers if w.process is None or w.process.poll() is not None]
        return f"worker(s) {', '.join(map(str, dead))} not running (being restarted)" if dead else None

    def _watch(self) -> None:
        pauses = {w.index: RESTART_PAUSE_S[0] for w in self.workers}
        while not self._stopping.wait(0.2):
            for worker in self.workers:
                code = worker.process.poll() if worker.process is not None else None
                if code is None or self._stopping.is_set():
                    continue
                lived = time.monotonic() - worker.started_at
                if lived >= STABLE_AFTER_S:
                    pauses[worker.index] = RESTART_PAUSE_S[0]
                pause = pauses[worker.index]
                _log.error(
                    "worker exited; restarting it: the traces it held are lost, what the router had not handed to it yet goes to the new one",
                    extra={"worker": worker.index, "pid": worker.process.pid, "exit_code": code, "lived_s": round(lived, 1), "restart_in_s": pause},
                )
                if self._stopping.wait(pause):
                    return
                pauses[worker.index] = min(pause * 2, RESTART_PAUSE_S[1])
                try:
                    worker.spawn()
                    worker.wait_ready()
                except OSError as exc:
                    _log.error("worker restart failed; trying again", extra={"worker": worker.index, "error": str(exc)})
                    continue
                self.restarts += 1
                self._on_restart(worker.index)
                _log.warning("worker restarted", extra={"worker": worker.index, "pid": worker.process.pid, "restarts": self.restarts})

    def stop(self, timeout_s: float) -> dict[int, int | None]:
        """SIGTERM every worker (each drains: decides what it holds, forwards, closes its store) and wait up to
        ``timeout_s`` for them all; SIGKILL any still running then. Returns each worker's exit code (``None``:
        killed after the time ran out)."""
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(timeout=min(1.0, timeout_s / 4))  # a restart under way: its new process gets the SIGTERM below
        for worker in self.workers:
            if worker.process is not None and worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        codes: dict[int, int | None] = {}
        for worker in self.workers:
            if worker.process is None:
                continue
            try:
                codes[worker.index] = worker.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _log.error("worker %d did not stop within %.1fs: killed", worker.index, timeout_s)
                worker.process.kill()
                worker.process.wait()
                codes[worker.index] = None
        return codes


__all__ = [
    "WorkerPool", "WorkerProcess", "die_with_parent", "router_stopping", "stop_budget", "sum_stop_summaries", "watch_parent", "worker_config",
    "worker_socket", "write_stop_deadline", "write_stop_summary",
]  # fmt: skip
