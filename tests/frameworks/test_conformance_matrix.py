"""The conformance matrix (issue 24, section 3): every installed framework x the fixed scenarios.

For each cell of ``tests/frameworks/conformance.py`` the framework runs offline inside this process
under its own instrumentation (one trace per cell), and the trace is planned through all three doors:

* ``tracefence plan`` on the spans written as OTLP/JSON (``through_the_cli``) is the plan checked
  against the cell (class; every step's tool, decision and reasons);
* the span processor (``TraceFenceSpanProcessor``, the spans fed as the SDK ends them) and
* a real ``tracefence serve`` in process (one for the module, every cell's spans in one Export)
  must write the CLI's class on every span and the CLI's decision and reasons on every tool span;
  the processor's own code path (``from_readable`` + ``plan_spans``) must give the CLI's plan.

A cell planned wrongly today is ``xfail(strict=True)`` naming its kind (A-E of issue 24); the doors
must agree on it all the same. ``docs/conformance.md`` is generated from the same table.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanContext
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from case_spans import feed
from framework_helpers import plan_of_spans
from service_helpers import RecordingUpstream, separate_runs, service_config
from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.otlp.json_writer import OtlpJsonFileSpanExporter
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.service.server import TraceFenceService
from tests.frameworks import conformance as matrix

DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
CLASS, DECISION, REASONS = "tracefence.replay.class", "tracefence.step.decision", "tracefence.step.reasons"
PARTIAL = "tracefence.trace.partial"


def _class_name(plan) -> str | None:
    """The plan's class in lower case; None for a trace planned tool-free (no class, or UNSPECIFIED)."""
    if plan.replay_class is None or plan.replay_class.name == "UNSPECIFIED":
        return None
    return plan.replay_class.name.lower()


def _steps(plan) -> tuple:
    return tuple(sorted((d.step.tool, d.decision.name.lower(), tuple(d.reasons)) for d in plan.steps))


def _disagreements(door: str, plan, spans: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """``spans``: (span id, name, attributes) as the door handed them on: every span carries the plan's
    class and partial flag (a trace planned tool-free carries neither), every tool span its step's decision and
    reasons, no other span a decision."""
    by_span = {d.step.span_id: d for d in plan.steps if d.step.span_id}
    want_class = _class_name(plan)
    problems = []
    for span_id, name, attributes in spans:
        if attributes.get(CLASS) != want_class:
            problems.append(f"{door}: {name}: class {attributes.get(CLASS)!r}, the CLI says {want_class!r}")
        if want_class is not None and bool(attributes.get(PARTIAL, False)) != plan.partial:
            problems.append(f"{door}: {name}: partial {attributes.get(PARTIAL)!r}, the CLI says {plan.partial!r}")
        decision = by_span.get(span_id)
        want = (decision.decision.name.lower(), tuple(decision.reasons)) if decision else (None, ())
        got = (attributes.get(DECISION), tuple(attributes.get(REASONS) or ()))
        if got != want:
            problems.append(f"{door}: {name}: decision {got}, the CLI says {want}")
    return problems


def _never_ended(spans: list) -> list[ReadableSpan]:
    """A stand-in for each span that ``spans`` name as a local parent but that is not among them: a span the framework
    started and never ended (Mastra's suspended step), so never exported. In the framework's own process the span
    processor saw it start (``on_start``) and holds the trace open for it."""
    ids = {s.context.span_id for s in spans}
    missing = {(s.parent.trace_id, s.parent.span_id) for s in spans if s.parent is not None and not s.parent.is_remote and s.parent.span_id not in ids}
    return [ReadableSpan(name="never ended", context=SpanContext(t, i, is_remote=False)) for t, i in sorted(missing)]


def _through_the_processor(spans: list, config) -> list[tuple[str, str, dict[str, Any]]]:
    exporter = InMemorySpanExporter()
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), config=config, review_sink=None)
    try:
        for span in _never_ended(spans):
            processor.on_start(span)  # type: ignore[arg-type] - the processor reads only the context
        feed(processor, spans, starts=False)
        processor.force_flush()
        return [(format(s.context.span_id, "016x"), s.name, dict(s.attributes or {})) for s in exporter.get_finished_spans()]
    finally:
        processor.shutdown()


