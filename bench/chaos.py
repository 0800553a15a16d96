"""Issue 30's chaos run again, one row per check: the figure the issue measured, its bar, PASS or FAIL.

    .venv/bin/python bench/chaos.py [--tracefence PATH] [--python PATH] [--only NAME] [--json]

Each check drives a real ``tracefence serve`` (``--tracefence``: the executable under test, by default this
checkout's ``.venv/bin/tracefence``; another commit's venv measures that commit) as a black box, through its CLI,
its environment settings and real OTLP clients (the SDK's exporters, gRPC and HTTP requests), on 127.0.0.1 only;
the processor checks run ``bench/chaos_sdk.py`` in a child process under ``--python`` (by default the interpreter
beside the executable). The checks run one at a time and stop every process, mount and socket they start, also
when they fail. ``--only NAME`` runs the checks whose name starts with NAME. The checks on a small volume (a tmpfs)
or a read-only mount need root: without it they are listed as SKIP. A check whose setting the version under test
does not know is "n/a". Run by hand (``make chaos``); not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "tests"), str(HERE)]

import grpc  # noqa: E402 - after the path
import requests  # noqa: E402
from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter  # noqa: E402

import http_connection_flood  # noqa: E402
import json_span_bound  # noqa: E402
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb  # noqa: E402
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc  # noqa: E402
from service_helpers import (  # noqa: E402
    Client,
    RecordingUpstream,
    ServeProcess,
    ThrottlingUpstream,
    canary_spans,
    command_env,
    fill,
    free_port,
    raw_request,
    raw_span,
    raw_tool_span,
    send_review_traces,
    stored,
    trace_stub,
)

MIB = 1 << 20
ROOM = str(256 * 1024)  # review_db_min_free_bytes on a small volume (the default, 8 MiB, refuses to start on it)
MARKER = "tf-marker-9c1e5a77"


class Skip(Exception):
    """The check cannot run here (no root, no tmpfs): shown as SKIP with the reason."""


class NotApplicable(Exception):
    """The version under test does not have what the check drives (a setting): shown as n/a."""


@dataclass
class Row:
    check: str
    figure: str
    bar: str
    verdict: str  # PASS, FAIL, SKIP, n/a, ERROR
    seconds: float


@dataclass
class Target:
    """The install under test: its ``tracefence`` executable and its Python (for the processor's child)."""

    tracefence: Path
    python: Path

    @property
    def command(self) -> list[str]:
        return [str(self.tracefence)]

    def serve(self, stack: contextlib.ExitStack, *args: str, cwd: Path, preexec_fn: Callable[[], None] | None = None, **env: str) -> ServeProcess:
        """``tracefence serve ARGS`` started, stopped (SIGKILL) when ``stack`` closes; waits for its listening line.
        Raises NotApplicable when it exits at start naming an environment setting it does not know."""
        proc = ServeProcess(*args, cwd=cwd, preexec_fn=preexec_fn, command=self.command, **env)
        stack.callback(proc.stop)
        try:
            proc.log("tracefence serve listening", timeout=30)
        except AssertionError as exc:
            unknown = [key for key in env if key.lower().removeprefix("otel_tracefence_") in proc.stderr().lower()]
            if proc.proc.poll() is not None and unknown:
                raise NotApplicable(f"unknown setting {unknown[0]}") from exc
            raise
        return proc

    def listening(self, proc: ServeProcess) -> dict[str, Any]:
        return proc.log("tracefence serve listening")


def upstream(stack: contextlib.ExitStack, kind: type[RecordingUpstream] = RecordingUpstream) -> RecordingUpstream:
    up = kind()
    up.start()
    stack.callback(up.stop)
    return up


def client(stack: contextlib.ExitStack, made: Client) -> Client:
    stack.callback(made.shutdown)
    return made


def settle(predicate: Callable[[], Any], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate`` until true or ``timeout`` s: whether it became true (a figure, not an assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def killed(proc: ServeProcess) -> None:
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait(timeout=10)


def mount(stack: contextlib.ExitStack, folder: Path, *options: str) -> Path:
    """``mount OPTIONS`` on ``folder`` (made), unmounted when ``stack`` closes. Raises Skip without root."""
    if os.geteuid() != 0:
        raise Skip("needs root (mount)")
    if not folder.exists():
        folder.mkdir(parents=True)
    done = subprocess.run(["mount", *options, str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        raise Skip(f"cannot mount: {done.stderr.strip()[:60]}")
    stack.callback(subprocess.run, ["umount", "-l", str(folder)], capture_output=True)
    return folder


def tmpfs(stack: contextlib.ExitStack, folder: Path, mib: int) -> Path:
    return mount(stack, folder, "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs")


def peak_mib(pid: int) -> int:
    return json_span_bound.memory(pid)["VmHWM"]


# -- the checks: each returns (figure, passed) -----------------------------------------------------------------


def review_full_sigkill(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Item 1: the review store refuses every write (as a full disk does), persistent queue on; 100 review traces
    acknowledged and forwarded, SIGKILL, the store writable again, restart: acknowledged traces not in the store."""
    db, up = work / "review.db", upstream(stack)
    args = ("--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up.port}", "--review-db", str(db), "--decision-wait-ms", "0", "--persistent-queue-dir", str(work / "queue"))
    with contextlib.ExitStack() as first:
        killed(t.serve(first, *args, cwd=work))  # makes the database and its schema
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TRIGGER refuse_all BEFORE INSERT ON review_items BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    with contextlib.ExitStack() as first:
        proc = t.serve(first, *args, cwd=work)
        sender = client(first, Client(t.listening(proc)["port"], "billing-agent", batch=True))
        acked = send_review_traces(sender, 100)
        settle(lambda: {r.trace_id for r in up.spans()} >= set(acked), 30)
        held = len(set(acked) - stored(db))
        killed(proc)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER refuse_all")
    t.serve(stack, *args, cwd=work)
    settle(lambda: set(acked) <= stored(db), 30)
    missing = len(set(acked) - stored(db))
    figure = f"{missing} of {len(acked)} acknowledged review traces missing after the restart ({held} not in the store at the SIGKILL)"
    return figure, missing == 0 and len(acked) == 100 and held == len(acked)


def probe(port: int, review: bool, padding: int = 0, sender: int = 0) -> Callable[[], list[str]]:
    """One raw gRPC Export per call, no retry (a refusal is seen at once): a trace of its own whose write timed out
    (``review``: one review item) or a read, with an attribute of ``padding`` bytes; the trace id in a list if
    acknowledged, else an empty list. ``sender``: a number of its own per concurrent sender (in the trace ids)."""
    channel, stub = trace_stub(f"127.0.0.1:{port}")
    count = [0]

    def send() -> list[str]:
        count[0] += 1
        trace = ((0xC0FFEE + sender) << 96 | count[0]).to_bytes(16, "big")
        span = raw_tool_span(trace, count[0].to_bytes(8, "big"), "payments.charge", effect="write" if review else "read", status="timeout" if review else "ok", padding="x" * padding)
        try:
            stub.Export(raw_request(span), timeout=5)
        except grpc.RpcError:
            return []
        return [trace.hex()]

    send.channel = channel  # type: ignore[attr-defined]
    return send


def taken_again(send: Callable[[], list[str]], timeout: float = 30) -> tuple[list[str], float | None]:
    """Probe with ``send`` until an Export is acknowledged: its trace ids and the seconds it took (None: never)."""
    back, again = time.monotonic(), []
    while time.monotonic() - back < timeout:
        again = send()
        if again:
            return again, time.monotonic() - back
        time.sleep(0.02)
    return [], None


def full_volume_figure(lost: int, acked: int, refused: int, after: float | None) -> tuple[str, bool]:
    when = f"taken again {after:.2f} s after the space returned" if after is not None else "never taken again (30 s)"
    return f"{lost} of {acked} acknowledged missing; {'refused when full' if refused else 'never refused'}; {when}", lost == 0 and after is not None and after <= 1.0


def review_volume(mib: int) -> Callable[[Target, Path, contextlib.ExitStack], tuple[str, bool]]:
    def check(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
        """Item 2: the review DB on a full tmpfs of ``mib`` MiB, the persistent queue on (elsewhere), max_traces 10:
        review traces sent by 4 clients at once until each is refused (at most 200 in all), the space freed: seconds
        until an Export is taken again (probed every 20 ms), acknowledged items missing from the store 30 s later
        (and, if any, after a restart)."""
        volume = tmpfs(stack, work / "vol", mib)
        db, up = volume / "review.db", upstream(stack)
        args = ("--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up.port}", "--review-db", str(db), "--decision-wait-ms", "0", "--persistent-queue-dir", str(work / "queue"))
        env = {"OTEL_TRACEFENCE_MAX_TRACES": "10", "OTEL_TRACEFENCE_SERVICE__RETRY_DELAY_S": "1", "OTEL_TRACEFENCE_REVIEW_DB_MIN_FREE_BYTES": ROOM}
        proc = t.serve(stack, *args, cwd=work, **env)
        senders = [probe(t.listening(proc)["port"], review=True, sender=n) for n in range(4)]
        for send in senders:
            stack.callback(send.channel.close)  # type: ignore[attr-defined]
        filler = fill(volume)
        acked: list[str] = []
        refusals = [0]

        def until_refused(send: Callable[[], list[str]]) -> None:  # 4 clients at once, each until refused
            while len(acked) < 200:
                got = send()
                acked.extend(got)
                if not got:
                    refusals[0] += 1
                    return

        threads = [threading.Thread(target=until_refused, args=(send,)) for send in senders]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        refused = refusals[0]
        filler.unlink()
        again, after = taken_again(senders[0])
        settle(lambda: set(acked + again) <= stored(db), 30)
        missing = len(set(acked + again) - stored(db))
        figure, passed = full_volume_figure(missing, len(acked + again), refused, after)
        if missing:  # written at the next start? (their spans stay in the persistent queue: DECISIONS 510)
            killed(proc)
            t.serve(stack, *args, cwd=work, **env)
            settle(lambda: set(acked + again) <= stored(db), 30)
            figure += f"; after a restart {len(set(acked + again) - stored(db))} missing"
        return figure, passed

    return check


def queue_volume(mib: int) -> Callable[[Target, Path, contextlib.ExitStack], tuple[str, bool]]:
    def check(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
        """Item 4: the persistent queue on a tmpfs of ``mib`` MiB: 40 traces forwarded, the volume filled, traces
        sent until refused (at most 200), the space freed: seconds until an Export is taken again, and acknowledged
        traces that never reached the upstream."""
        volume = tmpfs(stack, work / "vol", mib)
        up = upstream(stack)
        proc = t.serve(
            stack, "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up.port}", "--review-db", str(work / "review.db"),
            "--decision-wait-ms", "0", "--persistent-queue-dir", str(volume), cwd=work, OTEL_TRACEFENCE_SERVICE__RETRY_DELAY_S="1",
        )  # fmt: skip
        send = probe(t.listening(proc)["port"], review=False)
        stack.callback(send.channel.close)  # type: ignore[attr-defined]
        acked = [trace for _ in range(40) for trace in send()]
        settle(lambda: {r.trace_id for r in up.spans()} >= set(acked), 30)
        filler = fill(volume)
        refused = 0
        while len(acked) < 240 and not refused:
            got = send()
            acked += got
            refused += not got
        filler.unlink()
        again, after = taken_again(send)
        settle(lambda: {r.trace_id for r in up.spans()} >= set(acked + again), 30)
        return full_volume_figure(len(set(acked + again) - {r.trace_id for r in up.spans()}), len(acked + again), refused, after)

    return check


def queue_self_fill(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Item 4 as the chaos run found it: the persistent queue alone on a 4 MiB tmpfs, the upstream down, traces of
    8 KB sent until the queue's own files fill the volume and Export is refused; then the upstream up: seconds until
    an Export is taken again, and acknowledged traces that never reached the upstream."""
    volume = tmpfs(stack, work / "vol", 4)
    up = RecordingUpstream()
    port = free_port()
    proc = t.serve(
        stack, "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{port}", "--review-db", str(work / "review.db"),
        "--decision-wait-ms", "0", "--persistent-queue-dir", str(volume), cwd=work, OTEL_TRACEFENCE_SERVICE__RETRY_DELAY_S="1",
    )  # fmt: skip
    send = probe(t.listening(proc)["port"], review=False, padding=8192)
    stack.callback(send.channel.close)  # type: ignore[attr-defined]
    acked: list[str] = []
    refused = 0
    while len(acked) < 2000 and not refused:
        got = send()
        acked += got
        refused += not got
    up.start(port)
    stack.callback(up.stop)
    again, after = taken_again(send, timeout=60)
    settle(lambda: {r.trace_id for r in up.spans()} >= set(acked + again), 60)
    lost = len(set(acked + again) - {r.trace_id for r in up.spans()})
    when = f"taken again {after:.2f} s after the upstream returned" if after is not None else "never taken again (60 s)"
    return f"{lost} of {len(acked + again)} acknowledged missing; {'refused when full' if refused else 'never refused'}; {when}", lost == 0 and after is not None


def idle_connections(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Item 3: 1,100 idle connections to the OTLP/HTTP port at RLIMIT_NOFILE 1,024 (bench/http_connection_flood.py)."""
    try:
        f = http_connection_flood.flood(t.command, command_env(t.command), limit=1024, idle=1100, hold_s=12.0)
    except RuntimeError as exc:
        raise NotApplicable(str(exc)[:80]) from exc
    canaries = {k: f[k][0] for k in ("grpc", "http", "grpc_later", "http_later")}
    shown = ", ".join(f"{k} {v}" for k, v in canaries.items())
    ok = set(canaries.values()) == {"SUCCESS"} and f["alive"] and f["log_lines"] < 100
    return f"{f['opened']} held; canaries: {shown}; log {f['log_lines']} lines, {f['log_bytes'] / MIB:.1f} MiB", ok


def json_body(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Item 5: one 600,000-span OTLP/JSON body (51.6 MB) to OTLP/HTTP: its answer, time, the service's peak memory."""
    got = json_span_bound.refuse(t.command, command_env(t.command), 600_000)
    peak = got["after"]["VmHWM"]
    return f"{got['status']} in {got['seconds']:.2f} s, peak {peak} MiB ({got['megabytes']:.1f} MB body)", got["status"] == 413 and peak < 400


def marker_label(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Item 6: malformed tracefence.status / tracefence.effect values of 1 MiB starting with a marker: where the
    marker is found (the review DB, its -wal and -shm, the service's log, the review API's answers)."""
    value = MARKER + "x" * (MIB - len(MARKER))
    db, up = work / "review.db", upstream(stack)
    proc = t.serve(stack, "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up.port}", "--review-db", str(db), "--decision-wait-ms", "0", cwd=work)
    listening = t.listening(proc)
    trace = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
    request = raw_request(
        raw_tool_span(trace, b"\x11" * 8, "payments.charge", effect="write", status=value),
        raw_tool_span(trace, b"\x22" * 8, "payments.refund", effect=value, status="ok"),
    )
    channel, stub = trace_stub(f"127.0.0.1:{listening['port']}", options=[("grpc.max_send_message_length", -1)])
    with channel:
        stub.Export(request, timeout=30)
    settle(lambda: trace.hex() in stored(db), 30)
    found = []
    with grpc.insecure_channel(f"127.0.0.1:{listening['review_port']}", options=[("grpc.max_receive_message_length", -1)]) as review_channel:
        review = pb_grpc.ReviewServiceStub(review_channel)
        answers = [review.ListReviewItems(pb.ListReviewItemsRequest(), timeout=10), review.GetReviewItem(pb.GetReviewItemRequest(trace_id=trace.hex()), timeout=10)]
    if any(MARKER.encode() in answer.SerializeToString() for answer in answers):
        found.append("API")
    time.sleep(1.0)  # the log lines of the write
    if MARKER in proc.stderr():
        found.append("log")
    proc.stop()  # SIGKILL: the -wal and -shm stay as they are
    for path in sorted(work.glob("review.db*")):
        if MARKER.encode() in path.read_bytes():
            found.append(path.name.replace("review.db", "DB") or "DB")
    written = trace.hex() in stored(db)
    return f"item {'written' if written else 'NOT written'}; marker found in: {', '.join(found) or 'nowhere (DB, -wal, -shm, log, API)'}", written and not found


def processor_read_only(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Item 7: the span processor built on a review DB path on a read-only mount (EROFS); the mount made writable,
    the held item written?"""
    folder = mount(stack, work / "ro", "-t", "tmpfs", "-o", "size=16m,ro", "tmpfs")
    db = folder / "review.db"
    child = subprocess.Popen(
        [str(t.python), str(HERE / "chaos_sdk.py"), "read-only-db", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, cwd=work, env=command_env(t.command),
    )  # fmt: skip
    stack.callback(lambda: child.poll() is None and (child.kill(), child.wait()))
    assert child.stdout is not None and child.stdin is not None
    first = json.loads(child.stdout.readline() or '{"started": false, "error": "no answer"}')
    if not first["started"]:
        return f"the processor did not start: {first['error']}", False
    subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
    child.stdin.write("go\n")
    child.stdin.flush()
    child.wait(timeout=60)
    written = db.exists() and first["trace_id"] in stored(db)
    return f"started; {first['spans']} spans handed on as {'/'.join(first['classes'])}; item {'written' if written else 'NOT written'} once writable", written


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """``path`` read-only for this process and its children: a read-only bind mount for root, chmod otherwise."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        yield
        return
    with contextlib.ExitStack() as stack:
        mount(stack, path, "--bind", str(path))
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        yield


def read_only_shm(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Item 8: a read-only -shm file beside the review DB: how serve ends (exit code, log lines), with review traces
    sent if it starts."""
    db, up = work / "review.db", upstream(stack)
    args = ("--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up.port}", "--review-db", str(db), "--decision-wait-ms", "0")
    with contextlib.ExitStack() as first:
        killed(t.serve(first, *args, cwd=work))
    shm = Path(f"{db}-shm")
    shm.write_bytes(b"\0" * 32768)  # as a crashed writer leaves it
    with read_only_file(shm):
        started = time.monotonic()
        proc = ServeProcess(*args, cwd=work, command=t.command)
        stack.callback(proc.stop)
        settle(lambda: proc.proc.poll() is not None or "tracefence serve listening" in proc.stderr(), 30)
        listened = proc.proc.poll() is None
        if listened:
            sender = client(stack, Client(t.listening(proc)["port"], "billing-agent", batch=True))
            send_review_traces(sender, 3)
            settle(lambda: proc.proc.poll() is not None, 10)
        code = proc.proc.poll()
        proc.stop()
    ended = "still running" if code is None else ("SIGBUS" if code == -signal.SIGBUS else f"exit {code}")
    lines = proc.stderr().splitlines()
    errors = [json.loads(line)["message"][:70] for line in lines if '"level": "ERROR"' in line]
    shown = f"{ended} after {time.monotonic() - started:.1f} s, {'after' if listened else 'before'} listening; {len(lines)} log line(s)"
    shown += f"; {len(errors)} error line(s): {errors[0]}..." if errors else ""
    return shown, code == 2 and not listened and len(lines) == 1


def throttled(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Observation: an upstream answering RESOURCE_EXHAUSTED without RetryInfo to every call; 3,000 spans (each a
    trace) sent in one Export: the service's warning lines until they are all dropped, then a stop (SIGTERM)."""
    up = upstream(stack, ThrottlingUpstream)
    proc = t.serve(stack, "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up.port}", "--review-db", str(work / "r.db"), "--decision-wait-ms", "0", cwd=work)
    spans = [raw_span(bytes.fromhex(f"{n + 1:032x}"), bytes.fromhex(f"{n + 1:016x}")) for n in range(3000)]
    channel, stub = trace_stub(f"127.0.0.1:{t.listening(proc)['port']}")
    with channel:
        stub.Export(raw_request(*spans), timeout=30)
    started = time.monotonic()
    settle(lambda: up.refused >= 3000 and time.monotonic() - started > 5, 120)  # type: ignore[attr-defined]
    proc.proc.send_signal(signal.SIGTERM)
    proc.proc.wait(timeout=60)
    warnings = [e for e in proc.logs() if e.get("level") in ("WARNING", "ERROR", "CRITICAL") or e.get("raw")]
    refused = up.refused  # type: ignore[attr-defined]
    return f"{len(warnings)} warning lines for 3,000 spans dropped ({refused} refused calls, {time.monotonic() - started:.0f} s)", len(warnings) <= 10


def hanging_shutdown(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Observation: the span processor's shutdown(5000) over an exporter hanging 30 s in export and in shutdown."""
    from otel_tracefence.sdk.bounded import MARGIN_S

    child = subprocess.Popen([str(t.python), str(HERE / "chaos_sdk.py"), "hanging-shutdown", "5000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=work, env=command_env(t.command))
    stack.callback(lambda: child.poll() is None and (child.kill(), child.wait()))
    try:
        out, _ = child.communicate(timeout=120)
        took = json.loads(out.splitlines()[-1])["seconds"]
    except subprocess.TimeoutExpired:
        return "shutdown(5000) did not return within 120 s", False
    return f"shutdown(5000) returned in {took:.2f} s (the exporter hangs 30 s)", took <= 5 + MARGIN_S


def gzip_bombs(t: Target, work: Path, stack: contextlib.ExitStack) -> tuple[str, bool]:
    """Observation: 16 gzip bodies of 63 MiB of zeros (64 KiB on the wire) POSTed at once at the default bounds
    (max_message_bytes 64 MiB): the service's peak memory growth, their answers, a gzip export after."""
    proc = t.serve(stack, "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0", "--review-db", str(work / "r.db"), "--output-file", str(work / "out.jsonl"), cwd=work)
    url = f"http://127.0.0.1:{t.listening(proc)['http_port']}/v1/traces"
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    requests.post(url, data=gzip.compress(b""), headers=headers, timeout=30)
    body = gzip.compress(b"\0" * (63 * MIB), compresslevel=9)
    before = peak_mib(proc.proc.pid)
    answers: list[int] = []
    go = threading.Barrier(16)

    def post() -> None:
        go.wait()
        try:
            answers.append(requests.post(url, data=body, headers=headers, timeout=120).status_code)
        except requests.RequestException as exc:
            answers.append(type(exc).__name__)  # type: ignore[arg-type]

    threads = [threading.Thread(target=post) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    grown = peak_mib(proc.proc.pid) - before
    exporter = HttpSpanExporter(endpoint=url, compression=Compression.Gzip, timeout=20)
    canary = exporter.export(canary_spans()).name
    exporter.shutdown()
    statuses = ", ".join(f"{n}x {s}" for s, n in sorted({s: answers.count(s) for s in answers}.items(), key=str))
    return f"peak grew {grown} MiB; answers {statuses}; gzip canary {canary}", grown < 512 and canary == "SUCCESS" and proc.proc.poll() is None


CHECKS: list[tuple[str, Callable[[Target, Path, contextlib.ExitStack], tuple[str, bool]], str]] = [
    ("review-full-sigkill", review_full_sigkill, "0 acknowledged review traces missing"),
    *((f"review-volume-{m}mib", review_volume(m), "0 missing; taken again <= 1 s after space returns") for m in (1, 4, 16)),
    ("idle-connections", idle_connections, "gRPC and HTTP canaries SUCCESS; log < 100 lines"),
    *((f"queue-volume-{m}mib", queue_volume(m), "0 missing; taken again <= 1 s after space returns") for m in (1, 4, 16)),
    ("queue-self-fill-4mib", queue_self_fill, "0 missing; taken again once the upstream is back"),
    ("json-600k-spans", json_body, "refused (413), peak < 400 MiB"),
    ("marker-label", marker_label, "marker in no DB, WAL, log or API answer"),
    ("processor-read-only-db", processor_read_only, "starts; item written once writable"),
    ("read-only-shm", read_only_shm, "exit 2 at start, one log line"),
    ("throttled-upstream", throttled, "logged as a rate: <= 10 lines"),
    ("hanging-shutdown", hanging_shutdown, "returns within 5 s + bounded.MARGIN_S (0.5 s)"),
    ("gzip-bombs-16", gzip_bombs, "peak grows < 512 MiB (2 x the 256 MiB http_inflate_budget_bytes; the issue sets none); canary SUCCESS"),
]


def run(name: str, check: Callable[[Target, Path, contextlib.ExitStack], tuple[str, bool]], bar: str, target: Target) -> Row:
    import tempfile

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"chaos-{name}-") as folder:
        try:
            with contextlib.ExitStack() as stack:
                figure, passed = check(target, Path(folder), stack)
            verdict = "PASS" if passed else "FAIL"
        except Skip as exc:
            figure, verdict = str(exc), "SKIP"
        except NotApplicable as exc:
            figure, verdict = str(exc), "n/a"
        except Exception as exc:  # noqa: BLE001 - one check's failure is its row, the others still run
            figure, verdict = f"{type(exc).__name__}: {str(exc)[:150]}", "ERROR"
    return Row(name, figure, bar, verdict, round(time.monotonic() - started, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tracefence", type=Path, default=ROOT / ".venv" / "bin" / "tracefence", help="the tracefence executable under test")
    parser.add_argument("--python", type=Path, help="the Python of the install under test (default: beside --tracefence)")
    parser.add_argument("--only", default="", help="run the checks whose name starts with this")
    parser.add_argument("--json", action="store_true", help="one JSON object per check instead of the table")
    args = parser.parse_args()
    target = Target(args.tracefence.absolute(), (args.python or args.tracefence.parent / "python").absolute())
    chosen = [c for c in CHECKS if c[0].startswith(args.only)]
    if not chosen:
        parser.error(f"no check starts with {args.only!r}: {', '.join(c[0] for c in CHECKS)}")
    if not args.json:
        print(f"tracefence: {target.tracefence}\n{'check':24} {'verdict':7} {'s':>5}  figure  [bar]", flush=True)
    for name, check, bar in chosen:
        row = run(name, check, bar, target)
        print(json.dumps(asdict(row)) if args.json else f"{row.check:24} {row.verdict:7} {row.seconds:5.0f}  {row.figure}  [{row.bar}]", flush=True)


if __name__ == "__main__":
    main()
