"""The processor's fast reads of SDK spans (issue 10, fourth round) against a plain reference.

``from_readable`` reads the SDK's own ``ReadableSpan`` from its fields (not its properties), its
``SpanContext`` by tuple index, hexes ids with ``int.to_bytes`` and compares kinds and status codes
by identity; ``SdkFence.span_started`` reads a started span's ids the same way. The reference below
reads every field through the public API and writes ids with ``format``, as the processor did before:
both must give equal views (every field) for every span of every OTLP case and for live SDK spans.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags, set_span_in_context

from case_spans import feed, otlp_fixtures, readable_spans
from conftest import SHARED_CASES
from otel_tracefence.normalize.span_view import SpanEvent, SpanView, from_readable, span_id_hex, trace_id_hex
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.sdk import span_fence as fence_module
from otel_tracefence.sdk.wiring import does_nothing

OTLP_CASES = otlp_fixtures()  # the project's OTLP fixtures, and the shared cases' when ../shared is there
_STATUS = {StatusCode.OK: "ok", StatusCode.ERROR: "error"}


def reference_view(span: Any, sequence: int = 0) -> SpanView:
    """The plain read: public properties only, ids by ``format``, kind and status by the enums' names."""
    context, parent, status = span.context, span.parent, span.status
    attributes = dict(span.attributes) if span.attributes else {}
    return SpanView(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        name=span.name,
        attributes=attributes,
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        parent_is_remote=parent is not None and parent.is_remote,
        start_time_unix_nano=span.start_time or 0,
        end_time_unix_nano=span.end_time,
        status_code=_STATUS.get(status.status_code, "unset"),
        status_message=status.description or "",
        events=tuple(SpanEvent(e.name, dict(e.attributes) if e.attributes else {}) for e in span.events) if span.events else (),
        sequence=sequence,
        kind=span.kind.name.lower() if isinstance(span.kind, SpanKind) else "unspecified",
    )


def _assert_same(span: Any, sequence: int) -> None:
    fast, plain = from_readable(span, sequence), reference_view(span, sequence)
    assert fast == plain, (span.name, fast, plain)
    assert dict(fast.attributes) == dict(span.attributes or {})


def test_the_shared_and_project_cases_are_read_here():
    """The project's own fixtures always; the shared cases when their folder is there (a clean clone has none)."""
    assert len([case for case in OTLP_CASES if case[0].startswith("project/")]) >= 40
    if SHARED_CASES.is_dir():
        assert len([case for case in OTLP_CASES if case[0].startswith("shared/")]) >= 10


@pytest.mark.parametrize("input_path", [pytest.param(path, id=case_id) for case_id, path in OTLP_CASES])
def test_every_span_of_every_case_reads_as_the_plain_reference(input_path: Path):
    spans = readable_spans(input_path)
    assert spans
    for sequence, span in enumerate(spans):
        assert type(span) is ReadableSpan  # the SDK's own class: the fast path
        _assert_same(span, sequence)


