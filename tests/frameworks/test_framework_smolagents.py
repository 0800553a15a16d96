"""Fixtures made by smolagents' own OpenTelemetry instrumentation (OpenInference).

A ``ToolCallingAgent`` runs offline: its model is smolagents' own ``OpenAIModel``
(so the instrumentor's ``OpenAIModel.generate`` wrapper records an OpenInference
``LLM`` span with the requested calls) given a scripted client in place of the
OpenAI SDK; nothing is sent anywhere. ``openinference-instrumentation-smolagents``
writes, per tool run, a ``TOOL`` span named after the tool class (``SimpleTool``,
``FinalAnswerTool``) with ``tool.name``, no call id, and ``input.value`` wrapped as
``{"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}``; the ``LLM``
span lists the requested calls as ``llm.output_messages.0.message.tool_calls.N.*``
with the model's call ids and the bare arguments. So every call that ran must be
matched to its requested call by tool name and unwrapped arguments, with no
phantom ``requested_not_recorded`` step.

The tools label their own span with ``declare`` (the ``TOOL`` span is current in
the tool body); smolagents' built-in ``final_answer`` tool, which no one can
label, is named by an operator's ``tool_rules``.
"""

from __future__ import annotations

import json
import types

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("openinference.instrumentation.smolagents")

from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from smolagents import CodeAgent, OpenAIModel, ToolCallingAgent, tool

from otel_tracefence.core.config import ToolRule, TraceFenceConfig
from otel_tracefence.agent.instrument import declare
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.sdk import TraceFenceSpanProcessor
from framework_helpers import instrumented, plan_of_spans, sha, through_the_cli

# smolagents' own final_answer tool ends every run; nobody can declare it, so the operator names it.
CONFIG = TraceFenceConfig(tool_rules=[ToolRule(match="final_answer", effect="read")])
SEEN_SPANS: list[str] = []  # the span current in each tool body, to show declare() reaches the TOOL span


def _current_tool_span() -> None:
    span = otel_trace.get_current_span()
    attributes = getattr(span, "attributes", None) or {}
    SEEN_SPANS.append(f"{attributes.get('openinference.span.kind')}:{attributes.get('tool.name')}")


@tool
def lookup_customer(customer: str) -> str:
    """Look a customer up.

    Args:
        customer: the customer id
    """
    _current_tool_span()
    declare("read")
    return f"customer {customer}: active"


@tool
def create_invoice(customer: str, amount_cents: int) -> str:
    """Create an invoice for a customer.

    Args:
        customer: the customer id
        amount_cents: the amount in cents
    """
    _current_tool_span()
    declare("write", idempotency_key=f"inv-{customer}-{amount_cents}")
    return "invoice inv_8812"


