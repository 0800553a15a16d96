"""Reconcilers for the tests (loaded by reference, ``billing_checks:find_invoice``, in the CLI's and serve's own
processes): ``find_invoice`` asks a ledger file (``$BILLING_LEDGER``: JSON, idempotency key -> number of invoices
made with it; a key it does not list cannot be told); the others fail as the issue's failure modes do."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from otel_tracefence.reconcile import ReconcileRequest, ReconcileResult, Verdict


def find_invoice(request: ReconcileRequest) -> ReconcileResult:
    ledger = json.loads(Path(os.environ["BILLING_LEDGER"]).read_text(encoding="utf-8"))
    count = ledger.get(request.idempotency_key or "")
    if count is None:
        return ReconcileResult(Verdict.UNDETERMINED, f"billing does not know key {request.idempotency_key}")
    if count == 0:
        return ReconcileResult(Verdict.ABSENT, f"no invoice with key {request.idempotency_key}")
    if count == 1:
        return ReconcileResult(Verdict.FOUND_ONCE, f"invoice in_1 with key {request.idempotency_key}")
    return ReconcileResult(Verdict.FOUND_TWICE, f"{count} invoices with key {request.idempotency_key}")


def raises(request: ReconcileRequest) -> ReconcileResult:
    raise ConnectionError("billing API unreachable")


def hangs(request: ReconcileRequest) -> ReconcileResult:
    time.sleep(30)
    raise AssertionError("never reached in a test")


def returns_a_string(request: ReconcileRequest) -> object:
    return "found it"


def shouts(request: ReconcileRequest) -> ReconcileResult:
    return ReconcileResult(Verdict.UNDETERMINED, "x\n\x1b[31mred\x1b[0m" + "y" * 100_000)


NOT_A_FUNCTION = 42
