"""The matrix's billing tools as a small MCP server (the ``mcp`` package's FastMCP, ``MCPServer`` in mcp 2.x), run over
stdio by the Python runners whose framework has an MCP client (``matrix_tools.MCP_BILLING_SERVER``), under whichever
``mcp`` the framework's environment has, and by the Node.js runners whose MCP client starts a server (the test's own
interpreter, named to the runner by ``envs.run``).

``TRACEFENCE_TEST_FLAKY=1``: the first ``create_invoice`` of the session fails (an ``isError`` result).
``TRACEFENCE_TEST_SLOW_S``: how long ``send_payment`` takes (default 2 s, past the client's timeout).
"""

from __future__ import annotations

import asyncio
import os

try:
    from mcp.server.fastmcp import FastMCP
except ImportError:  # mcp 2.x renamed it (the same constructor, tool decorator and run)
    from mcp.server.mcpserver import MCPServer as FastMCP
from mcp.types import CallToolResult, TextContent, ToolAnnotations

server = FastMCP("billing")
RAN: dict[str, int] = {}


def _ran(name: str) -> int:
    RAN[name] = RAN.get(name, 0) + 1
    return RAN[name]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_customer(customer: str) -> str:
    """Look a customer up."""
    _ran("lookup_customer")
    return f"customer {customer}: active"


@server.tool()
def create_invoice(customer: str, amount_cents: int, idempotency_key: str) -> str:
    """Create an invoice; the first call fails when the server is started flaky."""
    if _ran("create_invoice") == 1 and os.environ.get("TRACEFENCE_TEST_FLAKY") == "1":
        raise ConnectionError("billing API reset the connection")
    return "invoice inv_8812"


@server.tool()
def charge_card(customer: str, amount_cents: int) -> CallToolResult:
    """Charge a card: the processor declines (an isError result)."""
    _ran("charge_card")
    return CallToolResult(isError=True, content=[TextContent(type="text", text="card declined")])


@server.tool()
async def send_payment(customer: str, amount_cents: int) -> str:
    """Send a payment: the payment API answers after the client's timeout."""
    _ran("send_payment")
    await asyncio.sleep(float(os.environ.get("TRACEFENCE_TEST_SLOW_S", "2.0")))
    return "payment pay_1"


@server.tool()
def refund_order(order: str, amount_cents: int) -> str:
    """Refund an order: the refund API refuses (raises; FastMCP answers isError)."""
    _ran("refund_order")
    raise RuntimeError("refund refused: order already refunded")


if __name__ == "__main__":
    server.run("stdio")
