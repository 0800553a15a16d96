"""Zero-code setup: ``OTEL_TRACES_EXPORTER=tracefence opentelemetry-instrument python agent.py``.

The program (tests/programs/zero_code_agent.py) knows only the OpenTelemetry API and
``otel_tracefence.agent.instrument.tool_call``; the SDK, the ``tracefence`` exporter (entry point
in group ``opentelemetry_traces_exporter``) and its console exporter come from the
environment alone. Also the same exporter in-process, holding a trace across batches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.agent.instrument import tool_call
from otel_tracefence.review.store import ReviewStoreError, SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanExporter

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "zero_code_agent.py"
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"


def console_spans(stdout: str) -> list[dict]:
    """The ConsoleSpanExporter's output: one indented JSON object per span, back to back."""
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while True:
        while index < len(stdout) and stdout[index].isspace():
            index += 1
        if index == len(stdout):
            return spans
        span, index = decoder.raw_decode(stdout, index)
        spans.append(span)


def run_agent(tmp_path: Path, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_TRACES_EXPORTER="tracefence",
        OTEL_TRACEFENCE_EXPORTER="console",
        OTEL_TRACEFENCE_REVIEW_DB=str(tmp_path / "review.db"),
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME="zero-code-agent",
        **extra_env,
    )
    return subprocess.run([str(INSTRUMENT), sys.executable, str(PROGRAM)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def test_tracefence_exporter_entry_point_is_registered():
    (entry,) = [e for e in entry_points(group="opentelemetry_traces_exporter") if e.name == "tracefence"]
    assert entry.value == "otel_tracefence.sdk.exporter:TraceFenceSpanExporter"
    assert entry.load() is TraceFenceSpanExporter


@pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrument is not installed (the `test` extra has it)")
def test_zero_code_agent_under_opentelemetry_instrument(tmp_path):
    result = run_agent(tmp_path)
    assert result.returncode == 0, result.stderr
    spans = {span["name"]: span for span in console_spans(result.stdout)}
    assert set(spans) == {"invoke_agent billing-agent", "execute_tool get_customer", "execute_tool invoice.create"}
    trace_ids = {span["context"]["trace_id"] for span in spans.values()}
    assert len(trace_ids) == 1
    trace_id = trace_ids.pop().removeprefix("0x")

    def fence_attrs(name: str) -> dict:
        return {k: v for k, v in spans[name]["attributes"].items() if k.startswith("tracefence.") and k not in ("tracefence.effect", "tracefence.status", "tracefence.idempotency_key")}

    assert fence_attrs("invoke_agent billing-agent") == {"tracefence.replay.class": "review", "tracefence.plan.schema_version": "1"}
    assert fence_attrs("execute_tool get_customer") == {
        "tracefence.replay.class": "review",
        "tracefence.plan.schema_version": "1",
        "tracefence.step.decision": "replay",
        "tracefence.step.reasons": ["declared_read"],
        "tracefence.step.related_call_ids": [],
        "tracefence.step.effect": "read",
        "tracefence.step.status": "ok",
    }
    assert fence_attrs("execute_tool invoice.create") == {
        "tracefence.replay.class": "review",
        "tracefence.plan.schema_version": "1",
        "tracefence.step.decision": "review",
        "tracefence.step.reasons": ["write_timeout"],
        "tracefence.step.related_call_ids": [],
        "tracefence.step.effect": "write",
        "tracefence.step.status": "timeout",
    }
    assert spans["execute_tool invoice.create"]["resource"]["attributes"]["service.name"] == "zero-code-agent"

    with SQLiteReviewStore(tmp_path / "review.db", create=False) as store:
        items, _ = store.list()
    (item,) = items
    assert item.trace_id == trace_id
    assert item.service_name == "zero-code-agent"
    assert item.state == pb.REVIEW_STATE_OPEN
    assert item.plan.replay_class == pb.REPLAY_CLASS_REVIEW
    assert [(d.step.tool, d.step.call_id, pb.Decision.Name(d.decision)) for d in item.plan.steps] == [
        ("get_customer", "call-read-1", "DECISION_REPLAY"),
        ("invoice.create", "call-write-1", "DECISION_REVIEW"),
    ]
    assert item.plan.steps[1].step.idempotency_key == "inv-17"


@pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrument is not installed (the `test` extra has it)")
def test_zero_code_review_classes_setting_keeps_review_traces_out(tmp_path):
    result = run_agent(tmp_path, OTEL_TRACEFENCE_REVIEW_CLASSES="static")
    assert result.returncode == 0, result.stderr
    spans = console_spans(result.stdout)
    assert len(spans) == 3
    assert {span["attributes"]["tracefence.replay.class"] for span in spans} == {"review"}  # still annotated
    with SQLiteReviewStore(tmp_path / "review.db", create=False) as store:
        assert store.list() == ([], "")  # but only static traces are queued


def test_exporter_in_process_holds_a_trace_across_batches(tmp_path):
    inner = InMemorySpanExporter()
    store = SQLiteReviewStore(tmp_path / "review.db")
    exporter = TraceFenceSpanExporter(inner, review_sink=store)
    provider = TracerProvider(resource=Resource.create({"service.name": "in-process"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # one span per export call
    tracer = provider.get_tracer("t")
    root = tracer.start_span("invoke_agent a")
    with trace.use_span(root, end_on_exit=False):
        try:
            with tool_call("invoice.create", effect="write", idempotency_key="inv-1", arguments={"n": 1}, tracer_provider=provider):
                raise TimeoutError("slow")
        except TimeoutError:
            pass
    assert inner.get_finished_spans() == ()  # held: its root has not arrived
    root.end()
    spans = {s.name: s for s in inner.get_finished_spans()}
    assert set(spans) == {"invoke_agent a", "execute_tool invoice.create"}
    assert spans["execute_tool invoice.create"].attributes["tracefence.step.decision"] == "review"
    assert {s.attributes["tracefence.replay.class"] for s in spans.values()} == {"review"}
    (item,) = store.list()[0]
    assert item.service_name == "in-process"

    # force_flush hands on a held trace as partial; shutdown closes the store.
    open_root = tracer.start_span("invoke_agent b")
    with trace.use_span(open_root, end_on_exit=False):
        with tool_call("lookup", effect="read", tracer_provider=provider):
            pass
    assert exporter.force_flush() is True
    (lookup,) = [s for s in inner.get_finished_spans() if s.name == "execute_tool lookup"]
    assert lookup.attributes["tracefence.trace.partial"] is True
    assert lookup.attributes["tracefence.replay.class"] == "dynamic"
    provider.shutdown()
    assert inner.export([lookup]) is SpanExportResult.FAILURE  # the inner exporter was shut down
    with pytest.raises(ReviewStoreError, match="closed"):
        store.list()


def test_bad_settings_never_stop_zero_code_tracing(monkeypatch, tmp_path, caplog):
    """Built from the environment by opentelemetry-instrument, the exporter degrades instead of failing the setup."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULES", "read_*=read")  # not JSON
    monkeypatch.setenv("OTEL_TRACEFENCE_EXPORTER", "bogus")
    monkeypatch.setenv("OTEL_TRACEFENCE_REVIEW_CLASSES", "review,static")
    exporter = TraceFenceSpanExporter()  # no exception: the bad setting's default, OTLP as the inner exporter
    assert exporter.config.tool_rules == [] and exporter.config.review_db == "tracefence-review.db"
    assert exporter.config.review_classes == ["review", "static"]  # the good settings are kept
    assert os.environ["OTEL_TRACEFENCE_TOOL_RULES"] == "read_*=read"  # and the environment is left as it was
    exporter.shutdown()
    monkeypatch.delenv("OTEL_TRACEFENCE_TOOL_RULES")
    monkeypatch.setenv("OTEL_TRACEFENCE_REVIEW_DB", str(tmp_path / "missing-dir" / "review.db"))
    inner = InMemorySpanExporter()
    exporter = TraceFenceSpanExporter(inner)  # the review database cannot be opened: planned without a queue
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("agent").start_as_current_span("invoke_agent a"):
        with tool_call("read_file", effect="read", tracer_provider=provider):
            pass
    provider.shutdown()
    assert {s.attributes["tracefence.replay.class"] for s in inner.get_finished_spans()} == {"dynamic"}
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "using the default for tool_rules, the other settings as given" in messages
    assert "exporting through OTLP instead" in messages
    assert "cannot open the review database" in messages
