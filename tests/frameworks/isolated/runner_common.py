"""What every Python framework runner under ``tests/frameworks/isolated/<framework>/runner.py`` shares.

This module runs INSIDE the framework's own environment (made by ``envs.py``), where otel-tracefence
is not installed: it needs only ``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-common``
(every framework environment's requirements name both). It holds the matrix's tools (the same names,
arguments and failures as ``tests/frameworks/conformance.py``), labels tool spans as a producer in any
language does (the ``tracefence.effect`` / ``tracefence.idempotency_key`` attributes of DESIGN.md,
written on the current span), collects each scenario's spans in memory and writes them as one
serialized OTLP ``ExportTraceServiceRequest`` (protobuf bytes, no JSON mapping involved).

The runner protocol (``python runner.py OUT_DIR [SCENARIO ...]``): for each scenario, exactly one of
``OUT_DIR/<scenario>.otlp.pb`` (the spans), ``<scenario>.cannot`` (UTF-8: why the framework cannot
make it) or ``<scenario>.error`` (UTF-8: the traceback) is written.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SCENARIO_KEYS = [
    "read_ok",
    "write_commits",
    "write_raises",
    "write_times_out",
    "tool_error_to_model",
    "parallel_one_fails",
    "framework_retries",
    "requested_never_ran",
    "approval_interrupt_resume",
    "mcp_is_error",
]

INVOICE = {"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}
CHARGE = {"customer": "a", "amount_cents": 500}
PAYMENT = {"customer": "a", "amount_cents": 700}
REFUND = {"order": "o-7", "amount_cents": 300}
CUSTOMER = {"customer": "a"}
STATE: dict[str, Any] = {}  # per scenario: how often each tool ran, and how the flaky ones behave


class CannotProduce(Exception):
    """The framework (this version) cannot make this scenario; the message says why."""


def ran(name: str) -> int:
    STATE[name] = STATE.get(name, 0) + 1
    return STATE[name]


def declare(effect: str, idempotency_key: str | None = None, span: Any = None) -> None:
    """Label the current span (or ``span``) as a tool body would: ``tracefence.effect`` and
    ``tracefence.idempotency_key`` (DESIGN.md, the producer's own labels). A span that is not recording
    (no current span: some instrumentations run tools outside theirs) is left alone, as
    ``otel_tracefence.declare`` leaves it."""
    target = span if span is not None else trace.get_current_span()
    if not target.is_recording():
        STATE.setdefault("unlabelled", []).append(effect)
        return
    target.set_attribute("tracefence.effect", effect)
    if idempotency_key is not None:
        target.set_attribute("tracefence.idempotency_key", idempotency_key)


def read_call():
    return ("call_r1", "lookup_customer", CUSTOMER)


def write_call(call_id: str = "call_w1"):
    return (call_id, "create_invoice", INVOICE)


# -- The tools (plain functions; each runner wraps them in its framework's tool type) ----------------------


def lookup_customer(customer: str) -> str:
    """Look a customer up.

    Args:
        customer: the customer id
    """
    declare("read")
    ran("lookup_customer")
    return f"customer {customer}: active"


def create_invoice(customer: str, amount_cents: int, idempotency_key: str) -> str:
    """Create an invoice; the first call fails when the run is set flaky.

    Args:
        customer: the customer id
        amount_cents: the amount in cents
        idempotency_key: the billing API's idempotency key
    """
    declare("write", idempotency_key=idempotency_key)
    if ran("create_invoice") == 1 and STATE.get("flaky"):
        raise ConnectionError("billing API reset the connection")
    return "invoice inv_8812"


def charge_card(customer: str, amount_cents: int) -> str:
    """Charge a card: the processor declines (raises).

    Args:
        customer: the customer id
        amount_cents: the amount in cents
    """
    declare("write")
    ran("charge_card")
    raise RuntimeError("card declined")


def send_payment(customer: str, amount_cents: int) -> str:
    """Send a payment: the payment API does not answer (raises TimeoutError).

    Args:
        customer: the customer id
        amount_cents: the amount in cents
    """
    declare("write")
    ran("send_payment")
    raise TimeoutError("payment API did not answer in 10s")


async def send_payment_slow(customer: str, amount_cents: int) -> str:
    """Send a payment: the payment API answers after the framework's tool timeout.

    Args:
        customer: the customer id
        amount_cents: the amount in cents
    """
    declare("write")
    ran("send_payment")
    await asyncio.sleep(2.0)
    return "payment pay_1"


def refund_order(order: str, amount_cents: int) -> str:
    """Refund an order: the refund API refuses (raises; the framework hands it to the model).

    Args:
        order: the order id
        amount_cents: the amount in cents
    """
    declare("write")
    ran("refund_order")
    raise RuntimeError("refund refused: order already refunded")


PLAIN_TOOLS = [lookup_customer, create_invoice, charge_card, send_payment, refund_order]


# -- Collection and the protocol ---------------------------------------------------------------------------------

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(PROVIDER)  # frameworks that trace through the global provider use this one


def session(name: str = "billing session"):
    """A plain parent span: two runs of one agent session (interrupted, then resumed) make one trace."""
    return PROVIDER.get_tracer("conformance").start_as_current_span(name)


def main(run: Callable[[str], None], argv: list[str] | None = None) -> int:
    """Run ``run(scenario)`` for each scenario named in ``argv`` (default: all), writing the protocol's
    files to ``argv[0]``. ``run`` raises :class:`CannotProduce` for a scenario its framework cannot make;
    any other exception it lets out is the framework's (a raised write ends the run): the spans made so
    far are the scenario's. Returns the process exit code (0: every file written)."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    for scenario in args[1:] or SCENARIO_KEYS:
        STATE.clear()
        EXPORTER.clear()
        try:
            run(scenario)
        except CannotProduce as exc:
            (out / f"{scenario}.cannot").write_text(str(exc) or scenario, encoding="utf-8")
            continue
        except Exception:  # noqa: BLE001 - the framework's own failure ends the run; its spans are the cell
            STATE["raised"] = traceback.format_exc()
        try:
            PROVIDER.force_flush()
            spans = EXPORTER.get_finished_spans()
            (out / f"{scenario}.otlp.pb").write_bytes(encode_spans(spans).SerializeToString())
        except Exception:  # noqa: BLE001
            (out / f"{scenario}.error").write_text(traceback.format_exc(), encoding="utf-8")
    return 0
