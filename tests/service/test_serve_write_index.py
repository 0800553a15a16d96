"""The write index of ``tracefence serve`` kept in its review database (issue 25 section 1, docs/DECISIONS.md 720-729).

The issue's three traces, each its own Export call from the SDK's OTLP exporter: t-1 ``invoice.create`` timed
out (key ``inv-9``); t-2 the same call committed; t-3 key ``inv-9`` with another amount. Through one serve with
a SQLite review database, and through two serve replicas sharing one PostgreSQL database (one gets t-1, the
other t-2 and t-3). A resolved item is no retry target; an index that fails plans the trace alone, flagged.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Iterator

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import open_review_store
from service_helpers import Client, ServeProcess, tracefence, wait_for


def _invoice(client: Client, amount: int, *, timed_out: bool = False) -> str:
    """One trace: an ``invoice.create`` write with key ``inv-9``. Returns its trace id (hex)."""
    try:
        with client.tool("invoice.create", effect="write", idempotency_key="inv-9", arguments={"customer": "c-1", "amount_cents": amount},
                         record_result=not timed_out, call_id="call-inv") as call:  # fmt: skip
            if timed_out:
                raise TimeoutError("billing did not answer")
            call.set_result({"invoice": "in_1"})
    except TimeoutError:
        pass
    spans = client.sent.get_finished_spans()
    return format(spans[-1].context.trace_id, "032x")


def _serve(tmp_path: Path, db: str, n: int = 0, *extra: str) -> ServeProcess:
    return ServeProcess(
        "--endpoint", "127.0.0.1:0", "--review-db", db, "--output-file", str(tmp_path / f"out-{n}.jsonl"), "--decision-wait-ms", "50", *extra,
        cwd=tmp_path,
    )  # fmt: skip


def _step(store, trace_id: str) -> tuple:
    item = wait_for(lambda: store.get(trace_id), timeout=30, what=f"the review item of {trace_id}")
    (step,) = item.plan.steps
    return pb.Decision.Name(step.decision), list(step.reasons), [(r.trace_id, r.call_id, r.reason) for r in step.related_traces]


def _three_traces(clients: list[Client], db: str) -> None:
    with open_review_store(db, create=False) as store:
        t1 = _invoice(clients[0], 1200, timed_out=True)
        assert _step(store, t1) == ("DECISION_REVIEW", ["write_timeout"], [])
        t2 = _invoice(clients[-1], 1200)
        assert _step(store, t2) == ("DECISION_REVIEW", ["retry_of_held_write"], [(t1, "call-inv", "retry_of_held_write")])
        t3 = _invoice(clients[-1], 990)
        assert _step(store, t3) == (
            "DECISION_CONFLICT",
            ["idempotency_key_reused_across_traces"],
            [(t1, "call-inv", "idempotency_key_reused_across_traces"), (t2, "call-inv", "idempotency_key_reused_across_traces")],
        )


@contextlib.contextmanager
def _serving(tmp_path: Path, db: str) -> Iterator[Client]:
    """One ``serve`` on the review database ``db``, and an OTLP client of it; both stopped after."""
    serve = _serve(tmp_path, db)
    client = None
    try:
        client = Client(serve.log("tracefence serve listening")["port"], "billing-agent")
        yield client
    finally:
        if client is not None:
            client.shutdown()
        serve.stop()


def test_three_requests_through_one_serve_name_the_earlier_traces(tmp_path: Path):
    db = str(tmp_path / "review.db")
    with _serving(tmp_path, db) as client:
        _three_traces([client], db)
        assert sqlite3.connect(db).execute("SELECT count(*) FROM tracefence_write_index").fetchone() == (3,)


def test_two_replicas_sharing_one_postgres_meet_each_others_writes(tmp_path: Path, pg_url: str):
    replicas = [_serve(tmp_path, pg_url, n) for n in range(2)]
    clients: list[Client] = []
    try:
        clients = [Client(serve.log("tracefence serve listening")["port"], "billing-agent") for serve in replicas]
        _three_traces(clients, pg_url)
    finally:
        for client in clients:
            client.shutdown()
        for serve in replicas:
            serve.stop()


def test_a_resolved_item_is_no_retry_target_for_a_later_trace(tmp_path: Path):
    db = str(tmp_path / "review.db")
    with _serving(tmp_path, db) as client:
        with open_review_store(db, create=False) as store:
            t1 = _invoice(client, 1200, timed_out=True)
            _step(store, t1)
            resolved = tracefence("review", "--db", db, "resolve", t1, "--by", "ada", "--note", "billing says it was never made")
            assert resolved.returncode == 0, resolved.stderr
            t2 = _invoice(client, 1200)
            wait_for(lambda: (tmp_path / "out-0.jsonl").exists() and t2 in (tmp_path / "out-0.jsonl").read_text(), timeout=30, what="t-2 forwarded")
            assert store.get(t2) is None  # skip: committed, nothing to review
