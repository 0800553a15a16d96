"""What the streamed-run tests share (tests/frameworks/test_streaming_*.py): a streamed run's plans, per trace.

A streamed run is planned as ``tracefence plan`` plans a file: every trace its spans make is planned on its own, so a
tool span that lost the run's context while the stream was consumed (a root of its own trace) shows as a second plan,
and the run's own trace as one planning fewer calls. Each expected value is the list of the run's trace plans, one
``(class, sorted steps)`` per trace (a step: ``(tool, decision, reasons)``; the class None: a trace with no tool
step, which no class is given), sorted (:func:`traces`).

``TRACEFENCE_STREAM_TRIALS`` (a folder), when set, receives each run's spans as OTLP/JSON under
``<framework>/<scenario>.otlp.json``, so the traces can be planned again by hand.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Sequence

from opentelemetry.sdk.trace import ReadableSpan

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.otlp.json_writer import OtlpJsonFileSpanExporter
from tests.frameworks import conformance as matrix


def plans(spans: Sequence[ReadableSpan], framework: str) -> list[tuple[str, list]]:
    """Each trace's plan among ``spans`` under the matrix's configuration for ``framework``: ``[(class, steps)]``. The
    CLI's input errors may only name spans it still planned (held), never a span it dropped. No span: no plan."""
    if not spans:
        return []
    text = io.StringIO()
    OtlpJsonFileSpanExporter(text).export(list(spans))
    made, errors = plan_text(text.getvalue(), "auto", matrix._config(framework))
    assert [e for e in errors if not e.planned] == []
    return traces(*((p.replay_class.name if p.replay_class else None, sorted((d.step.tool, d.decision.name.lower(), tuple(d.reasons)) for d in p.steps)) for p in made))


def traces(*planned: tuple) -> list[tuple[str | None, list]]:
    """Several traces' plans ``(class, steps)`` in one order (by class, no class first, then steps): what a run of
    several traces should make, compared with :func:`plans`."""
    return sorted(((c, sorted(steps)) for c, steps in planned), key=lambda p: (p[0] or "", p[1]))


def expected(replay_class: str, *steps: tuple) -> list[tuple[str, list]]:
    """One trace planned ``replay_class`` with ``steps`` (what a streamed run should make)."""
    return [(replay_class, sorted(steps))]


def save(spans: Sequence[ReadableSpan], framework: str, scenario: str) -> None:
    """Write ``spans`` as OTLP/JSON under ``$TRACEFENCE_STREAM_TRIALS/<framework>/<scenario>.otlp.json`` when set."""
    folder = os.environ.get("TRACEFENCE_STREAM_TRIALS")
    if not folder or not spans:
        return
    path = Path(folder) / framework / f"{scenario}.otlp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    exporter = OtlpJsonFileSpanExporter(path)
    exporter.export(list(spans))
    exporter.shutdown()


def shape(spans: Sequence[ReadableSpan]) -> list[tuple[str, str | None, int]]:
    """Each span's (name, parent's name or None, index of its trace in first-seen order): how the run's spans hang."""
    names = {s.context.span_id: s.name for s in spans}
    traces: list[int] = []
    out = []
    for s in spans:
        if s.context.trace_id not in traces:
            traces.append(s.context.trace_id)
        parent = names.get(s.parent.span_id, "?") if s.parent is not None else None
        out.append((s.name, parent, traces.index(s.context.trace_id)))
    return out
