"""Fixtures made by Haystack's own tracer (haystack-ai 3.x with opentelemetry-haystack).

A Haystack ``Agent`` runs offline with Haystack's own ``MockChatGenerator``, whose
scripted replies are the tool calls the model asks for. Haystack traces itself:
``haystack.tracing.enable_tracing(OpenTelemetryTracer(...))`` (the tracer ships in
``opentelemetry-haystack``) with content tracing on. Per model turn it writes a
``haystack.agent.step.llm`` span whose ``haystack.agent.step.llm.output`` holds the
replies, tool calls included (``{"tool_call": {"tool_name", "arguments", "id"}}``);
per tool call a ``haystack.agent.step.tool`` span with ``haystack.tool.name``, the
bare arguments in ``haystack.agent.step.tool.input``, the result in
``haystack.agent.step.tool.output``, and, when the tool failed,
``haystack.tool.error`` = true, the status left unset and the result
``{"error": "..."}``. No tool span carries the call id; the model's output does (and,
with a ``ConfirmationHook``, the confirmation strategy span, which runs no tool).

The tools label their own span with ``declare`` (the ``haystack.agent.step.tool``
span is current in the tool body).
"""

from __future__ import annotations

import os

import pytest

# Haystack sends anonymous usage events (posthog) unless told not to: nothing here may reach the network.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
pytest.importorskip("haystack")
pytest.importorskip("haystack_integrations.tracing.opentelemetry")

from haystack import Pipeline, tracing
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import tool
from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.agent.instrument import declare
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.sdk import TraceFenceSpanProcessor
from framework_helpers import hex_id, plan_of_spans, sha, through_the_cli

TOOL_SPAN = "haystack.agent.step.tool"
SEEN_SPANS: list[str] = []  # the span current in each tool body, to show declare() reaches the tool span


def _current_span_name() -> None:
    SEEN_SPANS.append(getattr(otel_trace.get_current_span(), "name", "?"))


@tool
def lookup_customer(customer: str) -> str:
    """Look a customer up."""
    _current_span_name()
    declare("read")
    return f"customer {customer}: active"


@tool
def create_invoice(customer: str, amount_cents: int) -> str:
    """Create an invoice for a customer."""
    _current_span_name()
    declare("write", idempotency_key=f"inv-{customer}-{amount_cents}")
    return "invoice inv_8812"


@tool
def send_email(to: str) -> str:
    """Send an email."""
    _current_span_name()
    declare("write")
    raise TimeoutError("the mail server stopped answering")


def asks(call_id: str, tool_name: str, arguments: dict) -> ChatMessage:
    return ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name=tool_name, arguments=arguments, id=call_id)])


READ = asks("call_1", "lookup_customer", {"customer": "a"})
WRITE = asks("call_2", "create_invoice", {"customer": "a", "amount_cents": 1200})


@pytest.fixture
def traced(monkeypatch):
    """``start(*processors)``: Haystack's tracer, with content, onto a fresh SDK TracerProvider (default: an in-memory exporter, returned)."""
    import haystack.telemetry._telemetry

    monkeypatch.setattr(haystack.telemetry._telemetry, "telemetry", None)  # in case haystack was imported before
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    SEEN_SPANS.clear()
    content = tracing.tracer.is_content_tracing_enabled

    def start(*processors):
        for processor in processors or (SimpleSpanProcessor(exporter),):
            provider.add_span_processor(processor)
        tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
        tracing.tracer.is_content_tracing_enabled = True
        return exporter

    yield start
    tracing.disable_tracing()
    tracing.tracer.is_content_tracing_enabled = content
    provider.shutdown()


def run_agent(replies, tools=(lookup_customer, create_invoice, send_email), in_pipeline=False) -> str:
    agent = Agent(chat_generator=MockChatGenerator(responses=[*replies, "done"]), tools=list(tools))
    messages = [ChatMessage.from_user("bill customer a")]
    if in_pipeline:
        pipeline = Pipeline()
        pipeline.add_component("agent", agent)
        return pipeline.run({"agent": {"messages": messages}})["agent"]["last_message"].text
    return agent.run(messages=messages)["last_message"].text


