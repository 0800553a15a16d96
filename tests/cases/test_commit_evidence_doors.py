"""Commit on evidence through all three doors (docs/DECISIONS.md 400-403): variants of the shared cases
openai_agents_run_cancelled_mid_write_no_output and openllmetry_langchain_handled_tool_error_span_unset, written as
OTLP/JSON files, give their exact plan through ``tracefence plan``, and the span processor and ``tracefence serve``
hand every span on with the CLI's class and decisions."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from case_spans import feed, readable_spans
from service_helpers import separate_runs, service_config
from tests.cases.test_cases_doors import _class_value, _cli_plans, _disagreements
from tests.planner.test_commit_evidence import (
    TEMPLATES, TRACE, document, genai, openinference, openllmetry, root, tool_message, vercel,
)
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.service.server import TraceFenceService

READ_OK = {"id": "X-1", "state": "open"}
UNRECORDED = ["write_outcome_unrecorded", "result_not_recorded"]

VARIANTS = {
    # the run cancelled mid-write, OpenInference: no output, the read before it has one
    "cancelled_write_openinference": (
        [openinference("b1" * 8, "get_vehicle", "read", READ_OK), openinference("b2" * 8, "schedule_tow", "write")],
        "review", [("get_vehicle", "replay", ["declared_read"]), ("schedule_tow", "review", UNRECORDED)]),
    # the same with the Vercel AI SDK: a payout without a result beside one with
    "cancelled_write_vercel": (
        [vercel("b1" * 8, "getLedger", "read", READ_OK), vercel("b2" * 8, "sendPayout", "write")],
        "review", [("getLedger", "replay", ["declared_read"]), ("sendPayout", "review", UNRECORDED)]),
    # content capture off: nothing carries a result, the write stays static
    "capture_off_openinference": (
        [openinference("b1" * 8, "get_vehicle", "read"), openinference("b2" * 8, "schedule_tow", "write")],
        "static", [("get_vehicle", "replay", ["declared_read"]), ("schedule_tow", "skip", ["write_committed", "result_not_recorded"])]),
    # LangChain's handled tool error under OpenLLMetry, as a LangGraph Command
    "toolmessage_error_in_command": (
        [openllmetry("b1" * 8, "dispatch_pallet", "write", {"output": {"update": {"messages": [tool_message("error")]}}}),
         openllmetry("b2" * 8, "post_notice", "write", {"output": tool_message("success")})],
        "review", [("dispatch_pallet", "review", ["write_error", "error_in_result"]), ("post_notice", "skip", ["write_committed"])]),
    # the OpenAI Agents SDK's failure_error_function text, as a GenAI result
    "openai_agents_error_text": (
        [genai("b1" * 8, "book_carrier", "write", TEMPLATES["openai_agents_default_error"])],
        "review", [("book_carrier", "review", ["write_error", "error_template_in_result"])]),
    # a framework status attribute saying the call failed
    "framework_status_attribute": (
        [openllmetry("b1" * 8, "dispatch_pallet", "write", {"output": tool_message("success")}, **{"crewai.tool.status": "ERROR"})],
        "review", [("dispatch_pallet", "review", ["unrecognized_failure_evidence"])]),
}


def trace_of(name: str) -> str:
    return format(list(VARIANTS).index(name) + 1, "02x") * 16


@pytest.fixture(scope="module")
def variant_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("commit_evidence")
    files = {}
    for name, (spans, _, _) in VARIANTS.items():
        path = folder / f"{name}.otlp.json"
        path.write_text(document(root(), *spans).replace(TRACE, trace_of(name)))  # a trace id per variant
        files[name] = path
    return files


@pytest.mark.parametrize("name", list(VARIANTS))
def test_cli_gives_the_exact_plan(name: str, variant_files: dict[str, Path]) -> None:
    _, cls, steps = VARIANTS[name]
    plan = _cli_plans(variant_files[name])[trace_of(name)]
    assert _class_value(plan) == cls
    assert [(s["step"]["tool"], s["decision"], s["reasons"]) for s in plan["steps"]] == steps


@pytest.mark.parametrize("name", list(VARIANTS))
def test_processor_agrees_with_the_cli(name: str, variant_files: dict[str, Path]) -> None:
    path = variant_files[name]
    plans = _cli_plans(path)
    exporter = InMemorySpanExporter()
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=None)
    try:
        spans = readable_spans(path)
        feed(processor, spans, starts=True)
        processor.force_flush()
        out = [(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"), s.name, dict(s.attributes or {})) for s in exporter.get_finished_spans()]
    finally:
        processor.shutdown()
    assert len(out) == len(spans)
    assert _disagreements("processor", out, plans) == []


def test_service_agrees_with_the_cli(variant_files: dict[str, Path], upstream, tmp_path: Path) -> None:
    service = TraceFenceService(separate_runs(service_config(upstream, tmp_path / "r.db")))
    service.start()
    client = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{service.port}", insecure=True, timeout=10)
    problems: list[str] = []
    try:
        total = 0
        for name, path in variant_files.items():
            spans = readable_spans(path)
            # a trace per variant: one export each, waited for before the next
            assert client.export(spans).name == "SUCCESS"
            total += len(spans)
            received = upstream.wait_spans(total, timeout=15)
            out = [(r.trace_id, r.span_id, r.name, r.tf) for r in received[total - len(spans):]]
            problems += [f"{name}: {p}" for p in _disagreements("service", out, _cli_plans(path))]
    finally:
        client.shutdown()
        service.stop(grace_s=0)
    assert problems == []
