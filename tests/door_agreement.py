"""One OTLP/JSON file through the three doors: ``tracefence plan`` (a subprocess), the span processor and a real
``tracefence serve``, each checked to agree with the CLI's plan as tests/cases/test_cases_doors.py checks the cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from case_spans import feed, readable_spans
from cli_helpers import run
from service_helpers import service_config
from tests.cases.test_cases_doors import _disagreements
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.service.server import TraceFenceService


def otlp_file(path: Path, *spans: dict) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]}))
    return path


def cli_plans(path: Path) -> dict[str, dict[str, Any]]:
    proc = run("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    return {p["traceId"]: p for p in map(json.loads, proc.stdout.splitlines())}


def processor_disagreements(path: Path, plans: dict[str, dict[str, Any]]) -> list[str]:
    exporter = InMemorySpanExporter()
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=None)
    try:
        feed(processor, readable_spans(path), starts=True)
        processor.force_flush()
        out = [(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"), s.name, dict(s.attributes or {})) for s in exporter.get_finished_spans()]
    finally:
        processor.shutdown()
    return _disagreements("processor", out, plans)


def service_disagreements(path: Path, plans: dict[str, dict[str, Any]], upstream: Any, tmp_path: Path) -> list[str]:
    service = TraceFenceService(service_config(upstream, tmp_path / "r.db"))
    service.start()
    client = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{service.port}", insecure=True, timeout=10)
    try:
        spans = readable_spans(path)
        assert client.export(spans).name == "SUCCESS"
        received = upstream.wait_spans(len(spans), timeout=15)
    finally:
        client.shutdown()
        service.stop(grace_s=0)
    return _disagreements("service", [(r.trace_id, r.span_id, r.name, r.tf) for r in received], plans)


def decisions(plan: dict) -> list[tuple[str, str, list[str]]]:
    """(tool, decision, reasons) of each step, in plan order, decisions in lower case without their prefix."""
    return [(s["step"]["tool"], s["decision"], s["reasons"]) for s in plan["steps"]]


def class_of(plan: dict) -> str:
    return plan["replayClass"]
