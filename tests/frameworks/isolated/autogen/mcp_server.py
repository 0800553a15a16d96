"""A tiny MCP server (the ``mcp`` SDK's FastMCP, over stdio) for the AutoGen row's mcp_is_error cell: its write tool
``charge_card`` fails, which FastMCP answers as a ``CallToolResult`` with ``isError`` true; ``capture_payment`` commits
(the runner's ``mcp_commits``, outside the matrix). mcp 1.x makes no spans of its own."""

from mcp.server.fastmcp import FastMCP

server = FastMCP("billing")


@server.tool()
def charge_card(customer: str, amount_cents: int) -> str:
    """Charge a card: the processor declines."""
    raise RuntimeError("card declined")


@server.tool()
def capture_payment(customer: str, amount_cents: int) -> str:
    """Capture a payment: the processor accepts."""
    return "payment captured: cap_1"


if __name__ == "__main__":
    server.run("stdio")