@tool
def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: the address
    """
    _current_tool_span()
    declare("write")
    raise TimeoutError("the mail server stopped answering")


def completion(*calls: tuple[str, str, dict]):
    """One scripted chat completion, shaped as the OpenAI SDK returns it: the tool calls the model asks for."""
    tool_calls = [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}} for cid, name, args in calls]
    message = types.SimpleNamespace(role="assistant", content=None, tool_calls=tool_calls)
    usage = types.SimpleNamespace(prompt_tokens=10, completion_tokens=5)
    return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)], usage=usage)


class ScriptedClient:
    """Stands in for ``openai.OpenAI``: ``chat.completions.create`` hands out the script, one turn per call."""

    def __init__(self, turns):
        self._turns = list(turns)
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

    def _create(self, **kwargs):
        assert kwargs["tools"], "the agent offers its tools to the model"
        return self._turns.pop(0)


def final():
    return completion(("call_final", "final_answer", {"answer": "done"}))


@pytest.fixture
def traced():
    """``start(*processors)``: instrument smolagents onto a fresh SDK TracerProvider (default: an in-memory exporter, returned)."""
    yield from instrumented(SmolagentsInstrumentor(), SEEN_SPANS)


def run_agent(turns, tools=(lookup_customer, create_invoice, send_email)) -> str:
    model = OpenAIModel(model_id="scripted-model", client=ScriptedClient(turns))
    agent = ToolCallingAgent(tools=list(tools), model=model, max_steps=6, verbosity_level=-1)
    return agent.run("bill customer a")


def tool_span_ids(spans) -> dict[str, list[str]]:
    """Span ids (hex) of the OpenInference TOOL spans, by tool name, in start order."""
    found: dict[str, list[str]] = {}
    for span in sorted(spans, key=lambda s: s.start_time):
        if (span.attributes or {}).get("openinference.span.kind") == "TOOL":
            found.setdefault(span.attributes["tool.name"], []).append(format(span.context.span_id, "016x"))
    return found


def test_a_read_and_a_committed_write_replay_with_injection(traced):
    exporter = traced()
    answer = run_agent(
        [
            completion(("call_1", "lookup_customer", {"customer": "a"})),
            completion(("call_2", "create_invoice", {"customer": "a", "amount_cents": 1200})),
            final(),
        ]
    )
    assert answer == "done"
    assert SEEN_SPANS == ["TOOL:lookup_customer", "TOOL:create_invoice"]  # declare() labelled the framework's TOOL span
    plan, spans = plan_of(exporter)
    ids = tool_span_ids(spans)
    requested = [
        s.attributes["llm.output_messages.0.message.tool_calls.0.tool_call.id"]
        for s in sorted(spans, key=lambda s: s.start_time)
        if "llm.output_messages.0.message.tool_calls.0.tool_call.id" in s.attributes
    ]
    assert requested == ["call_1", "call_2", "call_final"]  # the LLM spans record what the model asked for
    # One step per tool run: the three requested calls are matched to the spans that ran them.
    assert [(d.step.tool, d.step.span_id, d.step.requested_only, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", ids["lookup_customer"][0], False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("create_invoice", ids["create_invoice"][0], False, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
        ("final_answer", ids["final_answer"][0], False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.INJECTED
    read, write, answer = (d.step for d in plan.steps)
    assert (read.effect, read.effect_source, read.status) == (Effect.READ, EffectSource.DECLARED, ToolStatus.OK)
    assert (write.effect, write.effect_source, write.status, write.idempotency_key) == (
        Effect.WRITE,
        EffectSource.DECLARED,
        ToolStatus.OK,
        "inv-a-1200",
    )
    assert (answer.effect, answer.effect_source) == (Effect.READ, EffectSource.CONFIG)
    # input.value's {"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}} is unwrapped to the call's own arguments.
    assert read.arguments_sha256 == sha('{"customer":"a"}')
    assert write.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    assert answer.arguments_sha256 == sha('{"answer":"done"}')
    assert write.result_recorded and write.result_sha256 == sha("invoice inv_8812")
    assert all(s.attempts == 1 for s in (read, write, answer))


def test_a_write_that_times_out_is_held_for_review_and_annotated_on_export(traced):
    exporter = InMemorySpanExporter()
    traced(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), config=CONFIG, review_sink=None))
    answer = run_agent(
        [
            completion(("call_1", "lookup_customer", {"customer": "a"})),
            completion(("call_2", "create_invoice", {"customer": "a", "amount_cents": 1200})),
            completion(("call_3", "send_email", {"to": "a@example.com"})),
            final(),
        ]
    )
    # smolagents hands the tool's TimeoutError back to the model as an observation and goes on.
    assert answer == "done"
    assert SEEN_SPANS == ["TOOL:lookup_customer", "TOOL:create_invoice", "TOOL:send_email"]
    plan, spans = plan_of(exporter)
    assert [(d.step.tool, d.step.status, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", ToolStatus.OK, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("create_invoice", ToolStatus.OK, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
        ("send_email", ToolStatus.TIMEOUT, Decision.REVIEW, ("write_timeout", "arguments_unwrapped")),
        ("final_answer", ToolStatus.OK, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.REVIEW
    timed_out = plan.steps[2].step
    assert (timed_out.effect, timed_out.result_recorded, timed_out.arguments_sha256) == (Effect.WRITE, False, sha('{"to":"a@example.com"}'))

    # The processor planned the same trace and wrote the verdict on the spans it handed on.
    assert {(s.attributes or {}).get("tracefence.replay.class") for s in spans} == {"review"}
    decisions = {
        s.attributes["tool.name"]: (s.attributes.get("tracefence.step.decision"), s.attributes.get("tracefence.step.status"))
        for s in spans
        if s.attributes.get("openinference.span.kind") == "TOOL"
    }
    assert decisions == {
        "lookup_customer": ("replay", "ok"),
        "create_invoice": ("skip", "ok"),
        "send_email": ("review", "timeout"),
        "final_answer": ("replay", "ok"),
    }
    assert not any("tracefence.step.decision" in (s.attributes or {}) for s in spans if s.attributes.get("openinference.span.kind") != "TOOL")


def test_the_model_asking_for_the_same_write_twice_is_a_possible_second_effect(traced):
    exporter = traced()
    run_agent(
        [
            completion(("call_1", "create_invoice", {"customer": "a", "amount_cents": 1200})),
            completion(("call_2", "create_invoice", {"customer": "a", "amount_cents": 1200})),
            final(),
        ]
    )
    plan, spans = plan_of(exporter)
    first, second = tool_span_ids(spans)["create_invoice"]
    assert [(d.step.tool, d.step.span_id, d.step.idempotency_key, d.decision, d.reasons, d.related_call_ids) for d in plan.steps] == [
        ("create_invoice", first, "inv-a-1200", Decision.SKIP, ("write_committed", "repeated_later", "arguments_unwrapped"), (plan.steps[1].step.call_id,)),
        ("create_invoice", second, "inv-a-1200", Decision.REVIEW, ("repeats_earlier_write", "arguments_unwrapped"), (plan.steps[0].step.call_id,)),
        ("final_answer", tool_span_ids(spans)["final_answer"][0], None, Decision.REPLAY, ("declared_read", "arguments_unwrapped"), ()),
    ]
    assert not any(d.step.requested_only for d in plan.steps)
    assert plan.replay_class is ReplayClass.REVIEW


def test_an_unlabelled_tool_is_review_until_a_tool_rule_names_it(traced):
    @tool
    def get_weather(city: str) -> str:
        """Today's weather.

        Args:
            city: the city
        """
        return "sunny"  # nobody labels it

    exporter = traced()
    run_agent([completion(("call_1", "get_weather", {"city": "Paris"})), final()], tools=(get_weather,))
    plan, _ = plan_of(exporter)
    assert [(d.step.tool, d.step.effect, d.decision, d.reasons) for d in plan.steps] == [
        ("get_weather", Effect.UNKNOWN, Decision.REVIEW, ("effect_unknown", "arguments_unwrapped")),
        ("final_answer", Effect.READ, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.REVIEW

    config = TraceFenceConfig(tool_rules=[ToolRule(match="get_*", effect="read"), ToolRule(match="final_answer", effect="read")])
    plan, _ = plan_of(exporter, config)
    assert [(d.step.tool, d.step.effect_source, d.decision, d.reasons) for d in plan.steps] == [
        ("get_weather", EffectSource.CONFIG, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("final_answer", EffectSource.CONFIG, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.DYNAMIC


def test_requested_calls_whose_tool_spans_are_missing_are_requested_only_steps(traced):
    # As if the process died before the TOOL spans were exported: the LLM spans' requested calls remain.
    exporter = traced()
    run_agent([completion(("call_1", "create_invoice", {"customer": "a", "amount_cents": 1200})), final()])
    kept = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("openinference.span.kind") != "TOOL"]
    views = [from_readable(s, i) for i, s in enumerate(kept)]
    config = TraceFenceConfig(tool_rules=[ToolRule(match="create_*", effect="write"), ToolRule(match="final_answer", effect="read")])
    planned = plan_spans(views[0].trace_id, views, config)
    assert [(d.step.call_id, d.step.tool, d.step.status, d.step.requested_only, d.decision, d.reasons) for d in planned.plan.steps] == [
        ("call_1", "create_invoice", ToolStatus.UNKNOWN, True, Decision.REVIEW, ("write_status_unknown", "requested_not_recorded")),
        ("call_final", "final_answer", ToolStatus.UNKNOWN, True, Decision.REPLAY, ("declared_read", "requested_not_recorded")),
    ]
    assert planned.plan.steps[0].step.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    assert planned.plan.replay_class is ReplayClass.REVIEW


def test_calls_asked_for_in_one_turn_run_in_parallel_and_each_is_matched(traced):
    # Several tool calls in one model message: ToolCallingAgent runs them in a thread pool (with the
    # context copied, so each TOOL span is a child of the step), in no fixed order.
    exporter = traced()
    run_agent(
        [
            completion(
                ("call_1", "lookup_customer", {"customer": "a"}),
                ("call_2", "lookup_customer", {"customer": "b"}),
                ("call_3", "create_invoice", {"customer": "a", "amount_cents": 1200}),
            ),
            final(),
        ]
    )
    plan, spans = plan_of(exporter)
    by_arguments = {d.step.arguments_sha256: d for d in plan.steps}
    assert len(plan.steps) == 4
    assert {
        arguments: (d.step.tool, d.step.requested_only, d.decision, d.reasons)
        for arguments, d in by_arguments.items()
    } == {
        sha('{"customer":"a"}'): ("lookup_customer", False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        sha('{"customer":"b"}'): ("lookup_customer", False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        sha('{"amount_cents":1200,"customer":"a"}'): ("create_invoice", False, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
        sha('{"answer":"done"}'): ("final_answer", False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
    }
    assert plan.replay_class is ReplayClass.INJECTED
    step_of_tool = {s.context.span_id: s.parent.span_id for s in spans if (s.attributes or {}).get("openinference.span.kind") == "TOOL"}
    steps = {s.context.span_id: s.name for s in spans}
    assert sorted(steps[parent] for parent in step_of_tool.values()) == ["Step 1", "Step 1", "Step 1", "Step 2"]


def test_a_code_agent_whose_calls_are_only_code_is_planned_from_its_tool_spans(traced):
    # CodeAgent: the model writes Python that calls the tools, so the LLM span holds no structured
    # tool calls; the tools still run through Tool.__call__, so each call is a TOOL span.
    code = (
        "Thought: look the customer up, then bill.\n<code>\n"
        'customer = lookup_customer(customer="a")\n'
        'invoice = create_invoice(customer="a", amount_cents=1200)\n'
        "final_answer(answer=invoice)\n</code>"
    )
    message = types.SimpleNamespace(role="assistant", content=code, tool_calls=None)
    reply = types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)], usage=types.SimpleNamespace(prompt_tokens=10, completion_tokens=5))

    class CodeClient(ScriptedClient):
        def _create(self, **kwargs):  # a code agent offers no tools to the model: they are in its prompt
            return self._turns.pop(0)

    exporter = traced()
    agent = CodeAgent(
        tools=[lookup_customer, create_invoice], model=OpenAIModel(model_id="scripted-model", client=CodeClient([reply])), max_steps=3, verbosity_level=-1
    )
    assert agent.run("bill customer a") == "invoice inv_8812"
    assert SEEN_SPANS == ["TOOL:lookup_customer", "TOOL:create_invoice"]
    plan, spans = plan_of(exporter)
    ids = tool_span_ids(spans)
    assert not any(k.endswith("tool_call.id") for s in spans for k in s.attributes)
    assert [(d.step.tool, d.step.span_id, d.step.requested_only, d.decision, d.reasons) for d in plan.steps] == [
        ("lookup_customer", ids["lookup_customer"][0], False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        # final_answer(answer=invoice) passes on the invoice id create_invoice returned: data flow (issue 11)
        ("create_invoice", ids["create_invoice"][0], False, Decision.SKIP, ("write_committed", "arguments_unwrapped", "result_consumed_by")),
        ("final_answer", ids["final_answer"][0], False, Decision.REPLAY, ("declared_read", "arguments_unwrapped", "consumes_result_of")),
    ]
    assert plan.steps[2].related_call_ids == (plan.steps[1].step.call_id,)
    assert plan.steps[1].step.arguments_sha256 == sha('{"amount_cents":1200,"customer":"a"}')
    assert plan.replay_class is ReplayClass.INJECTED


def test_a_call_to_a_managed_agent_is_recorded_by_its_agent_span_not_a_tool_span(traced):
    # A managed sub-agent is offered to the model as a tool: the model asks for "billing" like any
    # tool call (llm.output_messages...tool_call.function.name), but no TOOL span runs it. The
    # sub-agent's own AGENT span, "billing.run", child of the same step, records that it ran, and its
    # tool calls are steps of their own. The call ran: it is no "requested, not recorded" step.
    exporter = traced()
    billing = ToolCallingAgent(
        tools=[create_invoice],
        model=OpenAIModel(
            model_id="scripted-model",
            client=ScriptedClient(
                [completion(("sub_1", "create_invoice", {"customer": "a", "amount_cents": 1200})), completion(("sub_2", "final_answer", {"answer": "billed"}))]
            ),
        ),
        name="billing",
        description="Bills customers.",
        max_steps=3,
        verbosity_level=-1,
    )
    manager = ToolCallingAgent(
        tools=[lookup_customer],
        managed_agents=[billing],
        model=OpenAIModel(
            model_id="scripted-model",
            client=ScriptedClient([completion(("call_1", "billing", {"task": "bill customer a", "additional_args": {}})), final()]),
        ),
        max_steps=3,
        verbosity_level=-1,
    )
    assert manager.run("bill customer a") == "done"
    plan, spans = plan_of(exporter)
    names = {s.context.span_id: s for s in spans}
    (sub_agent,) = [s for s in spans if s.name == "billing.run"]
    assert (sub_agent.attributes["openinference.span.kind"], names[sub_agent.parent.span_id].name) == ("AGENT", "Step 1")
    assert [(d.step.tool, d.step.requested_only, d.decision, d.reasons) for d in plan.steps] == [
        ("create_invoice", False, Decision.SKIP, ("write_committed", "arguments_unwrapped")),
        ("final_answer", False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
        ("final_answer", False, Decision.REPLAY, ("declared_read", "arguments_unwrapped")),
    ]
    assert plan.replay_class is ReplayClass.INJECTED


def test_the_cli_plans_the_exported_trace_as_the_processor_does(traced):
    exporter = traced()
    run_agent(
        [
            completion(("call_1", "lookup_customer", {"customer": "a"})),
            completion(("call_2", "create_invoice", {"customer": "a", "amount_cents": 1200})),
            completion(("call_3", "send_email", {"to": "a@example.com"})),
            final(),
        ]
    )
    plan, spans = plan_of(exporter)
    assert through_the_cli(spans, CONFIG) == [plan]


def plan_of(exporter: InMemorySpanExporter, config: TraceFenceConfig = CONFIG):
    """The plan of the one trace the exporter holds, and its spans."""
    spans = exporter.get_finished_spans()
    return plan_of_spans(spans, config), spans