def tool_spans(spans) -> list:
    return sorted((s for s in spans if s.name == TOOL_SPAN), key=lambda s: s.start_time)


def test_a_read_and_a_committed_write_replay_with_injection(traced):
    exporter = traced()
    assert run_agent([READ, WRITE]) == "done"
    assert SEEN_SPANS == [TOOL_SPAN, TOOL_SPAN]  # declare() labelled the framework's tool span
    plan, spans = plan_of(exporter)
    read_span, write_span = tool_spans(spans)
    assert [s.attributes["haystack.tool.name"] for s in (read_span, write_span)] == ["lookup_customer", "create_invoice"]
    # One step per tool run; the requested calls in the LLM spans' output are matched to them.
    assert [(d.step.tool, d.step.span_id, d.step.requested_only, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", hex_id(read_span), False, Decision.REPLAY, ("declared_read",)),
        ("create_invoice", hex_id(write_span), False, Decision.SKIP, ("write_committed",)),
    ]
    assert plan.replay_class is ReplayClass.INJECTED
    read, write = (d.step for d in plan.steps)
    assert (read.effect, read.effect_source, read.status) == (Effect.READ, EffectSource.DECLARED, ToolStatus.OK)
    assert (write.effect, write.effect_source, write.status, write.idempotency_key) == (Effect.WRITE, EffectSource.DECLARED, ToolStatus.OK, "inv-a-1200")
    # The arguments are haystack.agent.step.tool.input, the result haystack.agent.step.tool.output.
    assert read.arguments_sha256 == sha('{"customer":"a"}')
    assert write.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    assert write_span.attributes["haystack.agent.step.tool.output"] == "invoice inv_8812"
    assert (write.result_recorded, write.result_sha256) == (True, sha("invoice inv_8812"))
    assert all(s.attempts == 1 for s in (read, write))


def test_a_failed_write_is_held_for_review_and_annotated_on_export(traced):
    # The Agent runs inside a Pipeline here, so the trace also holds Haystack's pipeline and
    # component spans (haystack.component.type = "Agent", with the messages in its input and output).
    exporter = InMemorySpanExporter()
    traced(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), config=TraceFenceConfig(), review_sink=None))
    mail = asks("call_3", "send_email", {"to": "a@example.com"})
    # The Agent hands the tool's failure back to the model as the tool's result and goes on.
    assert run_agent([READ, WRITE, mail], in_pipeline=True) == "done"
    assert SEEN_SPANS == [TOOL_SPAN] * 3
    plan, spans = plan_of(exporter)
    failed_span = tool_spans(spans)[2]
    # Haystack keeps no exception type: the span's status stays unset, haystack.tool.error says it failed.
    assert (failed_span.status.status_code.name, failed_span.attributes["haystack.tool.error"], failed_span.events) == ("UNSET", True, ())
    assert [(d.step.tool, d.step.status, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read",)),
        ("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed",)),
        ("send_email", ToolStatus.ERROR, Decision.REVIEW, ("write_error",)),
    ]
    assert plan.replay_class is ReplayClass.REVIEW
    failed = plan.steps[2].step
    assert (failed.effect, failed.span_id, failed.arguments_sha256) == (Effect.WRITE, hex_id(failed_span), sha('{"to":"a@example.com"}'))

    # The processor planned the same trace and wrote the verdict on the spans it handed on.
    assert {(s.attributes or {}).get("tracefence.replay.class") for s in spans} == {"review"}
    annotated = sorted(
        (s.name, s.attributes.get("haystack.tool.name"), s.attributes["tracefence.step.decision"], s.attributes.get("tracefence.step.status"))
        for s in spans
        if "tracefence.step.decision" in s.attributes
    )
    assert annotated == [
        (TOOL_SPAN, "create_invoice", "skip", "ok"),
        (TOOL_SPAN, "lookup_customer", "replay", "ok"),
        (TOOL_SPAN, "send_email", "review", "error"),
    ]


