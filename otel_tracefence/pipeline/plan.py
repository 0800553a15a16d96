"""The one path every door takes: spans of a trace → steps → plan.

The span processor, the OTLP service and the CLI all call :func:`plan_spans`
(or :func:`plan_steps` for rows), so the same input gives the same plan through
every door.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ToolStep, TracePlan
from otel_tracefence.normalize import NormalizedTrace, SpanView, from_otlp, normalize_trace
from otel_tracefence.normalize.config_reading import read_config
from otel_tracefence.normalize.rootless import absent_parent, hold_rootless, missing_root, parent_cycle
from otel_tracefence.planner import plan_trace


@dataclass(frozen=True, slots=True)
class PlannedTrace:
    """A trace's plan with the normalizer's view of it (which spans are dispatch attempts of which step)."""

    plan: TracePlan
    normalized: NormalizedTrace


def plan_steps(trace_id: str, steps: Iterable[ToolStep], config: TraceFenceConfig, *, partial: bool = False) -> TracePlan:
    """Plan already-normalized steps (rows)."""
    return plan_trace(trace_id, steps, partial=partial, limits=config.limits)


def plan_spans(trace_id: str, spans: Sequence[SpanView], config: TraceFenceConfig, *, partial: bool = False) -> PlannedTrace:
    """Normalize one trace's spans and plan them. A trace whose parents form a cycle (``rootless.parent_cycle``: its
    ancestry cannot be read), or with a span whose parent, not remote, is none of its spans (``rootless.absent_parent``:
    a span never ended or never seen), is partial whatever the door decided (docs/DECISIONS.md 506, 980). A trace decided ``partial``
    that holds no root span has its steps that are not reads held, ``trace_root_missing`` (``normalize/rootless.py``,
    docs/DECISIONS.md 301)."""
    reading = read_config(config)
    normalized = normalize_trace(spans, reading)
    if not partial and (absent_parent(spans) is not None or parent_cycle(spans) is not None):
        partial = True
    if partial and normalized.steps and missing_root(spans):
        normalized.steps[:] = hold_rootless(normalized.steps, spans)
    return PlannedTrace(plan_trace(trace_id, normalized.steps, partial=partial, limits=reading.limits), normalized)


def group_request(request: ExportTraceServiceRequest) -> dict[str, list[SpanView]]:
    """Views of every span in an OTLP request, by trace id (hex), in request order."""
    traces: dict[str, list[SpanView]] = {}
    sequence = 0
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                view = from_otlp(span, sequence)
                sequence += 1
                traces.setdefault(view.trace_id, []).append(view)
    return traces
