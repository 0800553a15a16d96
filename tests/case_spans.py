"""OTLP/JSON example cases rebuilt as SDK ``ReadableSpan`` objects, and fed to a span processor as the SDK would.

The file is read by the CLI's own reader (the same spans ``tracefence plan`` sees), then
each protobuf span becomes a finished SDK span with the same ids, parent, times, status,
attributes, events, resource and scope. :func:`feed` replays the SDK's calls: ``on_start``
at each start time and ``on_end`` at each end time, in time order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from conftest import ROOT, SHARED_CASES
from otel_tracefence.normalize.span_view import key_values_to_dict
from otel_tracefence.otlp.json_reader import read_otlp_json

_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_KINDS = {1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT, 4: SpanKind.PRODUCER, 5: SpanKind.CONSUMER}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}


def is_otlp_case(path: Path) -> bool:
    """An OTLP/JSON file (``resourceSpans`` at the top), as opposed to rows (JSON, NDJSON, CSV)."""
    if path.suffix != ".json":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return isinstance(data, dict) and "resourceSpans" in data


def otlp_fixtures() -> list[tuple[str, Path]]:
    """``(id, path)`` of every OTLP/JSON file the tests read spans from: the project's own, anywhere under
    ``tests/`` (always), then the shared cases' (``SHARED_CASES``) when that folder is there: a clone with no
    ``../shared`` beside it still reads the project's."""
    tests = ROOT / "tests"
    found = [(f"project/{p.relative_to(tests)}", p) for p in sorted(tests.rglob("*.json")) if is_otlp_case(p)]
    if SHARED_CASES.is_dir():
        found += [(f"shared/{p.name}", p) for p in sorted(SHARED_CASES.glob("*.json")) if is_otlp_case(p)]
    return found


def _sdk_value(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _attributes(key_values: Any) -> dict[str, Any]:
    return {k: _sdk_value(v) for k, v in key_values_to_dict(key_values).items()}


def readable_spans(path: Path) -> list[ReadableSpan]:
    """Every span of an OTLP/JSON file as a finished SDK span, in file order."""
    read = read_otlp_json(path.read_text(encoding="utf-8"))
    assert not read.errors, f"{path}: spans the reader rejects: {read.errors}"
    return readable_spans_of(read.request)


def readable_spans_of(request: Any) -> list[ReadableSpan]:
    """Every span of an ``ExportTraceServiceRequest`` as a finished SDK span, in request order."""
    spans: list[ReadableSpan] = []
    for resource_spans in request.resource_spans:
        resource = Resource(_attributes(resource_spans.resource.attributes))
        for scope_spans in resource_spans.scope_spans:
            scope = InstrumentationScope(scope_spans.scope.name, scope_spans.scope.version or None)
            for span in scope_spans.spans:
                trace_id = int.from_bytes(span.trace_id, "big")
                context = SpanContext(trace_id, int.from_bytes(span.span_id, "big"), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
                parent = None
                if span.parent_span_id:
                    remote = bool(span.flags & _HAS_IS_REMOTE and span.flags & _IS_REMOTE)
                    parent = SpanContext(trace_id, int.from_bytes(span.parent_span_id, "big"), is_remote=remote, trace_flags=TraceFlags(TraceFlags.SAMPLED))
                code = _STATUS.get(span.status.code, StatusCode.UNSET)
                spans.append(
                    ReadableSpan(
                        name=span.name,
                        context=context,
                        parent=parent,
                        resource=resource,
                        attributes=_attributes(span.attributes),
                        events=[Event(e.name, _attributes(e.attributes), e.time_unix_nano) for e in span.events],
                        links=[
                            Link(SpanContext(int.from_bytes(link.trace_id, "big"), int.from_bytes(link.span_id, "big"), is_remote=True), _attributes(link.attributes))
                            for link in span.links
                        ],
                        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
                        status=Status(code, span.status.message or None) if code is StatusCode.ERROR else Status(code),
                        start_time=span.start_time_unix_nano,
                        end_time=span.end_time_unix_nano,
                        instrumentation_scope=scope,
                    )
                )
    return spans


def end_time_order(spans: Iterable[ReadableSpan]) -> list[ReadableSpan]:
    """The order in which the SDK hands spans to ``on_end``: by end time (file order among equals)."""
    return sorted(spans, key=lambda s: s.end_time or 0)


def feed(processor: SpanProcessor, spans: Iterable[ReadableSpan], *, starts: bool = True) -> None:
    """Call ``processor`` as the SDK does for these spans: ``on_start`` at each start time (``starts``)
    and ``on_end`` at each end time, in time order; at equal times a start comes before an end. A span whose
    recorded end is before its start (``0``: no end recorded) is ended right after its start, as the SDK
    never hands a span to ``on_end`` before ``on_start``."""
    events: list[tuple[int, int, int, ReadableSpan]] = []
    for index, span in enumerate(spans):
        start = span.start_time or 0
        if starts:
            events.append((start, 0, index, span))
        events.append((max(span.end_time or 0, start) if starts else span.end_time or 0, 1, index, span))
    for _, kind, _, span in sorted(events, key=lambda e: e[:3]):
        if kind == 0:
            processor.on_start(span)  # type: ignore[arg-type] - the processor reads only the context
        else:
            processor.on_end(span)


INPUT_SUFFIXES = (".json", ".ndjson", ".csv")


def find_cases(folder: Path, label: str) -> list[tuple[str, Path, Path]]:
    """``(id, input, expected)`` for each ``NAME.expected.json`` in ``folder`` and the one input beside it."""
    if not folder.is_dir():
        return []
    found = []
    for expected in sorted(folder.glob("*.expected.json")):
        name = expected.name[: -len(".expected.json")]
        inputs = [p for p in folder.glob(name + ".*") if p != expected and p.suffix in INPUT_SUFFIXES]
        assert len(inputs) == 1, f"{expected}: expected one input beside it, found {inputs}"
        found.append((f"{label}/{name}", inputs[0], expected))
    return found