def test_live_sdk_spans_of_every_kind_status_and_parent_read_as_the_plain_reference():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    remote = SpanContext(0xFEDCBA9876543210FEDCBA9876543210, 0x0123456789ABCDEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with tracer.start_as_current_span("server", kind=SpanKind.SERVER, context=set_span_in_context(NonRecordingSpan(remote))):
        for kind in SpanKind:
            with tracer.start_as_current_span(f"child {kind.name}", kind=kind, attributes={"gen_ai.tool.name": "t", "n": 1}) as child:
                child.add_event("exception", {"exception.type": "TimeoutError"})
                child.add_event("plain")
                child.set_status(Status(StatusCode.ERROR, "deadline exceeded") if kind is SpanKind.CLIENT else Status(StatusCode.OK))
    with tracer.start_as_current_span("root of its own"):
        pass
    spans = exporter.get_finished_spans()
    assert len(spans) == 2 + len(SpanKind)
    for sequence, span in enumerate(spans):
        _assert_same(span, sequence)
    views = [from_readable(s) for s in spans]
    assert {v.kind for v in views} == {"internal", "server", "client", "producer", "consumer"}
    assert {v.status_code for v in views} == {"ok", "error", "unset"}
    server = next(v for v in views if v.name == "server")
    assert (server.trace_id, server.parent_span_id, server.parent_is_remote) == ("fedcba9876543210fedcba9876543210", "0123456789abcdef", True)


class _OwnSpan(ReadableSpan):
    """A ReadableSpan of another class (an exporter's test double, a framework's own): read through its properties."""


def test_another_readable_class_small_ids_and_ids_wider_than_their_field_read_as_format_writes_them():
    small = SpanContext(1, 2, is_remote=False)
    wide = SpanContext(2**128 + 5, 2**64 + 7, is_remote=False)  # no valid SDK id, but never an exception or a changed id
    for context, parent in ((small, None), (wide, small), (small, wide)):
        for cls in (ReadableSpan, _OwnSpan):
            span = cls(name="s", context=context, parent=parent, attributes={"a": 1}, kind=SpanKind.CLIENT, start_time=1, end_time=2)
            _assert_same(span, 3)
    assert from_readable(ReadableSpan(name="s", context=small)).trace_id == "0" * 31 + "1"
    assert trace_id_hex(2**128 + 5) == format(2**128 + 5, "032x") and span_id_hex(-1) == format(-1, "016x")
    assert trace_id_hex(0xAB) == "0" * 30 + "ab" and span_id_hex(0xAB) == "0" * 14 + "ab"


def test_span_started_notes_the_ids_format_writes(monkeypatch):
    processor = TraceFenceSpanProcessor(review_sink=None, decision_wait_ms=0)
    noted: list[tuple[str, str]] = []
    monkeypatch.setattr(processor._fence.buffer, "started", lambda trace_id, span_id: noted.append((trace_id, span_id)))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with provider.get_tracer("test").start_as_current_span("root") as root:
        pass
    context = root.get_span_context()
    wide = ReadableSpan(name="wide", context=SpanContext(2**128 + 1, 2**64 + 1, is_remote=False))
    processor.on_start(wide)  # type: ignore[arg-type]
    assert noted == [(format(context.trace_id, "032x"), format(context.span_id, "016x")), (format(2**128 + 1, "032x"), format(2**64 + 1, "016x"))]
    provider.shutdown()


@pytest.mark.parametrize("input_path", [pytest.param(path, id=case_id) for case_id, path in OTLP_CASES])
def test_the_views_the_processor_takes_with_its_id_caches_are_the_plain_reference_on_every_case(input_path: Path, monkeypatch):
    processor = TraceFenceSpanProcessor(review_sink=None, decision_wait_ms=0)
    buffer = processor._fence.buffer
    taken: list[tuple[SpanView, Any]] = []
    add_batch = buffer.add_batch

    def recording(items):
        taken.extend((view, payload) for view, payload, _ in items)
        return add_batch(items)

    monkeypatch.setattr(buffer, "add_batch", recording)
    spans = readable_spans(input_path)
    feed(processor, spans)  # on_start (the caches filled) and on_end (read with them), as the SDK calls them
    assert len(taken) == len(spans)
    for view, payload in taken:
        assert view == reference_view(payload, view.sequence), payload.name
    assert not processor._fence._span_hexes  # every span ended: its entry taken out
    processor.shutdown()


def test_the_id_caches_are_bounded_and_a_cleared_cache_reads_the_same(monkeypatch):
    monkeypatch.setattr(fence_module, "HEX_CACHE_SIZE", 4)
    processor = TraceFenceSpanProcessor(review_sink=None, decision_wait_ms=0)
    fence = processor._fence
    spans = [ReadableSpan(name=f"s{i}", context=SpanContext(100 + i, 200 + i, is_remote=False), parent=SpanContext(100 + i, 7, is_remote=False))
             for i in range(10)]
    for span in spans:
        processor.on_start(span)  # type: ignore[arg-type] - never ended: the caches must not grow past their bound
        assert len(fence._span_hexes) <= 4 and len(fence._trace_hexes) <= 4
    fence._span_hexes[7] = "0000000000000007"  # the parent's entry, as its on_start left it
    for i, span in enumerate(spans):
        view = from_readable(span, i, fence._trace_hexes, fence._span_hexes)
        assert view == reference_view(span, i)
    processor.shutdown()


class _Recording(SimpleSpanProcessor):
    def __init__(self) -> None:
        super().__init__(InMemorySpanExporter())
        self.started: list[str] = []

    def on_start(self, span, parent_context=None) -> None:  # noqa: ANN001
        self.started.append(span.name)


def test_on_start_reaches_the_processors_whose_on_start_does_something_only():
    recording, simple = _Recording(), SimpleSpanProcessor(InMemorySpanExporter())
    processor = TraceFenceSpanProcessor(recording, simple, review_sink=None, decision_wait_ms=0)
    assert processor._starts == (recording,)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with provider.get_tracer("test").start_as_current_span("root"):
        pass
    assert recording.started == ["root"]
    provider.shutdown()


def test_does_nothing_reads_the_bytecode():
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    def documented(self, span, parent_context=None):  # noqa: ANN001
        """Only a docstring."""

    def works(self, span, parent_context=None):  # noqa: ANN001
        span.set_attribute("a", 1)

    def returns_something(self, span, parent_context=None):  # noqa: ANN001
        return 1

    assert does_nothing(SpanProcessor.on_start) and does_nothing(BatchSpanProcessor.on_start) and does_nothing(SimpleSpanProcessor.on_start)
    assert does_nothing(documented) and does_nothing(_Recording.__mro__[1].on_start)
    assert not does_nothing(works) and not does_nothing(returns_something) and not does_nothing(_Recording.on_start)
    assert not does_nothing(len) and not does_nothing(None) and not does_nothing(lambda *a: print(a))
