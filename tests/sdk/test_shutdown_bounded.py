"""Issue 30 (shutdown bounded): the span processor's and the exporter's ``shutdown(timeout)`` return within the timeout
and ``bounded.MARGIN_S`` more whatever the wrapped exporter does (one that hangs in export and in shutdown), the
overrun counted as ``shutdown_timeout``; the spans reach an exporter that answers as before."""

from __future__ import annotations

import threading
import time
from typing import Sequence

import pytest

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_tracefence.sdk import TraceFenceSpanExporter, TraceFenceSpanProcessor
from otel_tracefence.sdk.bounded import MARGIN_S

TIMEOUT_MS = 1000


class HangingExporter(SpanExporter):
    """Blocks in ``export`` and ``shutdown`` until released (the test releases it at its end)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(60)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.wait(60)


def _a_trace(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent"):
        with tracer.start_as_current_span("execute_tool accounts.get_balance", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "accounts.get_balance", "tracefence.effect": "read"}):
            pass


def test_the_processor_shutdown_returns_in_time_over_a_hanging_exporter(caplog: pytest.LogCaptureFixture) -> None:
    hanging = HangingExporter()
    processor = TraceFenceSpanProcessor(BatchSpanProcessor(hanging, schedule_delay_millis=10), review_sink=None, decision_wait_ms=0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        _a_trace(provider)
        time.sleep(0.1)  # the batch processor's worker is now inside the hanging export
        started = time.monotonic()
        processor.shutdown(TIMEOUT_MS)
        took = time.monotonic() - started
        assert took < TIMEOUT_MS / 1000 + MARGIN_S, took
        assert "tracefence processor: downstream BatchSpanProcessor.shutdown() did not finish within the shutdown's timeout; it goes on in the background" in caplog.messages
    finally:
        hanging.release.set()


def test_the_exporter_shutdown_returns_in_time_over_a_hanging_exporter(caplog: pytest.LogCaptureFixture) -> None:
    hanging = HangingExporter()
    exporter = TraceFenceSpanExporter(hanging, review_sink=None, decision_wait_ms=60_000)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=10))
    try:
        _a_trace(provider)
        time.sleep(0.3)  # the spans are held, waiting for their decision: shutdown hands them to the hanging export
        started = time.monotonic()
        exporter.shutdown(TIMEOUT_MS)
        took = time.monotonic() - started
        assert took < TIMEOUT_MS / 1000 + MARGIN_S, took
        assert "tracefence exporter: shutdown: planning what is held (the wrapped exporter's export?) did not finish within 1000 ms; it goes on in the background" in caplog.messages
    finally:
        hanging.release.set()
    time.sleep(0.2)
    assert hanging.exported == 2  # released: the spans were handed on after all
