"""The conformance matrix's tools: one home for the in-process matrix (``tests/frameworks/conformance.py``)
and every Python framework runner in its own environment (through ``runner_common``).

The same names, arguments, results and failures everywhere (``runner_common.mjs`` holds them again in
JavaScript). This module needs only the OpenTelemetry API: a framework's environment (``envs.py``) does
not install otel-tracefence, and reaches this file by a link in the runner's ``PYTHONPATH`` folder
(``envs._shared_modules``); the in-process matrix imports it as ``tests.frameworks.isolated.matrix_tools``.

Each tool labels the span it runs under as its producer would (DESIGN.md's ``tracefence.effect`` /
``tracefence.idempotency_key``): with ``otel_tracefence.declare`` where the package is installed (the
in-process matrix, and the probe runner under the test interpreter: the real API), else by writing the two
attributes on the current span (a framework's own environment).
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any, Callable

from opentelemetry import trace

INVOICE = {"customer": "a", "amount_cents": 1200, "idempotency_key": "inv-17"}
CHARGE = {"customer": "a", "amount_cents": 500}
PAYMENT = {"customer": "a", "amount_cents": 700}
REFUND = {"order": "o-7", "amount_cents": 300}
CUSTOMER = {"customer": "a"}
# The billing tools as an MCP server (mcp 1.x FastMCP, over stdio) for the runners whose framework calls MCP tools.
MCP_BILLING_SERVER = Path(__file__).resolve().with_name("mcp_billing_server.py")
STATE: dict[str, Any] = {}  # per scenario: how often each tool ran, and how the flaky ones behave


class CannotProduce(Exception):
    """The framework (this version) cannot make this scenario; the message says why."""


def ran(name: str) -> int:
    STATE[name] = STATE.get(name, 0) + 1
    return STATE[name]


@functools.cache
def _product_declare() -> Callable[..., None] | None:
    """``otel_tracefence.declare`` where otel-tracefence is installed; ``None`` in a framework's own environment."""
    try:
        from otel_tracefence.agent.instrument import declare as product
    except ModuleNotFoundError as exc:
        if exc.name != "otel_tracefence" and not (exc.name or "").startswith("otel_tracefence."):
            raise  # the package is there but broken: the matrix must not label around it
        return None
    return product


def declare(effect: str, idempotency_key: str | None = None, span: Any = None) -> None:
    """Label the current span (or ``span``) as a tool body would. Where otel-tracefence is not installed,
    a span that is not recording (no current span: some instrumentations run tools outside theirs) is left
    alone, as ``otel_tracefence.declare`` leaves it, and noted in ``STATE["unlabelled"]``."""
    product = _product_declare()
    if product is not None:
        product(effect, idempotency_key=idempotency_key, span=span)
        return
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


# -- The tools (plain functions; each framework wraps them in its own tool type) ----------------------------


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
