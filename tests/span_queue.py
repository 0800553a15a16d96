"""A review queue written through a real door (the OpenTelemetry SDK's spans through ``TraceFenceSpanProcessor``, or
the same spans over OTLP to ``tracefence serve``): the traces the item page draws (issue 26).

* ``INVOICE`` (``7ace...01``): an agent turn whose ``invoice.create`` write timed out (held: ``write_timeout``), under
  a model call and beside a read, with an HTTP client span under the tool span.
* ``CONFLICT`` (``7ace...02``): two ``ticket.update`` calls with one idempotency key and other arguments
  (``idempotency_key_conflict``): they differ in ``state`` and in ``api_key``, and agree on ``ticket``.

Every argument value of both holds a marker of ``MARKERS`` (as text), so a test can search every byte the product
wrote for one; ``SECRET_MARKERS`` are those under a key the default redaction hides (``card_number``, ``api_key``, a result's ``token``).
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

from otel_tracefence.sdk import TraceFenceSpanProcessor

INVOICE = "7ace0000000000000000000000000001"
CONFLICT = "7ace0000000000000000000000000002"
T0 = 1_765_000_000_000_000_000  # a fixed start (Unix ns)
MS = 1_000_000
MARKERS = ("MARKER-globex-7f3a", "MARKER-ticket-closed-91c2", "MARKER-ticket-reopened-44d0", "MARKER-lookup-0b7e")
SECRET_MARKERS = ("MARKER-card-5e1d", "MARKER-token-one-c3aa", "MARKER-token-two-9d4f", "MARKER-result-e6b1")


def _tool(name: str, call_id: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": json.dumps(arguments), **extra,
    }  # fmt: skip


class FixedTraceIds(RandomIdGenerator):
    """The SDK's id generator with the trace ids of ``INVOICE`` then ``CONFLICT`` for the roots, span ids counted
    from ``0x5a...01`` (the same ids in every run, whichever door)."""

    def __init__(self) -> None:
        self._next = [int(CONFLICT, 16), int(INVOICE, 16)]
        self._span = 0x5A00000000000000

    def generate_span_id(self) -> int:
        self._span += 1
        return self._span

    def generate_trace_id(self) -> int:
        return self._next.pop() if self._next else super().generate_trace_id()


def _root(tracer: Any, name: str, start: int) -> Any:
    return tracer.start_span(name, context=Context(), start_time=start, attributes={"gen_ai.operation.name": "invoke_agent"})


def _child(tracer: Any, parent: Any, name: str, start: int, end: int, *, kind: SpanKind = SpanKind.INTERNAL, attributes: Any = None, error: str = "") -> Any:
    span = tracer.start_span(name, context=set_span_in_context(parent), kind=kind, start_time=start, attributes=attributes or {})
    if error:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR, error))
    return span, end


def emit_traces(tracer: Any) -> None:
    """The two traces, with fixed times (the invoice call starts at +120 ms and times out after 30 s); ``tracer``'s
    provider must make the trace ids (:class:`FixedTraceIds`)."""
    root = _root(tracer, "invoke_agent billing-agent", T0)
    chat, chat_end = _child(tracer, root, "chat gpt-4o", T0 + 5 * MS, T0 + 110 * MS, kind=SpanKind.CLIENT, attributes={"gen_ai.operation.name": "chat"})
    chat.end(end_time=chat_end)
    read, read_end = _child(tracer, root, "execute_tool customer.lookup", T0 + 112 * MS, T0 + 118 * MS,
                            attributes=_tool("customer.lookup", "call-lookup", {"customer": MARKERS[3]}, **{"tracefence.effect": "read"}))  # fmt: skip
    read.end(end_time=read_end)
    tool, tool_end = _child(
        tracer, root, "execute_tool invoice.create", T0 + 120 * MS, T0 + 30_120 * MS,
        attributes=_tool("invoice.create", "call-invoice", {"customer": MARKERS[0], "amount_cents": 990, "card_number": SECRET_MARKERS[0]},
                         **{"tracefence.effect": "write", "tracefence.idempotency_key": "inv-1"}),
        error="timeout",
    )  # fmt: skip
    http, http_end = _child(tracer, tool, "POST /invoices", T0 + 125 * MS, T0 + 30_110 * MS, kind=SpanKind.CLIENT, attributes={"http.request.method": "POST"})
    http.end(end_time=http_end)
    tool.end(end_time=tool_end)
    root.end(end_time=T0 + 30_200 * MS)

    root = _root(tracer, "invoke_agent support-agent", T0 + 60_000 * MS)
    for n, (state, token) in enumerate(((MARKERS[1], SECRET_MARKERS[1]), (MARKERS[2], SECRET_MARKERS[2]))):
        start = T0 + (60_010 + n * 400) * MS
        span, end = _child(
            tracer, root, "execute_tool ticket.update", start, start + 350 * MS,
            attributes=_tool("ticket.update", f"call-ticket-{n + 1}", {"ticket": 7, "state": state, "api_key": token},
                             **{"tracefence.effect": "write", "tracefence.idempotency_key": "tk-1",
                                "gen_ai.tool.call.result": json.dumps({"ok": True, "token": SECRET_MARKERS[3]})}),
        )  # fmt: skip
        span.end(end_time=end)
    root.end(end_time=T0 + 61_000 * MS)


def write_through_processor(target: str, **settings: Any) -> list[Any]:
    """Write the two traces' review items to ``target`` (a SQLite file or a PostgreSQL URL) through
    ``TraceFenceSpanProcessor`` (``settings``: more of its settings); returns the spans it handed on."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=FixedTraceIds(), resource=Resource.create({"service.name": "billing-agent"}))
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_db=target, decision_wait_ms=0, **settings))
    emit_traces(provider.get_tracer("agent"))
    provider.shutdown()
    return list(exporter.get_finished_spans())
