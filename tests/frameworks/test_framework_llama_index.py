"""Fixtures made by LlamaIndex's own OpenTelemetry instrumentation (OpenInference).

A ``FunctionAgent`` (llama-index-core's agent workflow) runs offline with
llama-index-core's own ``MockFunctionCallingLLM`` whose response generator is a
script of tool calls. ``openinference-instrumentation-llama-index`` records every
instrumented call: ``FunctionTool.acall`` is an OpenInference ``TOOL`` span with
``tool.name``, no call id, ``input.value`` wrapped as ``{"kwargs": {...}}`` and
``output.value`` the ``ToolOutput`` as JSON; each model turn is an ``LLM`` span
(``MockFunctionCallingLLM.achat``) listing the requested calls as
``llm.output_messages.0.message.tool_calls.N.*`` with the model's call ids and the
bare arguments. The stock mock's ``achat`` calls its ``chat``, so each turn's
request is recorded twice, by an ``LLM`` span and its ``LLM`` child; a subclass
that answers in ``achat`` itself gives one ``LLM`` span per turn.

The tools label their own span with ``declare`` (the ``FunctionTool.acall`` span is
current in the tool body).
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("openinference.instrumentation.llama_index")

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole, ToolCallBlock
from llama_index.core.llms.callbacks import llm_chat_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.agent.instrument import declare
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.sdk import TraceFenceSpanProcessor
from framework_helpers import instrumented, hex_id, plan_of_spans, sha, through_the_cli

# The instrumentor calls pydantic's deprecated .json(): hundreds of warnings that say nothing about us.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SEEN_SPANS: list[str] = []  # the span current in each tool body, to show declare() reaches the TOOL span


def _current_span_name() -> None:
    SEEN_SPANS.append(getattr(otel_trace.get_current_span(), "name", "?"))


def lookup_customer(customer: str) -> str:
    """Look a customer up."""
    _current_span_name()
    declare("read")
    return f"customer {customer}: active"


def create_invoice(customer: str, amount_cents: int) -> str:
    """Create an invoice for a customer."""
    _current_span_name()
    declare("write", idempotency_key=f"inv-{customer}-{amount_cents}")
    return "invoice inv_8812"


def send_email(to: str) -> str:
    """Send an email."""
    _current_span_name()
    declare("write")
    raise TimeoutError("the mail server stopped answering")


TOOLS = [FunctionTool.from_defaults(fn) for fn in (lookup_customer, create_invoice, send_email)]


def script(*turns: Sequence[tuple[str, str, dict]]):
    """A response generator: each model turn asks for the given calls; after the last, it answers "done"."""
    pending = list(turns)

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if not pending:
            return ChatMessage(role=MessageRole.ASSISTANT, content="done")
        calls = pending.pop(0)
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[ToolCallBlock(tool_call_id=cid, tool_name=name, tool_kwargs=args) for cid, name, args in calls],
        )

    return respond


class OneSpanPerTurnLLM(MockFunctionCallingLLM):
    """The mock answering in ``achat`` itself, as a real async client does: one LLM span per model turn."""

    @llm_chat_callback()  # what makes LlamaIndex dispatch the model call's events, which the instrumentor records
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        message = self._get_response_generator()(messages, **kwargs)
        return ChatResponse(message=message, delta=message.content or "", raw={"content": message.content or ""})


@pytest.fixture
def traced():
    """``start(*processors)``: instrument LlamaIndex onto a fresh SDK TracerProvider (default: an in-memory exporter, returned)."""
    yield from instrumented(LlamaIndexInstrumentor(), SEEN_SPANS)


def run_agent(llm) -> str:
    agent = FunctionAgent(tools=TOOLS, llm=llm, streaming=False)

    async def main():
        return await agent.run("bill customer a")

    return str(asyncio.run(main()))


def tool_spans(spans) -> dict[str, list]:
    """The OpenInference TOOL spans, by tool name, in start order."""
    found: dict[str, list] = {}
    for span in sorted(spans, key=lambda s: s.start_time):
        if (span.attributes or {}).get("openinference.span.kind") == "TOOL":
            found.setdefault(span.attributes["tool.name"], []).append(span)
    return found


READ = ("call_1", "lookup_customer", {"customer": "a"})
WRITE = ("call_2", "create_invoice", {"customer": "a", "amount_cents": 1200})


def test_a_read_and_a_committed_write_replay_with_injection(traced):
    exporter = traced()
    assert run_agent(OneSpanPerTurnLLM(response_generator=script([READ], [WRITE]), is_chat_model=True)) == "done"
    assert SEEN_SPANS == ["FunctionTool.acall", "FunctionTool.acall"]  # declare() labelled the framework's TOOL span
    plan, spans = plan_of(exporter)
    by_tool = tool_spans(spans)
    requested = [
        s.attributes["llm.output_messages.0.message.tool_calls.0.tool_call.id"]
        for s in sorted(spans, key=lambda s: s.start_time)
        if "llm.output_messages.0.message.tool_calls.0.tool_call.id" in s.attributes
    ]
    assert requested == ["call_1", "call_2"]  # one LLM span per turn records what the model asked for
    # One step per tool run: both requested calls are matched to the spans that ran them.
    assert [(d.step.tool, d.step.span_id, d.step.requested_only, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", hex_id(by_tool["lookup_customer"][0]), False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("create_invoice", hex_id(by_tool["create_invoice"][0]), False, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.INJECTED
    read, write = (d.step for d in plan.steps)
    assert (read.effect, read.effect_source, read.status) == (Effect.READ, EffectSource.DECLARED, ToolStatus.OK)
    assert (write.effect, write.effect_source, write.status, write.idempotency_key) == (Effect.WRITE, EffectSource.DECLARED, ToolStatus.OK, "inv-a-1200")
    # input.value's {"kwargs": {...}} is unwrapped to the call's own arguments.
    assert read.arguments_sha256 == sha('{"customer":"a"}')
    assert write.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    # output.value is the ToolOutput as JSON, "is_error": false: a committed result, hashed as recorded.
    recorded = by_tool["create_invoice"][0].attributes["output.value"]
    assert '"is_error":false' in recorded
    assert (write.result_recorded, write.result_sha256) == (True, sha(recorded))
    assert all(s.attempts == 1 for s in (read, write))


def test_a_request_recorded_by_nested_llm_spans_is_one_request(traced):
    # The stock MockFunctionCallingLLM: its achat calls chat, so every turn's tool calls are
    # recorded by two LLM spans, one inside the other. The model asked once; the tool ran once.
    exporter = traced()
    assert run_agent(MockFunctionCallingLLM(response_generator=script([READ], [WRITE]), is_chat_model=True)) == "done"
    plan, spans = plan_of(exporter)
    llm_spans_with_call_2 = [
        s.name for s in spans if (s.attributes or {}).get("llm.output_messages.0.message.tool_calls.0.tool_call.id") == "call_2"
    ]
    assert sorted(llm_spans_with_call_2) == ["MockFunctionCallingLLM.achat", "MockFunctionCallingLLM.chat"]
    assert [(d.step.tool, d.step.requested_only, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("create_invoice", False, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.INJECTED


def test_a_write_that_times_out_is_held_for_review_and_annotated_on_export(traced):
    exporter = InMemorySpanExporter()
    traced(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), config=TraceFenceConfig(), review_sink=None))
    mail = ("call_3", "send_email", {"to": "a@example.com"})
    # FunctionAgent hands the tool's TimeoutError back to the model as the tool's output and goes on.
    assert run_agent(OneSpanPerTurnLLM(response_generator=script([READ], [WRITE], [mail]), is_chat_model=True)) == "done"
    assert SEEN_SPANS == ["FunctionTool.acall"] * 3
    plan, spans = plan_of(exporter)
    assert [(d.step.tool, d.step.status, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
        ("send_email", ToolStatus.TIMEOUT, Decision.REVIEW, ("write_timeout", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.REVIEW
    timed_out = plan.steps[2].step
    assert (timed_out.effect, timed_out.result_recorded, timed_out.arguments_sha256) == (Effect.WRITE, False, sha('{"to":"a@example.com"}'))

    # The processor planned the same trace and wrote the verdict on the spans it handed on.
    assert {(s.attributes or {}).get("tracefence.replay.class") for s in spans} == {"review"}
    annotated = {
        s.name if s.attributes.get("openinference.span.kind") != "TOOL" else s.attributes["tool.name"]: (
            s.attributes.get("tracefence.step.decision"),
            s.attributes.get("tracefence.step.status"),
        )
        for s in spans
        if "tracefence.step.decision" in s.attributes
    }
    assert annotated == {"lookup_customer": ("replay", "ok"), "create_invoice": ("skip", "ok"), "send_email": ("review", "timeout")}


def test_the_model_asking_for_the_same_write_twice_is_a_possible_second_effect(traced):
    exporter = traced()
    again = ("call_9", "create_invoice", {"customer": "a", "amount_cents": 1200})
    run_agent(OneSpanPerTurnLLM(response_generator=script([WRITE], [again]), is_chat_model=True))
    plan, spans = plan_of(exporter)
    first, second = (hex_id(s) for s in tool_spans(spans)["create_invoice"])
    assert [(d.step.span_id, d.step.idempotency_key, d.decision, d.reasons, d.related_call_ids) for d in plan.steps] == [
        (first, "inv-a-1200", Decision.SKIP, ("write_committed", "repeated_later", "arguments_unwrapped"), (plan.steps[1].step.call_id,)),
        (second, "inv-a-1200", Decision.REVIEW, ("repeats_earlier_write", "arguments_unwrapped"), (plan.steps[0].step.call_id,)),
    ]
    assert not any(d.step.requested_only for d in plan.steps)
    assert plan.replay_class is ReplayClass.REVIEW


def test_tool_rules_name_a_tool_nobody_declared_and_read_its_key_from_unwrapped_arguments(traced):
    def refund(order: str, amount_cents: int) -> str:
        """Refund an order."""
        return "refund rf_1"  # nobody labels it

    exporter = traced()
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(refund)],
        llm=OneSpanPerTurnLLM(response_generator=script([("call_1", "refund", {"order": "o-7", "amount_cents": 500})]), is_chat_model=True),
        streaming=False,
    )
    async def main():
        return await agent.run("refund o-7")

    assert str(asyncio.run(main())) == "done"
    plan, _ = plan_of(exporter)
    assert [(d.step.tool, d.step.effect, d.decision, d.reasons) for d in plan.steps] == [
        ("refund", Effect.UNKNOWN, Decision.REVIEW, ("effect_unknown", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.REVIEW

    # The key is read from the call's own arguments, not from input.value's {"kwargs": ...} wrapper.
    config = TraceFenceConfig(tool_rules=[ToolRule(match="refund", effect="write", idempotency_key_argument="order")])
    plan, _ = plan_of(exporter, config)
    assert [(d.step.tool, d.step.effect_source, d.step.idempotency_key, d.decision, d.reasons) for d in plan.steps] == [
        ("refund", EffectSource.CONFIG, "o-7", Decision.SKIP, ("write_committed", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.INJECTED


def test_requested_calls_whose_tool_spans_are_missing_are_requested_only_steps(traced):
    # As if the process died before the TOOL spans were exported: the LLM spans' requested calls remain.
    exporter = traced()
    run_agent(OneSpanPerTurnLLM(response_generator=script([WRITE]), is_chat_model=True))
    kept = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("openinference.span.kind") != "TOOL"]
    views = [from_readable(s, i) for i, s in enumerate(kept)]
    config = TraceFenceConfig(tool_rules=[ToolRule(match="create_*", effect="write")])
    planned = plan_spans(views[0].trace_id, views, config)
    assert [(d.step.call_id, d.step.tool, d.step.status, d.step.requested_only, d.decision, d.reasons) for d in planned.plan.steps] == [
        ("call_2", "create_invoice", ToolStatus.UNKNOWN, True, Decision.REVIEW, ("write_status_unknown", "requested_not_recorded")),
    ]
    assert planned.plan.steps[0].step.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    assert planned.plan.replay_class is ReplayClass.REVIEW


def test_a_react_agent_whose_calls_are_only_text_is_planned_from_its_tool_spans(traced):
    # ReActAgent: the model writes its calls as text ("Action: ... Action Input: {...}"), so the LLM
    # spans hold no structured tool calls; the TOOL spans alone make the steps.
    turns = [
        'Thought: I need the customer.\nAction: lookup_customer\nAction Input: {"customer": "a"}',
        'Thought: Now bill.\nAction: create_invoice\nAction Input: {"customer": "a", "amount_cents": 1200}',
        "Thought: I can answer without using any more tools.\nAnswer: done",
    ]

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content=turns.pop(0))

    exporter = traced()
    agent = ReActAgent(tools=TOOLS, llm=OneSpanPerTurnLLM(response_generator=respond, is_chat_model=True), streaming=False)

    async def main():
        return await agent.run("bill customer a")

    assert str(asyncio.run(main())) == "done"
    plan, spans = plan_of(exporter)
    by_tool = tool_spans(spans)
    assert not any(k.endswith("tool_call.id") for s in spans for k in s.attributes)
    assert [(d.step.tool, d.step.span_id, d.step.requested_only, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", hex_id(by_tool["lookup_customer"][0]), False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("create_invoice", hex_id(by_tool["create_invoice"][0]), False, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
    ]
    assert plan.steps[1].step.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    assert plan.replay_class is ReplayClass.INJECTED


def test_a_call_to_a_tool_the_agent_does_not_have_is_a_requested_only_step(traced):
    # FunctionAgent answers "Tool ... not found" without running anything, so no TOOL span records
    # the call: only the model's request shows it, and whether it had an effect is not shown.
    exporter = traced()
    ghost = ("call_7", "delete_customer", {"customer": "a"})
    assert run_agent(OneSpanPerTurnLLM(response_generator=script([READ], [ghost]), is_chat_model=True)) == "done"
    plan, spans = plan_of(exporter)
    assert [(d.step.call_id if d.step.requested_only else "span", d.step.tool, d.step.status, d.decision, d.reasons) for d in plan.steps] == [
        ("span", "lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("call_7", "delete_customer", ToolStatus.UNKNOWN, Decision.REVIEW, ("effect_unknown", "requested_not_recorded")),
    ]
    assert plan.steps[1].step.arguments_sha256 == sha('{"customer":"a"}')
    assert plan.replay_class is ReplayClass.REVIEW


def test_the_cli_plans_the_exported_trace_as_the_processor_does(traced):
    exporter = traced()
    mail = ("call_3", "send_email", {"to": "a@example.com"})
    run_agent(MockFunctionCallingLLM(response_generator=script([READ], [WRITE], [mail]), is_chat_model=True))
    plan, spans = plan_of(exporter)
    assert through_the_cli(spans, TraceFenceConfig()) == [plan]


def plan_of(exporter: InMemorySpanExporter, config: TraceFenceConfig | None = None):
    """The plan of the one trace the exporter holds, and its spans."""
    spans = exporter.get_finished_spans()
    return plan_of_spans(spans, config), spans
