"""The normalizer's fast path for quiet spans (``normalize/trace.quiet``; docs/DECISIONS.md, 174).

A quiet span is not handed to the tool-span, ToolInvoker, requested-call and HTTP readers at all. Each
reader is checked here against the fast path on every span of every OTLP case and fixture, and on
generated spans: on a quiet span it finds nothing, exactly as the fast path takes for granted.
"""

from __future__ import annotations


from hypothesis import given, settings
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from case_spans import otlp_fixtures
from tests.faults.test_fuzz import FAST, examples, otlp_spans, tool_like_spans
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize import SpanView, from_otlp, span_to_step
from otel_tracefence.normalize import conventions as cv, span_kinds
from otel_tracefence.normalize.http import REQUEST_KEYS as HTTP_REQUEST_KEYS, http_request
from otel_tracefence.normalize.requested import REQUEST_KEYS as REQUESTED_KEYS, requested_calls
from otel_tracefence.normalize.span_view import SpanEvent
from otel_tracefence.normalize.trace import quiet
from otel_tracefence.otlp.json_reader import read_otlp_json

CONFIG = TraceFenceConfig()


def _case_spans() -> list[Span]:
    spans: list[Span] = []
    for _, path in otlp_fixtures():
        read = read_otlp_json(path.read_text(encoding="utf-8"))
        spans += [s for rs in read.request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return spans


def _readers_find_nothing(view: SpanView) -> None:
    assert span_to_step(view, CONFIG) is None
    assert not span_kinds.is_tool_invoker(view.attributes)
    assert not span_kinds.is_tool_span(view.attributes, view.name)
    assert requested_calls(view, CONFIG.limits) == []
    assert http_request(view) is None


def test_on_every_case_span_the_readers_find_nothing_in_a_quiet_span():
    views = [from_otlp(span, i) for i, span in enumerate(_case_spans())]
    quiet_views = [v for v in views if quiet(v)]
    for view in quiet_views:
        _readers_find_nothing(view)
    # Both kinds are there, and the spans the readers do find something in are never quiet.
    assert len(quiet_views) >= 5 and len(views) - len(quiet_views) >= 25, (len(quiet_views), len(views))
    assert not any(quiet(v) for v in views if span_to_step(v, CONFIG) is not None or requested_calls(v, CONFIG.limits) or http_request(v) is not None)


@settings(max_examples=examples(300), **FAST)
@given(otlp_spans())
def test_on_generated_spans_the_readers_find_nothing_in_a_quiet_span(span: Span):
    view = from_otlp(span)
    if quiet(view):
        _readers_find_nothing(view)


@settings(max_examples=examples(200), **FAST)
@given(tool_like_spans())
def test_tool_like_spans_are_never_quiet_when_a_reader_finds_something(span: Span):
    view = from_otlp(span)
    if span_to_step(view, CONFIG) is not None or requested_calls(view, CONFIG.limits) or http_request(view) is not None:
        assert not quiet(view)


def _view(attributes: dict, events: tuple = (), unreadable=None) -> SpanView:
    return SpanView(
        trace_id="01" * 16, span_id="02" * 8, parent_span_id="", name="chat model", start_time_unix_nano=1, end_time_unix_nano=2,
        attributes=attributes, events=events, unreadable=unreadable,
    )


def test_what_makes_a_span_quiet_or_not():
    assert quiet(_view({}))
    assert quiet(_view({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "tool.description": "x"}))
    assert not quiet(_view({"gen_ai.operation.name": "execute_tool"}))
    assert not quiet(_view({}, events=(SpanEvent("gen_ai.choice", {}),)))
    assert not quiet(_view({}, unreadable=("attributes", "not protobuf")))
    # Every key any of the four readers looks for first makes a span not quiet, alone.
    keys = cv.TOOL_MARKER_KEYS | REQUESTED_KEYS | HTTP_REQUEST_KEYS
    assert {"gen_ai.tool.name", "haystack.component.type", "gen_ai.output.messages", "http.request.method", "rpc.system", "tracefence.effect"} <= keys
    assert [key for key in sorted(keys) if quiet(_view({key: "x"}))] == []