def test_the_model_asking_for_the_same_write_twice_is_a_possible_second_effect(traced):
    exporter = traced()
    run_agent([WRITE, asks("call_9", "create_invoice", {"customer": "a", "amount_cents": 1200})])
    plan, spans = plan_of(exporter)
    first, second = (hex_id(s) for s in tool_spans(spans))
    assert [(d.step.span_id, d.step.idempotency_key, d.decision, d.reasons, d.related_call_ids) for d in plan.steps] == [
        (first, "inv-a-1200", Decision.SKIP, ("write_committed", "repeated_later"), (plan.steps[1].step.call_id,)),
        (second, "inv-a-1200", Decision.REVIEW, ("repeats_earlier_write",), (plan.steps[0].step.call_id,)),
    ]
    assert not any(d.step.requested_only for d in plan.steps)
    assert plan.replay_class is ReplayClass.REVIEW


def test_tool_rules_name_a_tool_nobody_declared(traced):
    @tool
    def refund(order: str, amount_cents: int) -> str:
        """Refund an order."""
        return "refund rf_1"  # nobody labels it

    exporter = traced()
    run_agent([asks("call_1", "refund", {"order": "o-7", "amount_cents": 500})], tools=(refund,))
    plan, _ = plan_of(exporter)
    assert [(d.step.tool, d.step.effect, d.decision, d.reasons) for d in plan.steps] == [
        ("refund", Effect.UNKNOWN, Decision.REVIEW, ("effect_unknown",)),
    ]
    assert plan.replay_class is ReplayClass.REVIEW

    config = TraceFenceConfig(tool_rules=[ToolRule(match="refund", effect="write", idempotency_key_argument="order")])
    plan, _ = plan_of(exporter, config)
    assert [(d.step.tool, d.step.effect_source, d.step.idempotency_key, d.decision, d.reasons) for d in plan.steps] == [
        ("refund", EffectSource.CONFIG, "o-7", Decision.SKIP, ("write_committed",)),
    ]
    assert plan.replay_class is ReplayClass.INJECTED


def test_requested_calls_whose_tool_spans_are_missing_are_requested_only_steps(traced):
    # As if the process died before the tool spans were exported: the LLM spans' output still
    # shows the model asked for a write, so the trace must not pass as tool-free.
    exporter = traced()
    run_agent([WRITE])
    kept = [s for s in exporter.get_finished_spans() if s.name != TOOL_SPAN]
    views = [from_readable(s, i) for i, s in enumerate(kept)]
    config = TraceFenceConfig(tool_rules=[ToolRule(match="create_*", effect="write")])
    planned = plan_spans(views[0].trace_id, views, config)
    assert [(d.step.call_id, d.step.tool, d.step.status, d.step.requested_only, d.decision, d.reasons) for d in planned.plan.steps] == [
        ("call_2", "create_invoice", ToolStatus.UNKNOWN, True, Decision.REVIEW, ("write_status_unknown", "requested_not_recorded")),
    ]
    assert planned.plan.steps[0].step.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    assert planned.plan.replay_class is ReplayClass.REVIEW


def test_calls_asked_for_in_one_turn_run_concurrently_and_each_is_matched(traced):
    # Several tool calls in one reply: the Agent runs them in a thread pool, each under its own tool span.
    exporter = traced()
    both = ChatMessage.from_assistant(
        tool_calls=[
            ToolCall(tool_name="lookup_customer", arguments={"customer": "a"}, id="call_1"),
            ToolCall(tool_name="lookup_customer", arguments={"customer": "b"}, id="call_2"),
            ToolCall(tool_name="create_invoice", arguments={"customer": "a", "amount_cents": 1200}, id="call_3"),
        ]
    )
    assert run_agent([both]) == "done"
    plan, spans = plan_of(exporter)
    assert len(plan.steps) == 3
    assert {d.step.arguments_sha256: (d.step.tool, d.step.requested_only, d.decision, d.reasons) for d in plan.steps} == {
        sha('{"customer":"a"}'): ("lookup_customer", False, Decision.REPLAY, ("declared_read",)),
        sha('{"customer":"b"}'): ("lookup_customer", False, Decision.REPLAY, ("declared_read",)),
        sha('{"amount_cents":1200,"customer":"a"}'): ("create_invoice", False, Decision.SKIP, ("write_committed",)),
    }
    assert plan.replay_class is ReplayClass.INJECTED
    names = {s.context.span_id: s.name for s in spans}
    assert sorted(names[s.parent.span_id] for s in tool_spans(spans)) == ["haystack.agent.step"] * 3