def _through_the_cli(spans: list, config) -> tuple[list, list]:
    """``tracefence plan`` on the spans as OTLP/JSON: its plans, and its notices (a notice of a planned
    trace, such as a requested call it could not read, is part of the plan, not a rejection)."""
    text = io.StringIO()
    OtlpJsonFileSpanExporter(text).export(spans)
    return plan_text(text.getvalue(), "auto", config)


class Result:
    def __init__(self) -> None:
        self.spans: list = []
        self.error: str | None = None
        self.cli: list = []
        self.in_process = None
        self.doors: list[str] = []
        self.skip: str | None = None  # an isolated framework whose environment could not be made


def _frameworks_selected(request) -> list:
    """The frameworks whose cells this session runs: with ``-k`` naming cells, only theirs; every framework
    when a test of the whole table (one that reads ``results`` but is no cell's) is selected."""
    wanted = set()
    for item in request.session.items:
        if "results" not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or "cell" not in callspec.params:
            return matrix.FRAMEWORKS
        wanted.add(callspec.params["cell"].framework)
    return [f for f in matrix.FRAMEWORKS if f.key in wanted]


@pytest.fixture(scope="module")
def results(request, tmp_path_factory) -> dict[tuple[str, str], Result]:
    """Every selected installed framework's cells, run once (one framework set up at a time), then planned
    through the three doors; the service gets every cell's spans in one Export."""
    out: dict[tuple[str, str], Result] = {}
    frameworks = _frameworks_selected(request)
    isolated = [f for f in frameworks if f.isolated]
    envs_made = matrix.envs.prepare_all(isolated)  # side by side: installing is mostly waiting on the network
    for framework in frameworks:
        if not matrix.installed(framework):
            continue
        if framework.isolated:
            why = matrix.run_isolated(framework, tmp_path_factory.mktemp(framework.key))
            if why is not None:
                for c in (c for c in matrix.CELLS if c.framework == framework.key):
                    out[(c.framework, c.scenario)] = unavailable = Result()
                    unavailable.skip = f"{framework.name} cannot run on this machine: {why}"
                continue
            assert envs_made[framework.key].ok
        teardown = matrix.setup(framework.key)
        try:
            for c in (c for c in matrix.CELLS if c.framework == framework.key):
                result = out[(c.framework, c.scenario)] = Result()
                try:
                    result.spans = matrix.collect(c.framework, c.scenario)
                except matrix.CannotProduce as exc:
                    result.error = None if c.cannot else f"the runner cannot produce it: {exc}"
                except Exception as exc:  # noqa: BLE001 - one cell's failure is that cell's
                    result.error = f"{type(exc).__name__}: {exc}"
                else:
                    if c.cannot:
                        result.error = "the table says the framework cannot produce this cell, but the runner made spans"
        finally:
            teardown()
    for (framework, scenario), result in out.items():
        if not result.spans:
            continue
        config = matrix._config(framework)
        trace_ids = {s.context.trace_id for s in result.spans}
        if len(trace_ids) != 1:
            result.error = f"{len(trace_ids)} traces, not one"
            continue
        result.cli, notices = _through_the_cli(result.spans, config)
        if [n for n in notices if not n.planned]:
            result.error = f"tracefence plan rejects the spans: {notices}"
            continue
        result.in_process = plan_of_spans(result.spans, config)
        if result.cli != [result.in_process]:
            result.doors.append("the processor's code path (from_readable + plan_spans) gives another plan than the CLI")
        result.doors += _disagreements("processor", result.cli[0], _through_the_processor(result.spans, config))
    by_config: dict[str, list[Result]] = {}  # one service per configuration (most frameworks share the default)
    for (framework, _), result in out.items():
        if result.cli:
            by_config.setdefault(matrix._config(framework).model_dump_json(), []).append(result)
    for index, (config_json, planned) in enumerate(sorted(by_config.items())):
        config = type(matrix._config()).model_validate_json(config_json)
        _through_the_service(planned, config, tmp_path_factory.mktemp(f"conformance{index}"))
    return out


