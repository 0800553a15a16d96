"""``tracefence serve`` reconciling in the background (``service.reconcile_interval_s``, issue 25 section 2): a real
service process, a timed-out write from the SDK's OTLP exporter, the operator's reconciler asked of a ledger file;
with ``--workers 2`` the router alone asks; a reconciler that does not load stops the start."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from opentelemetry import trace

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import open_review_store
from service_helpers import ROOT, Client, RecordingUpstream, ServeProcess, fatal, router_log, timed_out_write, wait_for


def _config(tmp_path: Path, reference: str = "billing_checks:find_invoice") -> Path:
    config = tmp_path / "tracefence.yaml"
    config.write_text(f"reconcilers:\n  invoice.create: {reference}\nreconcile_timeout_s: 2\nservice:\n  reconcile_interval_s: 0.2\n")
    return config


def _serve(tmp_path: Path, up_port: int, *flags: str, ledger: dict | None = None) -> ServeProcess:
    (tmp_path / "ledger.json").write_text(json.dumps(ledger or {}))
    return ServeProcess(
        "--config", str(_config(tmp_path)), "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{up_port}",
        "--review-db", str(tmp_path / "review.db"), "--decision-wait-ms", "0", *flags,
        cwd=tmp_path, PYTHONPATH=f"{ROOT}:{ROOT / 'tests' / 'programs'}", BILLING_LEDGER=str(tmp_path / "ledger.json"),
    )  # fmt: skip


def _timed_out_invoice(client: Client, key: str) -> str:
    root = client.tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
    with trace.use_span(root, end_on_exit=True):
        timed_out_write(client, "invoice.create", key, amount_cents=990)
    return format(root.get_span_context().trace_id, "032x")


def _item(db: Path, trace_id: str):
    with open_review_store(db, create=False) as store:
        return store.get(trace_id)


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_resolves_a_held_write_the_owning_system_has_and_keeps_an_unknown_one_open(tmp_path, workers):
    up = RecordingUpstream()
    serve = _serve(tmp_path, up.start(), "--workers", str(workers), ledger={"inv-globex-990": 1})
    client = None
    try:
        reconciling = router_log(serve, "reconciling")
        assert (reconciling["interval_s"], reconciling["reconcilers"]) == (0.2, {"invoice.create": "billing_checks:find_invoice"})
        client = Client(router_log(serve, "tracefence serve listening")["port"], "billing-agent")
        found, unknown = _timed_out_invoice(client, "inv-globex-990"), _timed_out_invoice(client, "inv-other")
        db = tmp_path / "review.db"
        item = wait_for(lambda: (i := _item(db, found)) is not None and i.state == pb.REVIEW_STATE_RESOLVED and i, timeout=30, what="the item resolved")
        assert (item.resolved_by, item.verdict, item.verdict_evidence) == ("billing_checks:find_invoice", pb.VERDICT_FOUND_ONCE, "invoice in_1 with key inv-globex-990")
        other = wait_for(lambda: (i := _item(db, unknown)) is not None and i.verdict and i, timeout=30, what="the other item's verdict")
        assert (other.state, other.verdict, other.verdict_evidence) == (pb.REVIEW_STATE_OPEN, pb.VERDICT_UNDETERMINED, "billing does not know key inv-other")
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0
        assert [e for e in serve.logs() if e.get("message") == "reconciling" and "tracefence.worker" in e] == []  # the router alone asks
        with open_review_store(db, create=False) as store:
            assert [(e.kind, e.actor) for e in store.history(found)] == [("plan_written", "billing-agent"), ("resolved", "billing_checks:find_invoice")]
            assert [e.kind for e in store.history(unknown)] == ["plan_written", "verdict"]  # asked again meanwhile: the same answer, not written twice
    finally:
        if client is not None:
            client.shutdown()
        serve.stop()
        up.stop()


def test_a_reconciler_that_does_not_load_stops_serve_at_start(tmp_path):
    (tmp_path / "ledger.json").write_text("{}")
    serve = ServeProcess(
        "--config", str(_config(tmp_path, "billing_checks:no_such_check")), "--endpoint", "127.0.0.1:0", "--review-db", str(tmp_path / "review.db"),
        cwd=tmp_path, PYTHONPATH=f"{ROOT}:{ROOT / 'tests' / 'programs'}",
    )  # fmt: skip
    try:
        assert serve.proc.wait(timeout=30) == 2
    finally:
        serve.stop()
    assert fatal(serve.stderr().splitlines()[-1]) == (
        "tracefence serve: cannot start: reconcilers that cannot be loaded:\n"
        "  tool 'invoice.create' (config): 'billing_checks:no_such_check': 'billing_checks' has no attribute 'no_such_check'"
    )
