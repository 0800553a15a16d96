"""Tool calls run as spans under one root span with the real SDK (:func:`otel_tracefence.agent.instrument.tool_call`),
and their trace planned: seed 000's pager incident, for the data-flow and replay tests."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.agent.instrument import tool_call
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans

# (tool, effect, arguments, result or None when not recorded): seed 000's incident, step 7 pages.
SEED_PAGER = [
    ("read_file", "read", {"path": "runbooks/db.md"}, {"bytes": 2048}),
    ("query_metrics", "read", {"metric": "db.p99", "window": "5m"}, {"p99_ms": 930}),
    ("get_config", "read", {"service": "db"}, {"oncall": "team-db", "escalation": "high"}),
    ("read_file", "read", {"path": "runbooks/pager.md"}, {"bytes": 512}),
    ("query_metrics", "read", {"metric": "db.errors", "window": "5m"}, {"errors": 41}),
    ("get_config", "read", {"service": "pager"}, {"route": "primary"}),
    ("pager.trigger", "write", {"service": "db", "severity": "high"}, {"status": "paged", "id": "pg_8812"}),
    ("pager.annotate", "write", {"page": "pg_8812", "note": "p99 above 900ms"}, {"ok": True}),
]


def record(calls, config: TraceFenceConfig | None = None):
    """Run ``calls`` as tool spans under one root span (the real SDK), and plan the trace."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent oncall", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i, (tool, effect, arguments, result, *extra) in enumerate(calls, 1):
            options = extra[0] if extra else {}
            with tool_call(tool, effect=effect, arguments=arguments, call_id=f"c{i}", record_result=result is not None, tracer_provider=provider, **options) as call:
                if result is not None:
                    call.set_result(result)
    views = [from_readable(s, i) for i, s in enumerate(exporter.get_finished_spans())]
    planned = plan_spans(views[0].trace_id, views, config or TraceFenceConfig())
    return planned.plan