class ScriptedConfirmation:
    """A human-in-the-loop confirmation UI that answers at once: confirm invoices, reject everything else."""

    def get_user_confirmation(self, tool_name: str, tool_description: str, tool_params: dict):
        from haystack.hooks.human_in_the_loop import ConfirmationUIResult

        return ConfirmationUIResult(action="confirm" if tool_name == "create_invoice" else "reject")


def test_a_human_in_the_loop_confirmation_is_not_a_tool_run(traced):
    # Haystack's ConfirmationHook asks before each call. Its strategy span
    # (haystack.agent.hook.human_in_the_loop.strategy) carries haystack.tool.name and
    # haystack.tool.call.id too, but it runs no tool: it records the decision to run one
    # (strategy.decision confirm / reject). The confirmed write ran once, under its own tool span;
    # the rejected one never ran, and only the model's request shows it was asked for.
    from haystack.hooks.human_in_the_loop import AlwaysAskPolicy, BlockingConfirmationStrategy, ConfirmationHook

    hook = ConfirmationHook(
        confirmation_strategies={"*": BlockingConfirmationStrategy(confirmation_policy=AlwaysAskPolicy(), confirmation_ui=ScriptedConfirmation())}
    )
    exporter = traced()
    mail = asks("call_3", "send_email", {"to": "a@example.com"})
    agent = Agent(chat_generator=MockChatGenerator(responses=[WRITE, mail, "done"]), tools=[create_invoice, send_email], hooks={"before_tool": [hook]})
    assert agent.run(messages=[ChatMessage.from_user("bill customer a")])["last_message"].text == "done"
    assert SEEN_SPANS == [TOOL_SPAN]  # send_email never ran
    plan, spans = plan_of(exporter, TraceFenceConfig(tool_rules=[ToolRule(match="send_*", effect="write")]))
    decisions = sorted(
        (s.attributes["haystack.tool.name"], s.attributes["haystack.agent.hook.human_in_the_loop.strategy.decision"])
        for s in spans
        if s.name == "haystack.agent.hook.human_in_the_loop.strategy"
    )
    assert decisions == [("create_invoice", "confirm"), ("send_email", "reject")]
    (ran,) = tool_spans(spans)
    assert [(d.step.call_id if d.step.requested_only else d.step.span_id, d.step.tool, d.step.status, d.decision, d.reasons) for d in plan.steps] == [
        (hex_id(ran), "create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed",)),
        ("call_3", "send_email", ToolStatus.UNKNOWN, Decision.REVIEW, ("write_status_unknown", "requested_not_recorded")),
    ]
    assert plan.replay_class is ReplayClass.REVIEW


def test_the_cli_plans_the_exported_trace_as_the_processor_does(traced):
    exporter = traced()
    run_agent([READ, WRITE, asks("call_3", "send_email", {"to": "a@example.com"})], in_pipeline=True)
    plan, spans = plan_of(exporter)
    assert through_the_cli(spans, TraceFenceConfig()) == [plan]


def plan_of(exporter: InMemorySpanExporter, config: TraceFenceConfig | None = None):
    """The plan of the one trace the exporter holds, and its spans."""
    spans = exporter.get_finished_spans()
    return plan_of_spans(spans, config), spans
