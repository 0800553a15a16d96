"""An agent run that recorded no output, in a trace with no tool span and no model span, is held (docs/DECISIONS.md 1010).

The shape is AutoGen AgentChat 0.7's own tracing (autogen-core): a ``create_agent`` span and an ``invoke_agent`` span,
neither with input or output, an ``execute_tool`` span per call that ran, and no span for the model's calls. A call
the model asked for that never ran (a tool the agent lacks, a cancelled turn) is then in no span: the run stands as
a held step (``requested_call_unread``). Where a model span is in the trace, its finish reason and output are read as
before (content capture off shows what it allows); where a tool span is, the trace's steps are read from it.
"""

from __future__ import annotations

import json

import pytest
from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text

TRACE = "a6" * 16
SESSION, CREATE, RUN, MODEL, TOOL, RUN2 = "01" * 8, "02" * 8, "03" * 8, "04" * 8, "05" * 8, "06" * 8
AUTOGEN = {"gen_ai.system": "autogen", "gen_ai.agent.name": "billing", "gen_ai.agent.description": "An agent that provides assistance with ability to use tools."}
HELD = ("invoke_agent billing", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))
WHY = (
    "span 0303030303030303 ('invoke_agent billing') requested tool calls that could not be read: an agent run that "
    "recorded no output, in a trace with no tool span and no model span: what it asked for is in no span"
)


def plan_of(*spans: dict) -> tuple:
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "autogen-core"}, "spans": list(spans)}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    steps = sorted((d.step.tool, d.decision.value, d.reasons) for d in trace.steps)
    return (trace.replay_class.value if trace.replay_class is not None else None), steps, [m.message for d in trace.steps for m in d.step.malformed]


def autogen_run(*inner: dict, run_id: str = RUN) -> list[dict]:
    """AutoGen's spans of one AssistantAgent run under a session span: create_agent, invoke_agent, then ``inner``."""
    return [
        json_span(TRACE, SESSION, "billing session"),
        json_span(TRACE, CREATE, "create_agent billing", SESSION, **{"gen_ai.operation.name": "create_agent", **AUTOGEN}),
        json_span(TRACE, run_id, "invoke_agent billing", SESSION, **{"gen_ai.operation.name": "invoke_agent", **AUTOGEN}),
        *inner,
    ]


def execute_tool(name: str, effect: str) -> dict:
    return json_span(TRACE, TOOL, f"execute_tool {name}", RUN, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.system": "autogen", "gen_ai.tool.name": name, "gen_ai.tool.description": "Look a customer up.",
        "gen_ai.tool.call.id": "call_1",
        "tracefence.effect": effect,
    })  # fmt: skip


def test_an_autogen_run_whose_requested_call_never_ran_is_held():
    """The matrix's autogen requested_never_ran cell: the call to a tool the agent lacks is in no span."""
    assert plan_of(*autogen_run()) == ("review", [HELD], [WHY])


def test_each_run_of_a_team_with_no_span_for_what_it_asked_is_held():
    """A RoundRobinGroupChat's turns: one invoke_agent span each (the runtime's messaging spans are no model span)."""
    second = json_span(TRACE, RUN2, "invoke_agent billing", SESSION, **{"gen_ai.operation.name": "invoke_agent", **AUTOGEN})
    messaging = json_span(TRACE, "07" * 8, "autogen publish group_topic", SESSION, **{"messaging.operation": "publish", "messaging.destination": "group_topic"})
    cls, steps, _ = plan_of(*autogen_run(second, messaging))
    assert (cls, steps) == ("review", [HELD, HELD])


@pytest.mark.parametrize("model", [
    {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
    {"gen_ai.operation.name": "generate_content"},
    {"gen_ai.response.finish_reasons": ["stop"]},
    {"openinference.span.kind": "LLM"},
    {"llm.request.type": "chat"},
    {"langsmith.span.kind": "llm"},
    {"mlflow.spanType": "CHAT_MODEL"},
    {"langfuse.observation.type": "generation"},
    {"ai.operationId": "ai.generateText.doGenerate"},
], ids=["genai-chat", "genai-generate-content", "finish-reason", "openinference", "openllmetry", "langsmith", "mlflow", "langfuse", "vercel"])
def test_a_model_span_anywhere_in_the_trace_is_read_instead(model):
    """Content capture off: the model span says what it can (a finish reason asking for tools holds the trace, 188);
    the run recorded neither input nor output, as such a producer records it, and is not held for that alone."""
    assert plan_of(*autogen_run(json_span(TRACE, MODEL, "chat gpt-4o", RUN, **model)))[:2] == (None, [])


def test_a_model_span_whose_finish_reason_asked_for_tools_holds_the_trace_itself():
    chat = json_span(TRACE, MODEL, "chat gpt-4o", RUN, **{"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ["tool_calls"]})
    cls, steps, _ = plan_of(*autogen_run(chat))
    assert (cls, steps) == ("review", [("chat gpt-4o", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))])


@pytest.mark.parametrize(("effect", "want"), [
    ("read", ("dynamic", [("lookup_customer", "replay", ("declared_read", "arguments_not_recorded"))])),
    ("write", ("static", [("lookup_customer", "skip", ("write_committed", "result_not_recorded", "arguments_not_recorded"))])),
])
def test_a_trace_with_a_tool_span_is_read_from_it_and_its_run_is_not_held(effect, want):
    """A read-only AutoGen trace (the matrix's read_ok cell) stays dynamic: the rule is for toolless traces alone."""
    assert plan_of(*autogen_run(execute_tool("lookup_customer", effect)))[:2] == want


def test_a_run_that_recorded_its_output_is_read_from_it():
    output = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}])
    run = json_span(TRACE, RUN, "invoke_agent billing", SESSION, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": output, **AUTOGEN})
    assert plan_of(json_span(TRACE, SESSION, "billing session"), run)[:2] == (None, [])


def test_an_agent_created_and_never_run_is_no_run():
    create = json_span(TRACE, CREATE, "create_agent billing", SESSION, **{"gen_ai.operation.name": "create_agent", **AUTOGEN})
    assert plan_of(json_span(TRACE, SESSION, "billing session"), create)[:2] == (None, [])


@pytest.mark.parametrize(("kind_key", "kind"), [("traceloop.span.kind", "agent"), ("openinference.span.kind", "AGENT")], ids=["openllmetry", "openinference"])
def test_one_rule_for_every_producer_of_agent_runs(kind_key, kind):
    """An OpenLLMetry or OpenInference agent span with content capture off and no model span is held the same way."""
    cls, steps, messages = plan_of(json_span(TRACE, RUN, "billing.agent", **{kind_key: kind}))
    assert (cls, steps) == ("review", [("billing.agent", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"))])
    assert messages == [WHY.replace("invoke_agent billing", "billing.agent")]
