"""Shared parts of the real-framework tests (``tests/test_framework_*.py``): plans of the spans a
framework's own instrumentation made, the same spans through the CLI, and a processor switch for
instrumentors that bind their tracer once per process."""

from __future__ import annotations

import base64
import hashlib
import io
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from opentelemetry import trace as otel_trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import TracePlan
from otel_tracefence.normalize import SpanView, from_otlp, from_readable
from otel_tracefence.otlp.json_writer import OtlpJsonFileSpanExporter
from otel_tracefence.pipeline.plan import plan_spans


def sha(text: str) -> str:
    """SHA-256 (hex) of ``text`` as UTF-8: expected hashes are written out by hand, from canonical JSON."""
    return hashlib.sha256(text.encode()).hexdigest()


def hex_id(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x")


def plan_of_spans(spans: Sequence[ReadableSpan], config: TraceFenceConfig | None = None) -> TracePlan:
    """The plan of one trace's finished SDK spans, read as the span processor reads them."""
    views = [from_readable(s, i) for i, s in enumerate(spans)]
    trace_ids = {v.trace_id for v in views}
    assert len(trace_ids) == 1, trace_ids
    (trace_id,) = trace_ids
    return plan_spans(trace_id, views, config or TraceFenceConfig()).plan


def through_the_cli(spans: Sequence[ReadableSpan], config: TraceFenceConfig) -> list[TracePlan]:
    """The plans ``tracefence plan`` makes of these spans written as OTLP/JSON (as the Collector's file exporter writes them)."""
    text = io.StringIO()
    OtlpJsonFileSpanExporter(text).export(spans)
    plans, errors = plan_text(text.getvalue(), "auto", config)
    assert errors == []
    return plans


class SwitchProcessor(SpanProcessor):
    """Hands spans to ``target``: an instrumentor binds its tracer provider once per process, and each
    test points the switch at its own processor."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span, parent_context=None):
        if self.target is not None:
            self.target.on_start(span, parent_context=parent_context)

    def on_end(self, span):
        if self.target is not None:
            self.target.on_end(span)

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis: int = 30000):
        return True


SWITCH = SwitchProcessor()


def global_provider() -> TracerProvider:
    """The global SDK provider, with :data:`SWITCH` on it: the MCP SDK traces through the global
    provider, which can be set once per process, so the frameworks' instrumentation uses it too."""
    provider = otel_trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        otel_trace.set_tracer_provider(TracerProvider())
        provider = otel_trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "another SDK provider implementation is global"
    if SWITCH not in provider._active_span_processor._span_processors:
        provider.add_span_processor(SWITCH)
    return provider


def server_views(spans_file: Path) -> list[SpanView]:
    """The spans the MCP server program (``tests/programs/mcp_billing_server.py``) wrote: one base64
    ``ExportTraceServiceRequest`` a line, read as the service reads OTLP (their order after the client's)."""
    views: list[SpanView] = []
    for line in spans_file.read_text().splitlines() if spans_file.exists() else []:
        request = ExportTraceServiceRequest.FromString(base64.b64decode(line))
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                views.extend(from_otlp(span, 1000 + len(views) + i) for i, span in enumerate(scope_spans.spans))
    return views


def instrumented(instrumentor: Any, seen: list) -> Iterator[Callable[..., InMemorySpanExporter]]:
    """The body of an OpenInference ``traced`` fixture: yields ``start(*processors)``, which instruments
    the framework onto a fresh SDK TracerProvider (default processor: an in-memory exporter, returned);
    uninstruments and shuts the provider down after the test. ``seen`` is emptied first."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    seen.clear()

    def start(*processors: SpanProcessor) -> InMemorySpanExporter:
        for processor in processors or (SimpleSpanProcessor(exporter),):
            provider.add_span_processor(processor)
        instrumentor.instrument(tracer_provider=provider)
        return exporter

    yield start
    instrumentor.uninstrument()
    provider.shutdown()
