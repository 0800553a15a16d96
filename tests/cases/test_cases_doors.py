"""The three-door check: every example case gives the same plan through every door.

For each case in ``../shared/cases`` (``SHARED_CASES``) and ``tests/cases``:

(a) ``tracefence plan FILE`` with no flags gives the expected plan (``NAME.expected.json``);
(b) the span processor, with default settings, fed the case's spans rebuilt as SDK
    ``ReadableSpan`` objects to ``on_end`` in end-time order, as the SDK delivers them
    (with and without the ``on_start`` calls), annotates every span of each trace with the
    CLI's class and each tool span with the CLI's decision for its step;
(c) a real ``tracefence serve`` (in process, the SDK's OTLP/gRPC exporter as client, a
    recording upstream) does the same.

Rows (CSV, NDJSON, JSON rows) only go through the CLI: the other doors take spans.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from case_spans import feed, find_cases, is_otlp_case, readable_spans
from service_helpers import separate_runs, service_config
from conftest import ROOT, SHARED_CASES
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.service.server import TraceFenceService

CLASS = "tracefence.replay.class"
DECISION = "tracefence.step.decision"


ALL_CASES = find_cases(SHARED_CASES, "shared") + find_cases(ROOT / "tests" / "cases", "project")
OTLP_CASES = [case for case in ALL_CASES if is_otlp_case(case[1])]


def _params(cases: Iterable[tuple[str, Path, Path]]) -> list[Any]:
    return [pytest.param(path, expected, id=case_id) for case_id, path, expected in cases]


def test_the_shared_cases_are_here_and_some_are_otlp():
    if (ROOT.parent / "shared").is_dir():
        assert len(find_cases(SHARED_CASES, "shared")) >= 8
        assert len([c for c in OTLP_CASES if c[0].startswith("shared/")]) >= 3


@lru_cache(maxsize=None)
def _cli(path: Path) -> subprocess.CompletedProcess:
    """``tracefence plan FILE``, no flags (once per file: all three doors compare to it)."""
    return subprocess.run([sys.executable, "-m", "otel_tracefence", "plan", str(path)], capture_output=True, text=True, timeout=120)


def _cli_plans(path: Path) -> dict[str, dict[str, Any]]:
    """The CLI's plans by trace id; fails (not skips) when the CLI rejects the file: the doors then have nothing to agree with."""
    proc = _cli(path)
    assert proc.returncode == 0, f"the CLI rejects {path.name} (exit {proc.returncode}), so no door can agree with it: {proc.stderr.strip()}"
    return {p["traceId"]: p for p in map(json.loads, proc.stdout.splitlines())}


def _class_value(plan: dict[str, Any]) -> str | None:
    name = plan["replayClass"]
    return name


def _disagreements(door: str, spans: list[tuple[str, str, str, dict[str, Any]]], plans: dict[str, dict[str, Any]]) -> list[str]:
    """``spans``: (trace id, span id, name, attributes) as a door handed them on. Every span of a trace
    must carry the CLI's class (none for a trace without tool steps); every tool span the CLI's decision
    for its step; no other span a step decision."""
    problems: list[str] = []
    decisions = {
        step["step"]["spanId"]: step["decision"]
        for plan in plans.values()
        for step in plan["steps"]
        if step["step"].get("spanId")
    }
    seen_traces = {trace_id for trace_id, _, _, _ in spans}
    for trace_id in plans:
        if trace_id not in seen_traces:
            problems.append(f"{door}: trace {trace_id}: no span handed on")
    for trace_id, span_id, name, attributes in spans:
        plan = plans.get(trace_id)
        if plan is None:
            problems.append(f"{door}: span {span_id} ({name}): trace {trace_id} is not in the CLI's output")
            continue
        want, got = _class_value(plan), attributes.get(CLASS)
        if got != want:
            problems.append(f"{door}: trace {trace_id} span {span_id} ({name}): class {got!r}, the CLI says {want!r}")
        want_decision, got_decision = decisions.get(span_id), attributes.get(DECISION)
        if got_decision != want_decision:
            problems.append(f"{door}: span {span_id} ({name}): decision {got_decision!r}, the CLI says {want_decision!r}")
    return problems


# -- (a) the CLI ---------------------------------------------------------------------------------


@pytest.mark.parametrize("input_path,expected_path", _params(ALL_CASES))
def test_cli_door_gives_the_expected_plan(input_path: Path, expected_path: Path):
    expected = json.loads(expected_path.read_text())
    proc = _cli(input_path)
    if "error" in expected:
        assert proc.returncode == expected["exit_code"], proc.stderr
        assert proc.stdout == ""
        return
    assert proc.returncode == 0, proc.stderr
    plans = _cli_plans(input_path)
    assert sorted(plans) == sorted(expected)
    for trace_id, want in expected.items():
        plan = plans[trace_id]
        got = {s["step"]["callId"]: s["decision"] for s in plan["steps"]}
        assert _class_value(plan) == want["class"], trace_id
        if "n_steps" in want:  # as tests/cases/test_cases.py: the steps listed, and how many there are in all
            assert {call: got.get(call) for call in want.get("steps", {})} == want.get("steps", {}), trace_id  # a case may list no step (only n_steps)
            assert len(plan["steps"]) == want["n_steps"], trace_id
        else:
            assert got == want["steps"], trace_id


# -- (b) the span processor ------------------------------------------------------------------------


@pytest.mark.parametrize("starts", [False, True], ids=["ends", "starts-and-ends"])
@pytest.mark.parametrize("input_path,expected_path", _params(OTLP_CASES))
def test_processor_door_agrees_with_the_cli(input_path: Path, expected_path: Path, starts: bool):
    """``ends``: ``on_end`` in end-time order, then a flush (nothing says a trace is complete before its
    wait runs out). ``starts-and-ends``: also ``on_start`` at each start time, as the SDK calls it, so the
    processor decides each trace when its last open span ends, without a flush."""
    plans = _cli_plans(input_path)
    exporter = InMemorySpanExporter()
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=None)  # default settings otherwise
    try:
        spans = readable_spans(input_path)
        feed(processor, spans, starts=starts)
        rooted = {s.context.trace_id for s in spans if s.parent is None or s.parent.is_remote}
        if starts and rooted == {s.context.trace_id for s in spans}:
            assert len(exporter.get_finished_spans()) == len(spans), "every trace decided at its last span's end"
        processor.force_flush()
        out = [
            (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"), s.name, dict(s.attributes or {}))
            for s in exporter.get_finished_spans()
        ]
    finally:
        processor.shutdown()
    assert len(out) == len(spans)
    assert _disagreements("processor", out, plans) == []


# -- (c) the service ---------------------------------------------------------------------------------


@pytest.mark.parametrize("input_path,expected_path", _params(OTLP_CASES))
def test_service_door_agrees_with_the_cli(input_path: Path, expected_path: Path, upstream, tmp_path):
    plans = _cli_plans(input_path)
    service = TraceFenceService(separate_runs(service_config(upstream, tmp_path / "r.db")))
    service.start()
    client = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{service.port}", insecure=True, timeout=10)
    try:
        spans = readable_spans(input_path)
        assert client.export(spans).name == "SUCCESS"  # one Export call, as a BatchSpanProcessor sends them
        received = upstream.wait_spans(len(spans), timeout=15)
    finally:
        client.shutdown()
        service.stop(grace_s=0)
    out = [(r.trace_id, r.span_id, r.name, r.tf) for r in received]
    assert len(out) == len(spans)
    assert _disagreements("service", out, plans) == []
