"""The processor's annotated copies (issue 10): built cheaply from the SDK's spans, never changing them."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_tracefence.normalize.span_view import sdk_attributes
from otel_tracefence.sdk import TraceFenceSpanProcessor

FIELDS = ("name", "context", "parent", "resource", "events", "links", "kind", "status", "start_time", "end_time", "instrumentation_scope")


def test_copies_carry_the_annotations_and_every_other_field_while_other_processors_see_the_originals(tmp_path):
    beside, fenced = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(beside))  # another processor of the same provider
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(fenced), review_sink=None, decision_wait_ms=0))
    tracer = provider.get_tracer("test.agent", "1.2")
    with tracer.start_as_current_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat model", attributes={"gen_ai.operation.name": "chat"}) as chat:
            chat.add_event("thinking", {"n": 1})
        with tracer.start_as_current_span(
            "execute_tool lookup",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"id": 7}',
                "gen_ai.tool.call.result": '{"name": "x"}',
                "tracefence.effect": "read",
            },
        ) as tool:
            tool.set_status(Status(StatusCode.OK))
    provider.force_flush()
    originals = {s.context.span_id: s for s in beside.get_finished_spans()}
    copies = {s.context.span_id: s for s in fenced.get_finished_spans()}
    assert set(copies) == set(originals) and len(copies) == 3
    for span_id, copy in copies.items():
        original = originals[span_id]
        assert type(copy) is ReadableSpan and copy is not original
        assert not any(key.startswith("tracefence.replay") for key in original.attributes)  # never changed in place
        assert {k: v for k, v in copy.attributes.items() if not k.startswith("tracefence.")} == {
            k: v for k, v in original.attributes.items() if not k.startswith("tracefence.")
        }
        assert copy.attributes["tracefence.replay.class"] == "dynamic"
        for field in FIELDS:
            assert getattr(copy, field) == getattr(original, field), field
    tool_copy = next(s for s in copies.values() if s.name == "execute_tool lookup")
    assert tool_copy.attributes["tracefence.step.decision"] == "replay"
    assert tuple(tool_copy.attributes["tracefence.step.reasons"]) == ("declared_read",)
    assert originals[tool_copy.context.span_id].attributes["tracefence.effect"] == "read"


def test_the_view_shares_only_an_ended_spans_frozen_attributes():
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("t").start_span("op", attributes={"a": 1})
    open_attributes = sdk_attributes(span)  # still open: a copy, which later changes do not reach
    span.set_attribute("b", 2)
    assert open_attributes == {"a": 1}
    span.end()
    ended = exporter.get_finished_spans()[0]
    assert sdk_attributes(ended) is ended._attributes._dict  # frozen by Span.end(): shared, not copied
    assert sdk_attributes(ended) == {"a": 1, "b": 2}
