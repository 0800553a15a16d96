"""Fixtures made by a real agent framework's own OpenTelemetry instrumentation.

pydantic-ai (pinned in pyproject.toml) runs offline with its TestModel, which calls
the tools it is told to; its instrumentation writes GenAI ``execute_tool`` and
``chat`` spans to an SDK TracerProvider, and the plan is made from those spans
through ``from_readable``, as the span processor would.
"""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("pydantic_ai")

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans


def label(**attributes: str) -> None:
    """Label the framework's current span (the execute_tool span running this tool)."""
    span = otel_trace.get_current_span()
    for key, value in attributes.items():
        span.set_attribute(f"tracefence.{key}", value)


def make_agent(call_tools: list[str]):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(TestModel(call_tools=call_tools))
    agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)

    @agent.tool_plain
    def lookup_customer(customer: str) -> str:
        label(effect="read")
        return f"customer {customer}: active"

    @agent.tool_plain
    def create_invoice(amount_cents: int) -> str:
        label(effect="write", idempotency_key="inv-17")
        return "invoice inv_8812"

    @agent.tool_plain(sequential=True)
    def send_email(to: str) -> str:
        label(effect="write")
        raise TimeoutError("the mail server stopped answering")

    @agent.tool_plain
    def fetch_weather(city: str) -> str:
        return "sunny"  # nobody labels it

    return agent, exporter


def plan_of(exporter: InMemorySpanExporter, config: TraceFenceConfig | None = None):
    spans = exporter.get_finished_spans()
    views = [from_readable(s, i) for i, s in enumerate(spans)]
    trace_ids = {v.trace_id for v in views}
    assert len(trace_ids) == 1
    (trace_id,) = trace_ids
    planned = plan_spans(trace_id, views, config or TraceFenceConfig())
    assert planned.plan.trace_id == trace_id
    return planned.plan, {d.step.call_id: d for d in planned.plan.steps}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_read_and_a_committed_write_replay_with_injection():
    agent, exporter = make_agent(["lookup_customer", "create_invoice"])
    result = agent.run_sync("bill customer a")
    assert result.output == '{"lookup_customer":"customer a: active","create_invoice":"invoice inv_8812"}'
    plan, by_id = plan_of(exporter)
    assert plan.replay_class is ReplayClass.INJECTED
    assert sorted(by_id) == ["pyd_ai_tool_call_id__create_invoice", "pyd_ai_tool_call_id__lookup_customer"]
    read, write = by_id["pyd_ai_tool_call_id__lookup_customer"], by_id["pyd_ai_tool_call_id__create_invoice"]
    assert (read.step.tool, read.step.effect, read.step.status, read.decision, read.reasons, read.related_call_ids) == (
        "lookup_customer",
        Effect.READ,
        ToolStatus.OK,
        Decision.REPLAY,
        ("declared_read",),
        (),
    )
    assert (write.step.tool, write.step.effect, write.step.effect_source, write.step.status, write.decision, write.reasons) == (
        "create_invoice",
        Effect.WRITE,
        EffectSource.DECLARED,
        ToolStatus.OK,
        Decision.SKIP,
        ("write_committed",),
    )
    # pydantic-ai records the arguments TestModel made up and the tool's return value.
    assert read.step.arguments_sha256 == sha('{"customer":"a"}')
    assert write.step.arguments_sha256 == sha('{"amount_cents":0}')
    assert write.step.idempotency_key == "inv-17"
    assert write.step.result_recorded and write.step.result_sha256 == sha("invoice inv_8812")
    # The chat span's requested calls are matched by call id: nothing is requested-only.
    assert not any(d.step.requested_only for d in plan.steps)
    assert all(d.step.span_id and d.step.attempts == 1 for d in plan.steps)


def test_a_write_that_times_out_is_held_for_review():
    agent, exporter = make_agent(["lookup_customer", "create_invoice", "send_email"])
    with pytest.raises(TimeoutError, match="the mail server stopped answering"):
        agent.run_sync("bill customer a and tell them")
    plan, by_id = plan_of(exporter)
    assert plan.replay_class is ReplayClass.REVIEW
    assert {cid: (d.step.tool, d.step.status, d.decision, d.reasons) for cid, d in by_id.items()} == {
        "pyd_ai_tool_call_id__lookup_customer": ("lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read",)),
        "pyd_ai_tool_call_id__create_invoice": ("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed",)),
        "pyd_ai_tool_call_id__send_email": ("send_email", ToolStatus.TIMEOUT, Decision.REVIEW, ("write_timeout",)),
    }
    timed_out = by_id["pyd_ai_tool_call_id__send_email"].step
    assert (timed_out.effect, timed_out.result_recorded, timed_out.arguments_sha256) == (Effect.WRITE, False, sha('{"to":"a"}'))


def test_an_unlabelled_tool_is_review_until_a_tool_rule_names_its_effect():
    agent, exporter = make_agent(["fetch_weather"])
    agent.run_sync("weather?")
    plan, by_id = plan_of(exporter)
    (decision,) = by_id.values()
    assert (decision.step.call_id, decision.step.tool, decision.step.effect, decision.decision, decision.reasons) == (
        "pyd_ai_tool_call_id__fetch_weather",
        "fetch_weather",
        Effect.UNKNOWN,
        Decision.REVIEW,
        ("effect_unknown",),
    )
    assert plan.replay_class is ReplayClass.REVIEW

    plan, by_id = plan_of(exporter, TraceFenceConfig(tool_rules=[ToolRule(match="fetch_*", effect="read")]))
    (decision,) = by_id.values()
    assert (decision.step.effect, decision.step.effect_source, decision.decision, decision.reasons) == (
        Effect.READ,
        EffectSource.CONFIG,
        Decision.REPLAY,
        ("declared_read",),
    )
    assert plan.replay_class is ReplayClass.DYNAMIC


def test_a_requested_call_whose_tool_span_is_missing_is_a_requested_only_step():
    # As if the process died before the tool span was exported: drop the execute_tool spans.
    agent, exporter = make_agent(["create_invoice"])
    agent.run_sync("bill")
    kept = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("gen_ai.operation.name") != "execute_tool"]
    views = [from_readable(s, i) for i, s in enumerate(kept)]
    planned = plan_spans(views[0].trace_id, views, TraceFenceConfig(tool_rules=[ToolRule(match="create_*", effect="write")]))
    assert [(d.step.call_id, d.step.tool, d.step.status, d.step.requested_only, d.decision, d.reasons) for d in planned.plan.steps] == [
        ("pyd_ai_tool_call_id__create_invoice", "create_invoice", ToolStatus.UNKNOWN, True, Decision.REVIEW, ("write_status_unknown", "requested_not_recorded"))
    ]
    assert planned.plan.replay_class is ReplayClass.REVIEW
