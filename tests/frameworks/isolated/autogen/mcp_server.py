"""A tiny MCP server (the ``mcp`` SDK's FastMCP, over stdio) for the AutoGen row's mcp_is_error cell: its one write
tool fails, which FastMCP answers as a ``CallToolResult`` with ``isError`` true. mcp 1.x makes no spans of its own."""

from mcp.server.fastmcp import FastMCP

server = FastMCP("billing")


@server.tool()
def charge_card(customer: str, amount_cents: int) -> str:
    """Charge a card: the processor declines."""
    raise RuntimeError("card declined")


if __name__ == "__main__":
    server.run("stdio")
