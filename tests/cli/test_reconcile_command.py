"""``tracefence reconcile`` as a user runs it (issue 25 section 2): its own process, a reconciler named in a config
file, a real review database; what it prints, what it records, and how it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import open_review_store
from service_helpers import ROOT, tracefence

from reconcile.test_runner import OTHER, TRACE, held

CHECKS = str(ROOT / "tests" / "programs")


def _setup(tmp_path: Path, ledger: dict, reconcilers: dict | None = None) -> tuple[Path, Path, dict]:
    db = tmp_path / "review.db"
    with open_review_store(db) as store:
        store.upsert(held(TRACE, ("call_1", "invoice.create", "inv-9")), service_name="billing")
        store.upsert(held(OTHER, ("call_7", "ticket.update", "tk-7")), service_name="billing")
    (tmp_path / "ledger.json").write_text(json.dumps(ledger))
    config = tmp_path / "tracefence.yaml"
    lines = "".join(f"  {tool}: {ref}\n" for tool, ref in (reconcilers or {"invoice.create": "billing_checks:find_invoice"}).items())
    config.write_text(f"reconcilers:\n{lines}reconcile_timeout_s: 1\n")
    return db, config, {"PYTHONPATH": f"{ROOT}:{CHECKS}", "BILLING_LEDGER": str(tmp_path / "ledger.json")}


def test_it_resolves_the_item_whose_invoice_billing_has_and_names_the_one_it_cannot_ask(tmp_path):
    db, config, env = _setup(tmp_path, {"inv-9": 1})
    proc = tracefence("reconcile", "--db", str(db), "--config", str(config), **env)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == (
        f"reconcile {db}: 2 open item(s), 1 with a reconciler\n"
        f"  {OTHER}  left open     no reconciler for ticket.update\n"
        f"  {TRACE}  resolved      found_once   by billing_checks:find_invoice\n"
        "      call_1 invoice.create: found_once: invoice in_1 with key inv-9\n"
    )
    with open_review_store(db) as store:
        item = store.get(TRACE)
        assert (item.state, item.resolved_by, item.verdict, item.verdict_evidence) == (
            pb.REVIEW_STATE_RESOLVED, "billing_checks:find_invoice", pb.VERDICT_FOUND_ONCE, "invoice in_1 with key inv-9",
        )  # fmt: skip
        assert store.get(OTHER).state == pb.REVIEW_STATE_OPEN


def test_a_dry_run_prints_json_and_records_nothing_and_trace_picks_one_item(tmp_path):
    db, config, env = _setup(tmp_path, {"inv-9": 2})
    proc = tracefence("reconcile", "--db", str(db), "--config", str(config), "--dry-run", "--format", "json", "--trace", TRACE[:8], **env)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [{
        "trace_id": TRACE, "action": "would_record", "verdict": "found_twice", "actor": "billing_checks:find_invoice",
        "evidence": "2 invoices with key inv-9", "error": "",
        "calls": [{"call_id": "call_1", "tool": "invoice.create", "reconciler": "billing_checks:find_invoice", "verdict": "found_twice", "evidence": "2 invoices with key inv-9"}],
    }]  # fmt: skip
    with open_review_store(db) as store:
        assert [e.kind for e in store.history(TRACE)] == ["plan_written"]


@pytest.mark.parametrize(
    "reference, message",
    [
        ("billing_checks:nothing_here", "  tool 'invoice.create' (config): 'billing_checks:nothing_here': 'billing_checks' has no attribute 'nothing_here'"),
        ("gone_module:find", "  tool 'invoice.create' (config): 'gone_module:find': module 'gone_module' does not import (ModuleNotFoundError: No module named 'gone_module')"),
    ],
)
def test_a_reconciler_that_does_not_load_stops_it_before_anything_is_asked(tmp_path, reference, message):
    db, config, env = _setup(tmp_path, {"inv-9": 1}, {"invoice.create": reference})
    proc = tracefence("reconcile", "--db", str(db), "--config", str(config), **env)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"tracefence reconcile: reconcilers that cannot be loaded:\n{message}\n"
    with open_review_store(db) as store:
        assert store.get(TRACE).state == pb.REVIEW_STATE_OPEN


def test_a_failing_reconciler_leaves_the_item_open_with_the_error_as_evidence(tmp_path):
    db, config, env = _setup(tmp_path, {}, {"invoice.create": "billing_checks:raises"})
    proc = tracefence("reconcile", "--db", str(db), "--config", str(config), **env)
    assert proc.returncode == 0
    assert f"  {TRACE}  kept open     undetermined by billing_checks:raises\n      call_1 invoice.create: undetermined: billing_checks:raises raised ConnectionError: billing API unreachable\n" in proc.stdout
    assert "WARNING otel_tracefence.reconcile.runner: reconciler billing_checks:raises (tool invoice.create): billing_checks:raises raised ConnectionError: billing API unreachable; the item stays open" in proc.stderr


def test_without_a_reconciler_or_a_database_it_says_what_to_give(tmp_path):
    proc = tracefence("reconcile", "--db", str(tmp_path / "review.db"))
    assert (proc.returncode, proc.stderr) == (2, "tracefence reconcile: no reconciler is registered: name one per tool in the config (reconcilers: {invoice.create: billing_checks:find_invoice}) or install one under the tracefence.reconcilers entry points\n")
    proc = tracefence("reconcile", "--db", str(tmp_path / "missing.db"), OTEL_TRACEFENCE_RECONCILERS='{"invoice.create": "billing_checks:find_invoice"}', PYTHONPATH=f"{ROOT}:{CHECKS}")
    assert (proc.returncode, proc.stderr) == (2, f"tracefence reconcile: {tmp_path / 'missing.db'}: no review database there (give --db PATH)\n")


def test_the_evidence_it_prints_has_its_control_characters_escaped_and_is_cut(tmp_path):
    db, config, env = _setup(tmp_path, {}, {"invoice.create": "billing_checks:shouts"})
    proc = tracefence("reconcile", "--db", str(db), "--config", str(config), **env)
    assert proc.returncode == 0
    line = next(line for line in proc.stdout.splitlines() if line.startswith("      call_1 "))
    assert line == "      call_1 invoice.create: undetermined: x\\u000a\\u001b[31mred\\u001b[0m" + "y" * (499 - len("x\n\x1b[31mred\x1b[0m")) + "…"
