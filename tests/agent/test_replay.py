"""The replay guard (issue 11, seed 000): each mode against each class, every answer of
``on_call``, injection byte for byte, ``wrap`` on sync and async functions, plans from
files and from the review store, the seed's own pager example, and a real pydantic-ai
replay in which the wrapped write function is called 0 times."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import Effect, ReplayClass, ToolStatus, ToolStep, TracePlan
from otel_tracefence.normalize.tokens import text_tokens, value_tokens
from otel_tracefence.normalize.values import arguments_from_value
from otel_tracefence.planner import plan_trace
from otel_tracefence.core.redact import Redaction
from otel_tracefence.agent.replay import (
    Execute,
    Inject,
    NonReplayableTraceError,
    ReplayDivergedError,
    ReplayGuard,
    ReplayMode,
    ReplaySummary,
    StepRef,
    assert_dynamically_replayable,
    assert_replayable,
)
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.core.schema import plan_to_proto
from recorded_traces import SEED_PAGER, record

from conftest import SHARED_CASES as CASES  # ../shared/cases beside the checkout, or $TRACEFENCE_CASES
LIMITS = TraceFenceConfig().limits
READ, WRITE = Effect.READ, Effect.WRITE
OK, TIMEOUT = ToolStatus.OK, ToolStatus.TIMEOUT


def step(call_id, tool, effect=READ, status=OK, *, arguments=None, result=None, stable=True, at=0):
    """A step as the normalizer gives it (token hashes too); ``result`` is the recorded text (hashed), kept as the raw value."""
    fields = {}
    if arguments is not None:
        canonical = arguments_from_value(arguments, LIMITS)
        fields.update(arguments_sha256=canonical.sha256, arguments_json=canonical.json, arguments_unavailable=None, argument_tokens=value_tokens(arguments, 64))
    if result is not None:
        fields.update(result_recorded=True, result_sha256=hashlib.sha256(result.encode()).hexdigest(), result_value=result, result_tokens=text_tokens(result, 64))
    return ToolStep(trace_id="t1", call_id=call_id, tool=tool, effect=effect, status=status, result_stable=stable, start_time_unix_nano=at or int(call_id[1:]), **fields)


def plan_of(*steps) -> TracePlan:
    return plan_trace("t1", steps)


LOOKUP = step("c1", "customer.lookup", arguments={"customer": "acme"}, result='{"id": "cus_4f9a21"}')
INVOICE = step("c2", "invoice.create", WRITE, arguments={"customer": "cus_4f9a21", "amount_cents": 1250}, result='{"invoice":  "in_1"}')
INVOICE_UNRECORDED = step("c2", "invoice.create", WRITE, arguments={"customer": "cus_4f9a21", "amount_cents": 1250})
INVOICE_TIMEOUT = step("c2", "invoice.create", WRITE, TIMEOUT, arguments={"customer": "cus_4f9a21", "amount_cents": 1250})
NOTIFY = step("c3", "email.send", WRITE, arguments={"to": "ops"}, result='"sent"')

DYNAMIC_PLAN = plan_of(LOOKUP, step("c2", "read_file", arguments={"path": "a"}))
INJECTED_PLAN = plan_of(LOOKUP, INVOICE, NOTIFY)
STATIC_PLAN = plan_of(LOOKUP, INVOICE_UNRECORDED, NOTIFY)
REVIEW_PLAN = plan_of(LOOKUP, INVOICE_TIMEOUT, NOTIFY)


def test_the_fixture_plans_have_the_classes_they_stand_for():
    assert [p.replay_class for p in (DYNAMIC_PLAN, INJECTED_PLAN, STATIC_PLAN, REVIEW_PLAN)] == [
        ReplayClass.DYNAMIC, ReplayClass.INJECTED, ReplayClass.STATIC, ReplayClass.REVIEW
    ]


# -- each mode against each class ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["dynamic", "injected", ReplayMode.DYNAMIC, ReplayMode.INJECTED])
def test_class_dynamic_passes_both_modes(mode):
    assert assert_replayable(DYNAMIC_PLAN, mode) is True


def test_a_plan_without_tool_steps_passes_both_modes():
    empty = plan_trace("t0", [])
    assert assert_replayable(empty, "dynamic") is assert_replayable(empty, "injected") is True


def test_class_injected_refuses_dynamic_at_its_first_write_and_lists_the_other():
    with pytest.raises(NonReplayableTraceError) as caught:
        assert_dynamically_replayable(INJECTED_PLAN)
    error = caught.value
    assert (error.index, error.call_id, error.tool, error.decision, error.reasons) == (2, "c2", "invoice.create", "skip", ("write_committed", "consumes_result_of"))
    assert error.mode is ReplayMode.DYNAMIC and error.trace_id == "t1"
    assert error.others == (StepRef(3, "c3", "email.send", "skip", ("write_committed",)),)
    assert str(error) == (
        "dynamic replay refused: step 2: tool 'invoice.create' (call c2) is a committed write (write_committed, "
        "consumes_result_of): re-execution would commit a second side effect. Use static inspection, or injected "
        "replay with the recorded result of call c2. 1 other step(s) also break dynamic replay: step 3 (c3) "
        "'email.send' [skip: write_committed]."
    )


def test_class_injected_passes_injected_mode():
    assert assert_replayable(INJECTED_PLAN, "injected") is True


@pytest.mark.parametrize("mode", ["dynamic", "injected"])
def test_class_static_refuses_both_modes_at_the_unrecorded_write(mode):
    with pytest.raises(NonReplayableTraceError) as caught:
        assert_replayable(STATIC_PLAN, mode)
    error = caught.value
    assert (error.index, error.call_id, error.tool, error.decision) == (2, "c2", "invoice.create", "skip")
    assert error.reasons == ("write_committed", "result_not_recorded", "consumes_result_of")
    assert "whose result was not recorded" in str(error) and str(error).endswith(
        "Use static inspection of the recorded steps." + (" 1 other step(s) also break dynamic replay: step 3 (c3) 'email.send' [skip: write_committed]." if mode == "dynamic" else "")
    )
    assert error.others == ((StepRef(3, "c3", "email.send", "skip", ("write_committed",)),) if mode == "dynamic" else ())


@pytest.mark.parametrize("mode", ["dynamic", "injected"])
def test_class_review_refuses_both_modes_at_the_held_step(mode):
    with pytest.raises(NonReplayableTraceError) as caught:
        assert_replayable(REVIEW_PLAN, mode)
    error = caught.value
    assert (error.index, error.call_id, error.tool, error.decision, error.reasons) == (2, "c2", "invoice.create", "review", ("write_timeout", "consumes_result_of"))
    assert str(error).startswith(
        f"{mode} replay refused: step 2: tool 'invoice.create' (call c2) is held for review (write_timeout, consumes_result_of): "
        "the trace cannot show what this call did to the world. Reconcile it with the owning system; until then use "
        "static inspection of the recorded steps. Neither dynamic nor injected replay is allowed."
    )


def test_unstable_read_refuses_dynamic_and_is_injected():
    plan = plan_of(step("c1", "clock.now", arguments={}, result='"2026-11-13T10:00:00Z"', stable=False))
    assert plan.replay_class is ReplayClass.INJECTED
    with pytest.raises(NonReplayableTraceError, match=r"step 1: tool 'clock.now' \(call c1\) returns results that differ between executions \(unstable_result\)"):
        assert_dynamically_replayable(plan)
    guard = ReplayGuard(plan)
    assert guard.on_call("clock.now", {}) == Inject(StepRef(1, "c1", "clock.now", "skip", ("unstable_result",)), '"2026-11-13T10:00:00Z"')


def test_unknown_mode_and_non_plans_are_refused():
    with pytest.raises(ValueError, match="mode must be 'dynamic' or 'injected', not 'live'"):
        assert_replayable(DYNAMIC_PLAN, "live")
    with pytest.raises(TypeError, match="not a plan: dict"):
        assert_replayable({}, "dynamic")


# -- the seed's own example -------------------------------------------------------------------------


def test_seed_pager_trace_is_refused_for_dynamic_replay_naming_step_7s_tool():
    plan = record(SEED_PAGER)
    with pytest.raises(NonReplayableTraceError) as caught:
        assert_dynamically_replayable(plan)
    error = caught.value
    assert (error.index, error.tool, error.call_id) == (7, "pager.trigger", "c7")
    assert str(error).startswith("dynamic replay refused: step 7: tool 'pager.trigger' (call c7) is a committed write")
    assert "Its result was used by a later call (c8)" in str(error)
    assert [o.index for o in error.others] == [8]


def test_seed_pager_trace_with_its_result_recorded_passes_injected_replay():
    plan = record(SEED_PAGER)
    results = {"c7": '{"status": "paged", "id": "pg_8812"}', "c8": '{"ok": true}'}
    guard = ReplayGuard(plan, results, mode="injected")
    answers = [guard.on_call(tool, arguments) for tool, _, arguments, _ in SEED_PAGER]
    assert [type(a).__name__ for a in answers] == ["Execute"] * 6 + ["Inject", "Inject"]
    assert answers[6].result == '{"status": "paged", "id": "pg_8812"}' and answers[6].value() == {"status": "paged", "id": "pg_8812"}
    assert guard.summary() == ReplaySummary("%s" % plan.trace_id, ReplayMode.INJECTED, ("c1", "c2", "c3", "c4", "c5", "c6"), ("c7", "c8"), (), False, ())


def test_seed_pager_trace_without_its_result_is_refused_for_injected_replay_too():
    calls = [list(c) for c in SEED_PAGER]
    calls[6][3] = None
    with pytest.raises(NonReplayableTraceError) as caught:
        ReplayGuard(record(calls), mode="injected")
    assert (caught.value.index, caught.value.tool) == (7, "pager.trigger")
    assert "A later call (c8) used an id no recorded value explains: it may have come from this result." in str(caught.value)


def test_shared_pager_cases_from_their_files():
    if not CASES.is_dir():
        pytest.skip(f"no shared cases at {CASES} (set TRACEFENCE_CASES)")
    with pytest.raises(NonReplayableTraceError) as caught:
        ReplayGuard.from_file(CASES / "pager_static.otlp.json")
    assert (caught.value.index, caught.value.tool, caught.value.reasons) == (3, "pager.trigger", ("write_committed", "result_not_recorded", "unrecorded_result_may_be_consumed"))
    with pytest.raises(NonReplayableTraceError, match=r"^dynamic replay refused: step 3: tool 'pager.trigger'"):
        ReplayGuard.from_file(CASES / "pager_injected.otlp.json", mode="dynamic")
    guard = ReplayGuard.from_file(CASES / "pager_injected.otlp.json")
    assert isinstance(guard.on_call("read_file", {"path": "runbooks/db.md"}), Execute)
    assert isinstance(guard.on_call("query_metrics", '{"window": "5m", "metric": "db.p99"}'), Execute)  # key order is no difference
    trigger = guard.on_call("pager.trigger", {"service": "db", "severity": "high"})
    assert trigger.result == '{"status": "paged", "id": "pg_8812"}'  # the bytes the span recorded
    assert guard.on_call("pager.annotate", {"page": "pg_8812", "note": "p99 above 900ms"}).result == '{"ok": true}'


# -- on_call: every outcome -------------------------------------------------------------------------


def test_injection_returns_the_recorded_bytes_even_with_odd_spacing(tmp_path):
    recorded = '{ "invoice" :  "in_1",\n  "note": "caf\u00e9" }'
    rows = tmp_path / "rows.ndjson"
    rows.write_text(
        json.dumps({"trace_id": "t9", "call_id": "c1", "tool": "invoice.create", "effect": "write", "status": "ok", "arguments": {"n": 1}, "result": recorded}) + "\n",
        encoding="utf-8",
    )
    answer = ReplayGuard.from_file(rows).on_call("invoice.create", {"n": 1})
    assert isinstance(answer, Inject) and answer.result == recorded
    assert answer.value() == {"invoice": "in_1", "note": "caf\u00e9"}


def test_divergence_by_tool():
    guard = ReplayGuard(INJECTED_PLAN)
    guard.on_call("customer.lookup", {"customer": "acme"})
    with pytest.raises(ReplayDivergedError) as caught:
        guard.on_call("email.send", {"to": "ops"})
    error = caught.value
    assert (error.why, error.call_number, error.tool, error.expected.call_id) == ("tool", 2, "email.send", "c2")
    assert str(error) == "replay diverged at call 2: the agent called 'email.send', the trace has 'invoice.create' there (step 2, call c2)"


def test_divergence_by_arguments():
    guard = ReplayGuard(INJECTED_PLAN)
    with pytest.raises(ReplayDivergedError) as caught:
        guard.on_call("customer.lookup", {"customer": "globex"})
    assert (caught.value.why, caught.value.call_number, caught.value.expected.index) == ("arguments", 1, 1)
    assert str(caught.value).startswith("replay diverged at call 1: 'customer.lookup' was called with other arguments than step 1 (call c1) recorded")


def test_divergence_by_count_and_the_guard_stays_halted():
    guard = ReplayGuard(DYNAMIC_PLAN)
    guard.on_call("customer.lookup", {"customer": "acme"})
    guard.on_call("read_file", {"path": "a"})
    with pytest.raises(ReplayDivergedError) as caught:
        guard.on_call("read_file", {"path": "a"})
    assert caught.value.why == "count" and caught.value.expected is None
    assert str(caught.value) == "replay diverged at call 3: 'read_file' is one call too many; the trace has 2 tool call(s)"
    with pytest.raises(ReplayDivergedError):
        guard.on_call("customer.lookup", {"customer": "acme"})
    assert guard.summary().diverged is True and guard.summary().executed == ("c1", "c2")


def test_execute_for_a_read_and_inject_for_a_write():
    guard = ReplayGuard(INJECTED_PLAN)
    assert guard.on_call("customer.lookup", {"customer": "acme"}) == Execute(StepRef(1, "c1", "customer.lookup", "replay", ("declared_read", "result_consumed_by")))
    assert guard.on_call("invoice.create", {"amount_cents": 1250, "customer": "cus_4f9a21"}).result == '{"invoice":  "in_1"}'
    assert guard.on_call("email.send", '{"to": "ops"}').result == '"sent"'
    assert str(guard.summary()) == "replay of t1 (injected): executed 1, injected 2, refused 0; complete"


def test_a_step_in_review_is_refused_at_its_call_when_not_checked_first():
    guard = ReplayGuard(REVIEW_PLAN, check=False)
    assert isinstance(guard.on_call("customer.lookup", {"customer": "acme"}), Execute)
    with pytest.raises(NonReplayableTraceError) as caught:
        guard.on_call("invoice.create", {"customer": "cus_4f9a21", "amount_cents": 1250})
    assert (caught.value.index, caught.value.decision, caught.value.mode) == (2, "review", None)
    assert str(caught.value).startswith("step 2: tool 'invoice.create' (call c2) is held for review (write_timeout")
    summary = guard.summary()
    assert (summary.executed, summary.injected, summary.refused, summary.remaining) == (("c1",), (), ("c2",), ("c2", "c3"))
    with pytest.raises(NonReplayableTraceError):
        guard.on_call("email.send", {"to": "ops"})


def test_an_injection_whose_result_was_not_recorded_is_refused():
    guard = ReplayGuard(STATIC_PLAN, check=False)
    guard.on_call("customer.lookup", {"customer": "acme"})
    with pytest.raises(NonReplayableTraceError, match=r"^step 2: tool 'invoice.create' \(call c2\) is a committed write whose result was not recorded"):
        guard.on_call("invoice.create", {"customer": "cus_4f9a21", "amount_cents": 1250})


def test_dynamic_mode_refuses_a_write_at_its_call():
    guard = ReplayGuard(INJECTED_PLAN, mode="dynamic", check=False)
    guard.on_call("customer.lookup", {"customer": "acme"})
    with pytest.raises(NonReplayableTraceError, match="is a committed write"):
        guard.on_call("invoice.create", {"customer": "cus_4f9a21", "amount_cents": 1250})


def test_a_result_recorded_as_a_hash_only_is_never_injected():
    """Hashes only (store_raw_values off): the plan knows a result was recorded, not its bytes."""
    hashed = plan_of(LOOKUP, replace(INVOICE, result_value=None), NOTIFY)
    guard = ReplayGuard(hashed)
    guard.on_call("customer.lookup", {"customer": "acme"})
    with pytest.raises(NonReplayableTraceError, match="recorded a result, but this guard was not given it"):
        guard.on_call("invoice.create", {"customer": "cus_4f9a21", "amount_cents": 1250})
    given = ReplayGuard(hashed, {"c2": '{"invoice":  "in_1"}'})  # the bytes, from the trace itself
    given.on_call("customer.lookup", {"customer": "acme"})
    assert given.on_call("invoice.create", {"customer": "cus_4f9a21", "amount_cents": 1250}).result == '{"invoice":  "in_1"}'


def test_a_result_that_is_not_the_recorded_bytes_is_never_injected():
    guard = ReplayGuard(INJECTED_PLAN, {"c2": '{"invoice":"in_1"}'})  # same value, other bytes
    guard.on_call("customer.lookup", {"customer": "acme"})
    with pytest.raises(NonReplayableTraceError, match="the result given is not the recorded one"):
        guard.on_call("invoice.create", {"customer": "cus_4f9a21", "amount_cents": 1250})


# -- wrap ------------------------------------------------------------------------------------------


def test_wrap_a_sync_function_never_calls_an_injected_write():
    guard = ReplayGuard(INJECTED_PLAN)
    calls = []

    def lookup(customer: str) -> dict:
        calls.append(("lookup", customer))
        return {"id": "cus_4f9a21"}

    @guard.wrap(tool="invoice.create", decode=Inject.value)
    def create(customer: str, amount_cents: int) -> dict:
        calls.append(("create", customer))
        raise AssertionError("a write was re-fired")

    lookup = guard.wrap(lookup, tool="customer.lookup")
    assert lookup("acme") == {"id": "cus_4f9a21"}
    assert create("cus_4f9a21", amount_cents=1250) == {"invoice": "in_1"}
    assert calls == [("lookup", "acme")]
    assert create.__name__ == "create" and list(inspect.signature(create).parameters) == ["customer", "amount_cents"]


def test_wrap_an_async_function_and_ignore_a_context_parameter():
    guard = ReplayGuard(INJECTED_PLAN)
    calls = []

    async def lookup(ctx, customer: str) -> dict:
        calls.append("lookup")
        return {"id": "cus_4f9a21"}

    async def create(ctx, customer: str, amount_cents: int) -> dict:
        calls.append("create")
        return {}

    wrapped_lookup = guard.wrap(lookup, tool="customer.lookup", ignore=("ctx",))
    wrapped_create = guard.wrap(create, tool="invoice.create", ignore=("ctx",))
    assert asyncio.iscoroutinefunction(wrapped_create)

    async def run():
        return await wrapped_lookup(object(), "acme"), await wrapped_create(object(), customer="cus_4f9a21", amount_cents=1250)

    assert asyncio.run(run()) == ({"id": "cus_4f9a21"}, '{"invoice":  "in_1"}')
    assert calls == ["lookup"]


def test_wrap_raises_the_guards_errors_to_the_caller():
    guard = ReplayGuard(INJECTED_PLAN)
    wrapped = guard.wrap(lambda customer: None, tool="customer.lookup")
    with pytest.raises(ReplayDivergedError):
        wrapped("globex")


# -- the review store ------------------------------------------------------------------------------


def test_from_review_item_with_raw_values_injects_and_without_them_refuses(tmp_path):
    raw = TraceFenceConfig(store_raw_values=True, redaction=Redaction(keys=[], card_numbers=False, bearer_tokens=False))
    plan = record(SEED_PAGER, raw)
    with SQLiteReviewStore(tmp_path / "raw.db", store_raw_values=True) as store:
        store.upsert(plan)
        item = store.get(plan.trace_id)
    guard = ReplayGuard.from_review_item(item)
    for tool, _, arguments, _ in SEED_PAGER[:6]:
        assert isinstance(guard.on_call(tool, arguments), Execute)
    assert guard.on_call("pager.trigger", {"service": "db", "severity": "high"}).result == '{"status": "paged", "id": "pg_8812"}'
    with SQLiteReviewStore(tmp_path / "hashed.db") as store:
        store.upsert(plan_to_proto(plan))
        hashed = ReplayGuard.from_review_item(store.get(plan.trace_id), check=False)
    for tool, _, arguments, _ in SEED_PAGER[:6]:
        hashed.on_call(tool, arguments)
    with pytest.raises(NonReplayableTraceError, match="recorded a result, but this guard was not given it"):
        hashed.on_call("pager.trigger", {"service": "db", "severity": "high"})


# -- a real pydantic-ai replay ---------------------------------------------------------------------


def _record_demo_conversation(path: Path, prompt: str) -> str:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from otel_tracefence import demo
    from otel_tracefence.otlp.json_writer import OtlpJsonFileSpanExporter
    from otel_tracefence.sdk import TraceFenceSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(OtlpJsonFileSpanExporter(path)), review_sink=None))
    agent = demo.build_agent()
    agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)
    agent.run_sync(prompt)
    provider.shutdown()
    (trace_id,) = demo.trace_views(path)
    return trace_id


def test_pydantic_ai_replay_never_calls_the_wrapped_write(tmp_path):
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ToolReturnPart

    from otel_tracefence import demo

    path = tmp_path / "spans.otlp.jsonl"
    trace_id = _record_demo_conversation(path, "invoice acme")
    guard = ReplayGuard.from_file(path, trace_id)
    demo.CALLS.clear()
    agent = demo.build_agent(demo.replay_model(demo.recorded_responses(demo.trace_views(path)[trace_id])), guard.wrap)
    result = agent.run_sync("invoice acme")
    assert demo.CALLS == {"customer.lookup": 1}  # invoice.create: 0 times
    summary = guard.summary()
    assert (summary.executed, summary.injected, summary.refused, summary.diverged, summary.remaining) == (("call_acme_1",), ("call_acme_2",), (), False, ())
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(r.tool_name, r.content) for r in returns] == [
        ("customer.lookup", {"customer": "acme", "id": "cus_4f9a21", "plan": "pro"}),
        ("invoice.create", '{"invoice":"in_cus_4f9a21_1250"}'),  # what the recording gave the model
    ]


def test_pydantic_ai_replay_of_the_timed_out_conversation_is_refused(tmp_path):
    pytest.importorskip("pydantic_ai")
    from otel_tracefence import demo

    path = tmp_path / "spans.otlp.jsonl"
    try:
        _record_demo_conversation(path, "invoice globex")
    except TimeoutError:
        pass
    (trace_id,) = demo.trace_views(path)
    with pytest.raises(NonReplayableTraceError) as caught:
        ReplayGuard.from_file(path, trace_id)
    assert (caught.value.index, caught.value.call_id, caught.value.tool, caught.value.reasons) == (1, "call_globex_1", "invoice.create", ("write_timeout",))


def test_make_demo_replays_from_a_clean_directory(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "otel_tracefence.demo"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # The data-flow notes as the spans carry them (the demo prints tracefence.step.* attributes).
    assert "call_acme_1            customer.lookup  replay    declared_read,result_consumed_by  related: call_acme_2" in out
    assert "call_acme_2            invoice.create   skip      write_committed,consumes_result_of  related: call_acme_1" in out
    assert "step 2 invoice.create: not called; injected the recorded result {\"invoice\":\"in_cus_4f9a21_1250\"}" in out
    assert "tool functions called: customer.lookup 1, invoice.create 0" in out
    assert "refused before any call: NonReplayableTraceError: injected replay refused: step 1: tool 'invoice.create' (call call_globex_1) is held for review (write_timeout)" in out


def test_the_readme_example_runs_from_the_checkout(monkeypatch, capsys):
    root = Path(__file__).resolve().parents[2]
    section = (root / "docs" / "replay-guard.md").read_text()
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    monkeypatch.chdir(root)
    namespace: dict = {}
    exec(compile(code, "docs/replay-guard.md", "exec"), namespace)
    assert namespace["fired"] == [] and namespace["page"] == {"status": "paged", "id": "pg_8812"}
    assert capsys.readouterr().out.splitlines() == [
        "3 pager.trigger ('write_committed', 'result_not_recorded', 'unrecorded_result_may_be_consumed')",
        "{'status': 'paged', 'id': 'pg_8812'} [] replay of 3fa9e5d702ec02e61c3dce9815228aa9 (injected): executed 2, injected 2, refused 0; complete",
    ]


@pytest.mark.parametrize("mode", ["dynamic", "injected"])
def test_a_partial_plan_is_refused_whole(mode):
    partial = plan_trace("t1", [LOOKUP], partial=True)
    with pytest.raises(NonReplayableTraceError) as caught:
        assert_replayable(partial, mode)
    error = caught.value
    assert (error.step, error.index, error.call_id, error.tool, error.others, error.mode) == (None, 0, "", "", (), ReplayMode(mode))
    assert str(error).startswith(f"{mode} replay refused: the plan of trace t1 is partial (decided before the trace was complete")
    with pytest.raises(NonReplayableTraceError):
        ReplayGuard(plan_to_proto(partial), mode=mode)
    assert isinstance(ReplayGuard(partial, mode=mode, check=False).on_call("customer.lookup", {"customer": "acme"}), Execute)


def test_window_lets_concurrent_calls_of_one_turn_arrive_in_another_order():
    """Frameworks run one model turn's tool calls concurrently; with window=2 the second can come first."""
    plan = plan_of(LOOKUP, step("c2", "read_file", arguments={"path": "a"}), NOTIFY)
    strict = ReplayGuard(plan)
    with pytest.raises(ReplayDivergedError) as caught:
        strict.on_call("read_file", {"path": "a"})
    assert (caught.value.why, caught.value.expected.call_id) == ("tool", "c1")
    guard = ReplayGuard(plan, window=2)
    assert guard.on_call("read_file", {"path": "a"}).step.call_id == "c2"
    assert guard.summary().remaining == ("c1", "c3")
    with pytest.raises(ReplayDivergedError) as caught:  # c3 is outside the window until c1 is reached
        ReplayGuard(plan, window=2).on_call("email.send", {"to": "ops"})
    assert (caught.value.why, caught.value.expected.call_id) == ("tool", "c1")
    assert guard.on_call("customer.lookup", {"customer": "acme"}).step.call_id == "c1"
    assert guard.on_call("email.send", {"to": "ops"}).result == '"sent"'
    assert guard.summary().remaining == () and guard.summary().executed == ("c2", "c1")
    with pytest.raises(ValueError, match="window must be an integer of at least 1, not 0"):
        ReplayGuard(plan, window=0)


def test_window_matches_the_step_with_the_same_arguments_first():
    plan = plan_of(step("c1", "read_file", arguments={"path": "a"}), step("c2", "read_file", arguments={"path": "b"}))
    guard = ReplayGuard(plan, window=2)
    assert guard.on_call("read_file", {"path": "b"}).step.call_id == "c2"
    with pytest.raises(ReplayDivergedError) as caught:
        guard.on_call("read_file", {"path": "c"})
    assert (caught.value.why, caught.value.expected.call_id) == ("arguments", "c1")
