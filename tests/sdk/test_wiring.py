"""Issue 13: wiring mistakes refused where the processor is built, with the fix in the message."""

import pytest
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.core.config import ConfigError
from otel_tracefence.sdk import TraceFenceSpanProcessor


def test_an_exporter_where_a_processor_belongs_is_refused_naming_the_fix():
    with pytest.raises(TypeError) as raised:
        TraceFenceSpanProcessor(InMemorySpanExporter(), review_sink=None)
    assert str(raised.value) == (
        "TraceFenceSpanProcessor wraps span processors, and InMemorySpanExporter is a span exporter: wrap it in a processor, "
        "TraceFenceSpanProcessor(BatchSpanProcessor(InMemorySpanExporter(...))), or SimpleSpanProcessor in tests"
    )


def test_something_else_where_a_processor_belongs_is_refused():
    with pytest.raises(TypeError) as raised:
        TraceFenceSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), "processor", review_sink=None)
    assert str(raised.value) == "TraceFenceSpanProcessor wraps span processors (opentelemetry.sdk.trace.SpanProcessor), not str"


def test_wrapped_exporters_are_accepted():
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), BatchSpanProcessor(InMemorySpanExporter()), review_sink=None)
    processor.shutdown()


def test_a_misspelt_keyword_is_the_callers_mistake_not_the_environments():
    with pytest.raises(TypeError) as raised:
        TraceFenceSpanProcessor(review_dbb="x.db", review_sink=None)
    assert str(raised.value) == "TraceFenceSpanProcessor() got an unexpected keyword argument 'review_dbb'; did you mean 'review_db'?"


def test_a_bad_keyword_value_is_blamed_on_the_arguments():
    with pytest.raises(ConfigError) as raised:
        TraceFenceSpanProcessor(max_traces="many", review_sink=None)
    assert str(raised.value) == "configuration (arguments): max_traces: Input should be a valid integer, unable to parse string as an integer"


def test_a_bad_environment_value_is_still_blamed_on_the_environment(monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_MAX_TRACES", "many")
    with pytest.raises(ConfigError) as raised:
        TraceFenceSpanProcessor(review_sink=None)
    assert str(raised.value) == "configuration (OTEL_TRACEFENCE_* variables): max_traces: Input should be a valid integer, unable to parse string as an integer"
