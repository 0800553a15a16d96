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

import contextlib
import io
import os
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Sequence

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


def run_streams(expected_by_row: dict, kind: str, tmp_path_factory) -> dict:
    """Each row's streamed runs of ``expected_by_row`` (``{row: {scenario: plan}}``), run by its runner in its own
    environment of ``kind`` (``python`` or ``node``), the scenarios named (never the row's cached outcomes):
    ``{(row, scenario): spans}``, each saved (:func:`save`). Skips, naming the row, where its environment cannot be made."""
    import pytest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from case_spans import readable_spans_of
    from tests.frameworks.isolated import envs

    out = {}
    for key, table in expected_by_row.items():
        env = envs.prepare(key, kind)
        if not env.ok:
            pytest.skip(f"{key} cannot run on this machine: {env.why}")
        for scenario, outcome in envs.run(env, tmp_path_factory.mktemp(key), list(table)).items():
            assert outcome.request is not None, outcome.error or outcome.cannot  # b"": the run exported no span
            out[key, scenario] = readable_spans_of(ExportTraceServiceRequest.FromString(outcome.request))
            save(out[key, scenario], key, scenario)
    return out


def run_in_process(
    framework: str,
    scenarios: Iterable[str],
    run: Callable[[str], Any],
    state: dict,
    *,
    setup: bool = True,
    tracing: Callable[[], ContextManager] = contextlib.nullcontext,
) -> dict:
    """Each scenario run by ``run(scenario)`` in this process, its spans collected (under ``tracing()``, a framework's
    own tracing switch): ``{scenario: spans}`` and ``{(scenario, "ran"): the tools' run counts}`` (a copy of ``state``,
    cleared before each run), each run saved (:func:`save`). With ``setup``, the matrix's set-up for ``framework``
    comes first and its teardown last."""
    teardown = matrix.setup(framework) if setup else None
    out: dict = {}
    try:
        for scenario in scenarios:
            state.clear()
            with tracing(), matrix.Collector() as collected:
                run(scenario)
            out[scenario], out[scenario, "ran"] = collected.spans(), dict(state)
            save(out[scenario], framework, scenario)
    finally:
        if teardown is not None:
            teardown()
    return out

