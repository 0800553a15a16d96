"""A small MCP server (the ``mcp`` SDK's ``MCPServer``, formerly FastMCP) run over stdio by
tests/frameworks/test_framework_mcp.py.

The SDK's own OpenTelemetry middleware makes a SERVER span ``tools/call <tool>`` for each
call, parented (through the W3C ``traceparent`` the client puts in ``_meta``) under the
client's ``MCP send tools/call <tool>`` span. This process exports its spans as OTLP
protobuf ``ExportTraceServiceRequest`` messages, one per span, base64 on a line of the
file named by ``TRACEFENCE_TEST_SPANS``, as each span ends. stdout is the MCP channel:
nothing else may be printed there.

Tools label the server span with ``otel_tracefence.agent.instrument.declare`` in their body.
``send_payment`` answers the first call for each idempotency key only after
``TRACEFENCE_TEST_SLOW_S`` seconds (the client times out), and later calls at once.
"""

from __future__ import annotations

import asyncio
import base64
import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from otel_tracefence.agent.instrument import declare


class LineFileExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans):
        line = base64.b64encode(encode_spans(spans).SerializeToString()).decode() + "\n"
        with open(self.path, "a", encoding="ascii") as out:
            out.write(line)
            out.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


provider = TracerProvider(resource=Resource.create({"service.name": "billing-mcp-server"}))
provider.add_span_processor(SimpleSpanProcessor(LineFileExporter(os.environ["TRACEFENCE_TEST_SPANS"])))
trace.set_tracer_provider(provider)

server = MCPServer("billing")
payments_seen: dict[str, int] = {}


@server.tool()
def lookup_customer(customer: str) -> str:
    """Read a customer record."""
    declare("read")
    return f"customer {customer}: active"


@server.tool()
def create_invoice(customer: str, amount_cents: int, idempotency_key: str) -> str:
    """Create an invoice."""
    declare("write", idempotency_key=idempotency_key)
    return "invoice inv_8812"


@server.tool()
def charge_card(customer: str, amount_cents: int) -> CallToolResult:
    """Charge a card: the processor declines, reported as a tool error (isError), not a protocol error."""
    declare("write")
    return CallToolResult(content=[TextContent(type="text", text="card declined")], is_error=True)


@server.tool()
async def send_payment(customer: str, amount_cents: int, idempotency_key: str) -> str:
    """Send a payment: the first call per key is slow, so the client times out and may retry."""
    declare("write", idempotency_key=idempotency_key)
    payments_seen[idempotency_key] = payments_seen.get(idempotency_key, 0) + 1
    if payments_seen[idempotency_key] == 1:
        await asyncio.sleep(float(os.environ.get("TRACEFENCE_TEST_SLOW_S", "2")))
    return f"payment {idempotency_key}/{payments_seen[idempotency_key]}"


if __name__ == "__main__":
    server.run("stdio")
