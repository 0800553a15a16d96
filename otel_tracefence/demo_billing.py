"""``make demo``'s billing stand-in: the system that owns the invoices, and the reconciler that asks it.

The stand-in keeps its invoices in a JSON ledger (``out/demo-billing.json``, or ``$TRACEFENCE_DEMO_BILLING``), so
``tracefence reconcile`` in another process reads what the agent's run wrote. It honours idempotency keys (a second
create with a key returns the first invoice), and has a read endpoint, :func:`find_invoices`.

:func:`find_invoice` is the demo's reconciler for ``invoice.create`` (``reconcilers: {invoice.create:
otel_tracefence.demo_billing:find_invoice}``): it looks the invoice up by the held call's idempotency key and never
creates one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from otel_tracefence.reconcile import ReconcileRequest, ReconcileResult, Verdict

LEDGER_ENV = "TRACEFENCE_DEMO_BILLING"


def ledger_path() -> Path:
    """The ledger file: ``$TRACEFENCE_DEMO_BILLING``, else ``out/demo-billing.json`` in the working directory."""
    return Path(os.environ.get(LEDGER_ENV) or Path("out") / "demo-billing.json")


def _invoices() -> list[dict]:
    try:
        return json.loads(ledger_path().read_text(encoding="utf-8"))["invoices"]
    except FileNotFoundError:
        return []


def create_invoice(customer: str, amount_cents: int, idempotency_key: str) -> dict:
    """Create an invoice, or return the one ``idempotency_key`` already made (the key's promise)."""
    invoices = _invoices()
    for invoice in invoices:
        if invoice["idempotency_key"] == idempotency_key:
            return invoice
    invoice = {"invoice": f"in_{customer}_{amount_cents}", "customer": customer, "amount_cents": amount_cents, "idempotency_key": idempotency_key}
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"invoices": [*invoices, invoice]}, indent=1), encoding="utf-8")
    return invoice


def find_invoices(idempotency_key: str) -> list[dict]:
    """The read endpoint: the invoices made with ``idempotency_key``."""
    return [invoice for invoice in _invoices() if invoice["idempotency_key"] == idempotency_key]


def find_invoice(request: ReconcileRequest) -> ReconcileResult:
    """The reconciler of ``invoice.create``: did the held call's invoice get made? By its idempotency key:
    none (``absent``), one (``found_once``), more (``found_twice``); a call without a key cannot be looked up
    (``undetermined``)."""
    if not request.idempotency_key:
        return ReconcileResult(Verdict.UNDETERMINED, "the call has no idempotency key to look the invoice up by")
    found = find_invoices(request.idempotency_key)
    if not found:
        return ReconcileResult(Verdict.ABSENT, f"billing has no invoice with key {request.idempotency_key}")
    names = ", ".join(invoice["invoice"] for invoice in found)
    if len(found) == 1:
        return ReconcileResult(Verdict.FOUND_ONCE, f"billing has invoice {names} with key {request.idempotency_key}")
    return ReconcileResult(Verdict.FOUND_TWICE, f"billing has {len(found)} invoices with key {request.idempotency_key}: {names}")
