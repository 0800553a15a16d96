"""Issue 13: wiring mistakes refused where the processor is built, with the fix in the message."""

import logging
import os

import pytest
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.core.config import ConfigError
from otel_tracefence.sdk import TraceFenceSpanExporter, TraceFenceSpanProcessor


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


@pytest.mark.parametrize("build", [TraceFenceSpanProcessor, TraceFenceSpanExporter], ids=["processor", "exporter"])
def test_a_config_file_path_where_a_config_belongs_is_refused_naming_the_fix(build):
    # A path is the likeliest guess (the command line takes --config PATH); before, an AttributeError from deep inside.
    with pytest.raises(TypeError) as raised:
        build(config="tracefence.yaml", review_sink=None)
    assert str(raised.value) == (
        f"{build.__name__}(config=...) takes a TraceFenceConfig, not str: load a file with "
        "otel_tracefence.core.config.load_config(path), or name it in OTEL_TRACEFENCE_CONFIG and leave config out"
    )


def test_a_bad_keyword_value_is_blamed_on_the_arguments():
    with pytest.raises(ConfigError) as raised:
        TraceFenceSpanProcessor(max_traces="many", review_sink=None)
    assert str(raised.value) == "configuration (arguments): max_traces: Input should be a valid integer, unable to parse string as an integer"


def test_a_bad_environment_value_takes_its_default_logged_and_the_agent_starts(monkeypatch, caplog):
    """A typo in a deployment's variables never keeps the agent from starting (DECISIONS 695): that setting takes
    its default, named in one error line that blames the environment; the others are kept."""
    monkeypatch.setenv("OTEL_TRACEFENCE_MAX_TRACES", "many")
    monkeypatch.setenv("OTEL_TRACEFENCE_DECISION_WAIT_MS", "250")
    with caplog.at_level(logging.ERROR, logger="otel_tracefence"):
        processor = TraceFenceSpanProcessor(review_sink=None)
    processor.shutdown()
    assert (processor.config.max_traces, processor.config.decision_wait_ms) == (10000, 250.0)
    assert [r.getMessage() for r in caplog.records] == [
        "tracefence: configuration (OTEL_TRACEFENCE_* variables): max_traces: Input should be a valid integer, unable to parse string as an "
        "integer; using the default for max_traces, the other settings as given"
    ]
    assert os.environ["OTEL_TRACEFENCE_MAX_TRACES"] == "many"  # put back after the reload


def test_a_config_file_that_is_not_there_is_left_out_and_the_arguments_kept(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("OTEL_TRACEFENCE_CONFIG", str(tmp_path / "missing.yaml"))
    with caplog.at_level(logging.ERROR, logger="otel_tracefence"):
        processor = TraceFenceSpanProcessor(review_sink=None, max_traces=7)
    processor.shutdown()
    assert processor.config.max_traces == 7
    assert [r.getMessage() for r in caplog.records] == [
        f"tracefence: config file {tmp_path / 'missing.yaml'}: not found; planning without it, the other settings as given"
    ]