def _through_the_service(planned: list[Result], config, folder: Path) -> None:
    upstream = RecordingUpstream()
    upstream.start()
    service_settings = separate_runs(service_config(upstream, folder / "review.db")).model_copy(update={"tool_rules": config.tool_rules})
    service = TraceFenceService(service_settings)
    service.start()
    client = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{service.port}", insecure=True, timeout=10)
    try:
        every = [s for r in planned for s in r.spans]
        assert client.export(every).name == "SUCCESS"
        upstream.wait_spans(len(every), timeout=30)
        for result in planned:
            received = upstream.trace(result.cli[0].trace_id)
            if len(received) != len(result.spans):
                result.doors.append(f"service: {len(received)} of {len(result.spans)} spans handed on")
            result.doors += _disagreements("service", result.cli[0], [(r.span_id, r.name, r.tf) for r in received])
    finally:
        client.shutdown()
        service.stop(grace_s=0)
        upstream.stop()


def _params(check_plan: bool) -> list:
    params = []
    for c in matrix.CELLS:
        framework = matrix.FRAMEWORK_BY_KEY[c.framework]
        marks = []
        if not matrix.installed(framework):
            marks.append(pytest.mark.skip(reason=f"{framework.name} is not installed here"))
        elif c.cannot:
            marks.append(pytest.mark.skip(reason=f"{framework.name} cannot produce {c.scenario}: {c.cannot}"))
        elif check_plan and c.wrong_today:
            marks.append(pytest.mark.xfail(strict=True, reason=c.wrong_today))
        elif not check_plan and c.doors_differ:
            marks.append(pytest.mark.xfail(strict=True, reason=c.doors_differ))
        params.append(pytest.param(c, id=f"{c.framework}-{c.scenario}", marks=marks))
    return params


@pytest.mark.parametrize("cell", _params(check_plan=True))
def test_the_cell_plans_as_its_reason_says(cell: matrix.Cell, results):
    result = results[(cell.framework, cell.scenario)]
    if result.skip:
        pytest.skip(result.skip)
    assert result.error is None, result.error
    (plan,) = result.cli
    assert (_class_name(plan), _steps(plan)) == (cell.replay_class, cell.steps), cell.reason


@pytest.mark.parametrize("cell", _params(check_plan=False))
def test_the_three_doors_agree_on_the_cell(cell: matrix.Cell, results):
    result = results[(cell.framework, cell.scenario)]
    if result.skip:
        pytest.skip(result.skip)
    assert result.error is None, result.error
    assert len(result.cli) == 1
    assert result.doors == []


def test_the_cannot_cells_are_refused_by_their_runners(results):
    """A cell the table says a framework cannot produce is one its runner refuses (no silent gap)."""
    assert [key for key, r in results.items() if r.error and "cannot produce" in r.error] == []


def test_the_table_has_every_framework_and_scenario_once():
    keys = [(c.framework, c.scenario) for c in matrix.CELLS]
    assert len(keys) == len(set(keys))
    assert sorted(keys) == sorted((f.key, s) for f in matrix.FRAMEWORKS for s in matrix.SCENARIO_KEYS)
    assert all(c.reason for c in matrix.CELLS if not c.cannot)
    assert all(c.wrong_today[:2] in {"A:", "B:", "C:", "D:", "E:"} for c in matrix.CELLS if c.wrong_today)


def test_docs_conformance_md_is_current():
    missing = [f.name for f in matrix.FRAMEWORKS if not matrix.installed(f)]
    if missing:
        pytest.skip(f"docs/conformance.md is generated where every framework is installed (missing here: {', '.join(missing)})")
    assert DOCS.read_text() == matrix.markdown(), f"docs/conformance.md is stale: regenerate it with `{matrix.REGENERATE}`"
