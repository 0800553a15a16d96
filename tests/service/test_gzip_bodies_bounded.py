"""Issue 30 (observation): gzip bombs sent at once stay within one bound on the decompressed bytes held, all requests
together (``service.http_inflate_budget_bytes``); past it a body is refused with ``503``, ``Retry-After`` and
``RetryInfo``, and a real client's gzip export still gets through.

``tracefence serve`` as a real subprocess; its peak memory read from ``/proc/<pid>/status`` (``VmHWM``).
"""

from __future__ import annotations

import gzip
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.service.export import ExportRefused
from otel_tracefence.service.auth import BearerToken
from otel_tracefence.service.otlp_http import InflateBudget, OtlpHttpReceiver, gunzip
from otel_tracefence.service.server import TraceFenceService
from service_helpers import RecordingUpstream, ServeProcess, canary_spans, service_config

MIB = 1 << 20
MAX_MESSAGE = 32 * MIB
BOMBS = 16


def bomb(size: int) -> bytes:
    """``size`` zero bytes gzipped: about 1/1000 of it on the wire (not protobuf: its reader refuses it at the first
    byte, so what the process holds is the decompression's)."""
    return gzip.compress(b"\0" * size, compresslevel=9)


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _refused(body: bytes, budget: InflateBudget) -> int:
    """Decompress ``body`` in ``budget`` expecting the refusal; the bytes it had counted when refused."""
    taken = [0]
    try:
        gunzip(body, 8 * MIB, budget, taken)
    except Exception as exc:  # noqa: BLE001 - the budget's refusal
        assert type(exc).__name__ == "_Busy"
    else:
        raise AssertionError("the body fit in a spent budget")
    return taken[0]


def test_the_budget_counts_each_step_and_the_joined_copy_and_refuses_past_it() -> None:
    budget = InflateBudget(5 * MIB)
    body = gzip.compress(b"\0" * (2 * MIB + 5))
    taken = [0]
    assert gunzip(body, 8 * MIB, budget, taken) == b"\0" * (2 * MIB + 5)  # parts and their copy: 4 MiB at the join
    assert taken == [2 * MIB + 5] and budget.held == 2 * MIB + 5  # the body, held until the caller gives it back
    assert _refused(body, budget) == 2 * MIB + 5  # its parts fit (4 MiB held), not their joined copy too
    budget.limit = 3 * MIB
    assert _refused(body, budget) == 0  # not even its first step: nothing decompressed
    budget.give(taken[0] + 2 * MIB + 5)
    assert budget.held == 0
    assert gunzip(gzip.compress(b"a") + gzip.compress(b"b"), 10) == b"ab"  # members, unbudgeted as before


def test_gzip_bombs_at_once_stay_within_the_decompression_budget_and_a_real_export_gets_through(tmp_path: Path) -> None:
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
        "--review-db", str(tmp_path / "r.db"), "--output-file", str(tmp_path / "out.jsonl"),
        cwd=tmp_path,
        OTEL_TRACEFENCE_SERVICE__MAX_MESSAGE_BYTES=str(MAX_MESSAGE),
        OTEL_TRACEFENCE_SERVICE__HTTP_INFLATE_BUDGET_BYTES=str(2 * MAX_MESSAGE),  # the least it can be
    )  # fmt: skip
    try:
        http_port = serve.log("tracefence serve listening")["http_port"]
        url = f"http://127.0.0.1:{http_port}/v1/traces"
        body = bomb(MAX_MESSAGE - MIB)
        assert len(body) < MIB
        requests.post(url, data=gzip.compress(b""), headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, timeout=30)
        before = peak_rss_bytes(serve.proc.pid)
        answers: list[requests.Response] = []
        go = threading.Barrier(BOMBS)

        def send() -> None:
            go.wait()
            answers.append(requests.post(url, data=body, headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, timeout=60))

        threads = [threading.Thread(target=send) for _ in range(BOMBS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
        grown = peak_rss_bytes(serve.proc.pid) - before
        statuses = sorted(answer.status_code for answer in answers)
        print(f"peak grew {grown / MIB:.0f} MiB for {BOMBS} bombs of {len(body)} bytes ({MAX_MESSAGE - MIB} decompressed); statuses {statuses}")
        assert len(answers) == BOMBS and set(statuses) <= {400, 503}
        busy = [answer for answer in answers if answer.status_code == 503]
        assert busy, statuses  # refused for now, not decompressed further
        for answer in busy:
            assert answer.headers["retry-after"] == "1"
            status = status_pb2.Status.FromString(answer.content)
            assert status.code == code_pb2.UNAVAILABLE and "the gzip bodies being decompressed hold" in status.message
            assert "(service.http_inflate_budget_bytes = 67108864); retry later" in status.message
            assert status.details[0].Is(error_details_pb2.RetryInfo.DESCRIPTOR)
        assert grown < 2 * 2 * MAX_MESSAGE, f"{grown / MIB:.0f} MiB"  # twice the budget; 249 MiB before the refusals let go of the bytes
        exporter = HttpSpanExporter(endpoint=url, compression=Compression.Gzip, timeout=20)
        assert exporter.export(canary_spans()) == SpanExportResult.SUCCESS
        exporter.shutdown()
        assert serve.proc.poll() is None
    finally:
        serve.stop()


def _frames(exc: BaseException) -> list[Any]:
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def test_a_refused_body_leaves_nothing_holding_its_bytes(tmp_path: Path, upstream: RecordingUpstream) -> None:
    """The budget is given back as soon as a body is refused, so nothing the refusal carries may still hold the
    decompressed bytes: a raised exception can outlive the request in a reference cycle (an asyncio future's) until
    the cyclic collector runs, with every frame of its traceback (the 16 bombs of the chaos run: 866 MiB at the
    default budget of 256 MiB, 277 MiB once dropped). The gzip parts of a body refused midway are dropped at once;
    the refusal carries no frame below the receiver's nor the exception it replaced, and the body is gone from it."""
    budget = InflateBudget(3 * MIB)
    try:
        gunzip(bomb(8 * MIB), 16 * MIB, budget, [0])
    except Exception as exc:  # noqa: BLE001 - the budget's refusal, looked at below
        busy = exc
    assert type(busy).__name__ == "_Busy"
    assert [f.f_code.co_name for f in _frames(busy)][-1] == "gunzip" and _frames(busy)[-1].f_locals["out"] == []
    service = TraceFenceService(service_config(upstream, tmp_path / "r.db"))
    service.start()
    try:
        receiver = OtlpHttpReceiver(service._export("http"), token=BearerToken(), max_body_bytes=16 * MIB, max_workers=1)
        refusals = []
        for taken_by_others in (0, 60 * MIB):  # not protobuf (400), then a budget spent elsewhere (503)
            receiver._inflating.take(taken_by_others)
            with pytest.raises(ExportRefused) as refused:
                receiver._export_body(bomb(15 * MIB), True, "application/x-protobuf", "test")
            receiver._inflating.give(taken_by_others)
            refusals.append(refused.value)
        assert [r.kind.name for r in refusals] == ["UNDECODABLE", "RETRY_LATER"]
        for refusal in refusals:
            assert refusal.__context__ is None
            assert [(f.f_code.co_name, f.f_locals["body"]) for f in _frames(refusal)[1:]] == [("_export_body", b"")]  # below this test's own
        assert receiver._inflating.held == 0
    finally:
        service.stop(0)
