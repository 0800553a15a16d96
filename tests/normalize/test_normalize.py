"""The normalizer (DESIGN.md, "Normalized step"): every convention's tool span becomes the right step.

Spans are built as SpanView values (the one thing the normalizer reads), as OTLP
protobuf spans, or by the real OpenTelemetry SDK; expected hashes are computed here
from the canonical JSON text written out by hand, not by the code under test.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from otel_tracefence.core.config import Limits, ToolRule, TraceFenceConfig
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, ToolStatus
from otel_tracefence.normalize import SpanView, from_otlp, from_readable, normalize_trace, span_to_step
from otel_tracefence.normalize.span_view import SpanEvent
from otel_tracefence.pipeline.plan import plan_spans

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
END = 2_000_000_000
CONFIG = TraceFenceConfig()


def sha(canonical_text: str) -> str:
    return hashlib.sha256(canonical_text.encode("utf-8")).hexdigest()


def span(
    attributes: dict,
    *,
    name: str = "tool",
    span_id: str = "00f067aa0ba902b7",
    parent: str | None = None,
    status: str = "unset",
    message: str = "",
    events: tuple = (),
    start: int = 1_000_000_000,
    end: int | None = END,
    sequence: int = 0,
) -> SpanView:
    return SpanView(
        trace_id=TRACE,
        span_id=span_id,
        name=name,
        attributes=attributes,
        parent_span_id=parent,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        status_code=status,
        status_message=message,
        events=events,
        sequence=sequence,
    )


def exception(type_name: str) -> SpanEvent:
    return SpanEvent("exception", {"exception.type": type_name, "exception.message": "boom"})


def step_of(view: SpanView, config: TraceFenceConfig = CONFIG):
    step = span_to_step(view, config)
    assert step is not None
    return step


def fields(step, *names):
    return {name: getattr(step, name) for name in names}


STEP_FIELDS = ("tool", "call_id", "effect", "effect_source", "status", "idempotency_key", "arguments_sha256", "arguments_unavailable", "result_recorded")

# --- conventions ------------------------------------------------------------------------------


def test_genai_execute_tool_span():
    view = span(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "pager.trigger",
            "gen_ai.tool.call.id": "call_7",
            "gen_ai.tool.call.arguments": '{"severity": "high", "service": "db"}',
            "gen_ai.tool.call.result": '{"status": "paged", "id": "pg_8812"}',
            "tracefence.effect": "write",
        },
        name="execute_tool pager.trigger",
    )
    step = step_of(view)
    assert fields(step, *STEP_FIELDS) == {
        "tool": "pager.trigger",
        "call_id": "call_7",
        "effect": Effect.WRITE,
        "effect_source": EffectSource.DECLARED,
        "status": ToolStatus.OK,
        "idempotency_key": None,
        "arguments_sha256": sha('{"service":"db","severity":"high"}'),
        "arguments_unavailable": None,
        "result_recorded": True,
    }
    assert step.result_sha256 == sha('{"status": "paged", "id": "pg_8812"}')  # results are hashed as recorded
    assert step.span_id == "00f067aa0ba902b7"
    assert step.call_id_from_span is False
    assert step.malformed == ()
    assert step.arguments_json is None  # raw values only on opt-in
    assert step.result_value is None


def test_genai_structured_arguments_hash_like_their_json_text():
    text = step_of(span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": '{"b": [1, 2], "a": "x"}'}))
    structured = step_of(span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": {"a": "x", "b": [1, 2]}}))
    assert text.arguments_sha256 == structured.arguments_sha256 == sha('{"a":"x","b":[1,2]}')


def test_tool_name_from_the_span_name_after_execute_tool():
    step = step_of(span({"gen_ai.operation.name": "execute_tool"}, name="execute_tool send_email"))
    assert (step.tool, step.call_id, step.call_id_from_span) == ("send_email", "00f067aa0ba902b7", True)
    assert step.effect is Effect.UNKNOWN and step.effect_source is EffectSource.NONE
    assert step.arguments_unavailable == "arguments_not_recorded"
    assert step.arguments_sha256 is None


def test_older_span_with_only_gen_ai_tool_name_and_tool_arguments():
    # Older pydantic-ai "running tool" spans: no operation name, arguments as tool_arguments.
    view = span(
        {"gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "pyd_1", "tool_arguments": '{"customer": "demo-1"}', "tool_response": "found", "logfire.msg": "running tool: lookup"},
        name="running tool",
    )
    step = step_of(view)
    assert fields(step, "tool", "call_id", "status", "arguments_sha256", "result_recorded") == {
        "tool": "lookup",
        "call_id": "pyd_1",
        "status": ToolStatus.OK,
        "arguments_sha256": sha('{"customer":"demo-1"}'),
        "result_recorded": True,
    }
    assert step.result_sha256 == sha("found")


def test_openinference_tool_span():
    view = span(
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool.id": "oi-call-1",
            "tool.parameters": '{"type": "object", "properties": {"city": {"type": "string"}}}',
            "input.value": '{"city": "Paris", "days": 3}',
            "input.mime_type": "application/json",
            "output.value": "sunny",
            "output.mime_type": "text/plain",
        },
        name="get_weather",
    )
    step = step_of(view)
    assert fields(step, *STEP_FIELDS) == {
        "tool": "get_weather",
        "call_id": "oi-call-1",
        "effect": Effect.UNKNOWN,
        "effect_source": EffectSource.NONE,
        "status": ToolStatus.OK,
        "idempotency_key": None,
        "arguments_sha256": sha('{"city":"Paris","days":3}'),  # input.value, never tool.parameters (the schema)
        "arguments_unavailable": None,
        "result_recorded": True,
    }


def test_openinference_plain_text_input_is_a_string_argument():
    step = step_of(span({"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "weather in Paris", "input.mime_type": "text/plain"}))
    assert step.arguments_sha256 == sha('"weather in Paris"')
    assert step.malformed == ()


def test_openinference_json_mime_type_with_text_that_is_not_json_is_malformed():
    step = step_of(span({"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "{oops", "input.mime_type": "application/json"}))
    assert [m.field for m in step.malformed] == ["arguments"]
    assert step.arguments_sha256 is None


def test_openinference_tool_name_falls_back_to_the_span_name():
    step = step_of(span({"openinference.span.kind": "TOOL"}, name="lookup_order"))
    assert step.tool == "lookup_order"


def test_openllmetry_tool_span():
    view = span(
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "create_ticket",
            "traceloop.entity.input": '{"args": [], "kwargs": {"title": "db down", "priority": 1}}',
            "traceloop.entity.output": '{"ticket": "T-9"}',
            "tracefence.effect": "write",
        },
        name="create_ticket.tool",
    )
    step = step_of(view)
    assert fields(step, *STEP_FIELDS) == {
        "tool": "create_ticket",
        "call_id": "00f067aa0ba902b7",
        "effect": Effect.WRITE,
        "effect_source": EffectSource.DECLARED,
        "status": ToolStatus.OK,
        "idempotency_key": None,
        "arguments_sha256": sha('{"args":[],"kwargs":{"priority":1,"title":"db down"}}'),
        "arguments_unavailable": None,
        "result_recorded": True,
    }
    assert step.result_sha256 == sha('{"ticket": "T-9"}')


def test_openllmetry_entity_name_is_not_a_tool_name_on_other_span_kinds():
    assert span_to_step(span({"traceloop.span.kind": "workflow", "traceloop.entity.name": "create_ticket"}), CONFIG) is None


def test_langfuse_tool_observation():
    view = span(
        {"langfuse.observation.type": "tool", "langfuse.observation.input": '{"q": "refund policy"}', "langfuse.observation.output": '["doc-1"]'},
        name="search_docs",
    )
    step = step_of(view)
    assert fields(step, "tool", "call_id", "status", "arguments_sha256", "result_recorded") == {
        "tool": "search_docs",
        "call_id": "00f067aa0ba902b7",
        "status": ToolStatus.OK,
        "arguments_sha256": sha('{"q":"refund policy"}'),
        "result_recorded": True,
    }


def test_langsmith_tool_span():
    step = step_of(span({"langsmith.span.kind": "tool"}, name="calculator"))
    assert fields(step, "tool", "call_id", "effect", "status", "arguments_unavailable", "result_recorded") == {
        "tool": "calculator",
        "call_id": "00f067aa0ba902b7",
        "effect": Effect.UNKNOWN,
        "status": ToolStatus.OK,
        "arguments_unavailable": "arguments_not_recorded",
        "result_recorded": False,
    }


def test_vercel_ai_sdk_tool_call_span():
    view = span(
        {
            "operation.name": "ai.toolCall",
            "ai.operationId": "ai.toolCall",
            "ai.toolCall.name": "weather",
            "ai.toolCall.id": "call_vercel_1",
            "ai.toolCall.args": '{"location": "San Francisco"}',
            "ai.toolCall.result": '{"temperature": 72}',
        },
        name="ai.toolCall",
    )
    step = step_of(view)
    assert fields(step, "tool", "call_id", "effect", "status", "arguments_sha256", "result_recorded") == {
        "tool": "weather",
        "call_id": "call_vercel_1",
        "effect": Effect.UNKNOWN,
        "status": ToolStatus.OK,
        "arguments_sha256": sha('{"location":"San Francisco"}'),
        "result_recorded": True,
    }
    assert step.result_sha256 == sha('{"temperature": 72}')


def test_tracefence_declarations_alone_make_a_step():
    view = span(
        {"tracefence.effect": "write", "tracefence.status": "timeout", "tracefence.idempotency_key": "inv-17"},
        name="execute_tool invoice.create",
    )
    step = step_of(view)
    assert fields(step, "tool", "effect", "effect_source", "status", "idempotency_key") == {
        "tool": "invoice.create",
        "effect": Effect.WRITE,
        "effect_source": EffectSource.DECLARED,
        "status": ToolStatus.TIMEOUT,
        "idempotency_key": "inv-17",
    }


def test_tracefence_declarations_on_a_span_with_no_tool_name_are_malformed_tool():
    step = step_of(span({"tracefence.effect": "read"}, name="do stuff"))
    assert step.tool == ""
    assert [m.field for m in step.malformed] == ["tool"]


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ops", "gen_ai.tool.name": "pager.trigger"},
        {"gen_ai.operation.name": "chat", "gen_ai.tool.name": "pager.trigger", "gen_ai.tool.definitions": '[{"name": "pager.trigger"}]'},
        {"openinference.span.kind": "AGENT", "tool.name": "pager.trigger"},
        {"openinference.span.kind": "CHAIN", "tool.name": "pager.trigger", "input.value": "{}"},
        {"traceloop.span.kind": "agent", "traceloop.entity.name": "pager.trigger"},
        {"langfuse.observation.type": "agent", "tool.name": "pager.trigger"},
    ],
)
def test_a_span_that_merely_mentions_a_tool_is_not_a_step(attributes):
    assert span_to_step(span(attributes, name="invoke_agent ops"), CONFIG) is None


def test_one_span_tagged_by_two_conventions_is_one_step():
    view = span(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "input.value": '{"city": "Paris"}',
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_weather",
            "tracefence.effect": "read",
        },
        name="execute_tool get_weather",
    )
    normalized = normalize_trace([view], CONFIG)
    assert [(s.tool, s.call_id, s.effect, s.attempts, s.requested_only) for s in normalized.steps] == [
        ("get_weather", "call_1", Effect.READ, 1, False)
    ]


# --- status -----------------------------------------------------------------------------------------

TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "tracefence.effect": "write"}


@pytest.mark.parametrize(
    "extra,kwargs,expected",
    [
        ({}, {"status": "error", "events": (exception("TimeoutError"),)}, ToolStatus.TIMEOUT),
        ({}, {"status": "error", "events": (exception("httpx.ReadTimeout"),)}, ToolStatus.TIMEOUT),
        ({"error.type": "DEADLINE_EXCEEDED"}, {"status": "error"}, ToolStatus.TIMEOUT),
        ({"error.type": "timeout"}, {"status": "error"}, ToolStatus.TIMEOUT),
        ({}, {"status": "error", "events": (exception("asyncio.CancelledError"),)}, ToolStatus.UNKNOWN),
        ({}, {"status": "error", "events": (exception("ValueError"),)}, ToolStatus.ERROR),
        ({"error.type": "500"}, {"status": "error"}, ToolStatus.ERROR),
        ({}, {"status": "error"}, ToolStatus.ERROR),
        ({}, {"status": "unset"}, ToolStatus.OK),
        ({}, {"status": "ok"}, ToolStatus.OK),
        ({}, {"status": "unset", "end": None}, ToolStatus.UNKNOWN),
        ({}, {"status": "error", "end": None, "events": (exception("ValueError"),)}, ToolStatus.UNKNOWN),
        ({"tracefence.status": "timeout"}, {"status": "unset"}, ToolStatus.TIMEOUT),
    ],
)
def test_status_rules(extra, kwargs, expected):
    step = step_of(span({**TOOL, **extra}, **kwargs))
    assert step.status is expected
    assert step.malformed == ()


def test_a_declared_ok_the_span_contradicts_is_held_not_taken():
    """It was taken before (the declaration won); DECISIONS 255."""
    step = step_of(span({**TOOL, "tracefence.status": "ok"}, status="error", events=(exception("TimeoutError"),)))
    assert (step.status, [m.reason_code for m in step.malformed]) == (ToolStatus.UNKNOWN, ["status_evidence_conflict"])


def test_invalid_declared_status_is_malformed_and_unknown():
    step = step_of(span({**TOOL, "tracefence.status": "done"}))
    assert step.status is ToolStatus.UNKNOWN
    assert [(m.field, m.message) for m in step.malformed] == [("status", "status (a string of 4 characters) is not one of ok, error, timeout, unknown")]


# --- effect sources -------------------------------------------------------------------------------

RULES = TraceFenceConfig(tool_rules=[ToolRule(match="payments.*", effect="write"), ToolRule(match="read_*", effect="read"), ToolRule(match="*", idempotency_key_argument="rid")])


@pytest.mark.parametrize(
    "attributes,expected",
    [
        ({"gen_ai.tool.name": "payments.refund", "tracefence.effect": "read"}, (Effect.READ, EffectSource.DECLARED)),
        ({"gen_ai.tool.name": "payments.refund", "mcp.tool.annotations.readOnlyHint": True}, (Effect.WRITE, EffectSource.CONFIG)),
        ({"gen_ai.tool.name": "read_file", "http.request.method": "POST"}, (Effect.READ, EffectSource.CONFIG)),
        ({"gen_ai.tool.name": "fs.list", "mcp.tool.annotations.readOnlyHint": True}, (Effect.READ, EffectSource.MCP_HINT)),
        ({"gen_ai.tool.name": "fs.delete", "mcp.tool.annotations.readOnlyHint": False}, (Effect.WRITE, EffectSource.MCP_HINT)),
        ({"gen_ai.tool.name": "http_get", "http.request.method": "GET"}, (Effect.READ, EffectSource.HTTP_METHOD)),
        ({"gen_ai.tool.name": "http_post", "http.request.method": "POST"}, (Effect.WRITE, EffectSource.HTTP_METHOD)),
        ({"gen_ai.tool.name": "legacy_http", "http.method": "HEAD"}, (Effect.READ, EffectSource.HTTP_METHOD)),
        # Method tokens are case-sensitive (RFC 9110 section 9.1): "head" is no safe method (DECISIONS 204).
        ({"gen_ai.tool.name": "legacy_http", "http.method": "head"}, (Effect.UNKNOWN, EffectSource.HTTP_METHOD)),
        ({"gen_ai.tool.name": "mystery"}, (Effect.UNKNOWN, EffectSource.NONE)),
        ({"gen_ai.tool.name": "payments"}, (Effect.UNKNOWN, EffectSource.NONE)),  # the glob needs the dot
    ],
)
def test_effect_sources_first_that_says_anything_wins(attributes, expected):
    step = step_of(span(attributes), RULES)
    assert (step.effect, step.effect_source) == expected


@pytest.mark.parametrize("declared", ["delete", "WRITE", "", 1, True])
def test_invalid_declared_effect_is_malformed_never_guessed(declared):
    step = step_of(span({"gen_ai.tool.name": "payments.refund", "tracefence.effect": declared}), RULES)
    assert (step.effect, step.effect_source) == (Effect.UNKNOWN, EffectSource.DECLARED)
    assert [m.field for m in step.malformed] == ["effect"]
    plan = plan_spans(TRACE, [span({"gen_ai.tool.name": "payments.refund", "tracefence.effect": declared})], RULES).plan
    assert [(d.decision, d.reasons) for d in plan.steps] == [(Decision.REVIEW, ("malformed_effect", "effect_unknown", "arguments_not_recorded"))]


def test_invalid_declared_idempotency_key_is_malformed():
    step = step_of(span({**TOOL, "tracefence.idempotency_key": 17}))
    assert step.idempotency_key is None
    assert [m.field for m in step.malformed] == ["idempotency_key"]


# --- nesting: dispatch attempts and sub-agents ------------------------------------------------------

OUTER = "aaaaaaaaaaaaaaa1"


def _mcp_attempt(span_id: str, start: int, **kwargs) -> SpanView:
    return span(
        {"mcp.method.name": "tools/call", "gen_ai.tool.name": "payments.charge", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": '{"amount": 5}'},
        name="tools/call payments.charge",
        span_id=span_id,
        parent=OUTER,
        start=start,
        **kwargs,
    )


def test_mcp_client_spans_under_a_tool_span_are_dispatch_attempts_of_one_step():
    outer = span(
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge", "gen_ai.tool.call.id": "call_1", "tracefence.effect": "write"},
        name="execute_tool payments.charge",
        span_id=OUTER,
        start=1_000_000_000,
    )
    attempts = [_mcp_attempt("bbbbbbbbbbbbbbb1", 1_100_000_000, status="error", events=(exception("TimeoutError"),)), _mcp_attempt("bbbbbbbbbbbbbbb2", 1_200_000_000)]
    planned = plan_spans(TRACE, [attempts[1], outer, attempts[0]], CONFIG)
    (only,) = planned.normalized.steps
    assert fields(only, "call_id", "span_id", "tool", "attempts", "status", "arguments_sha256") == {
        "call_id": "call_1",
        "span_id": OUTER,
        "tool": "payments.charge",
        "attempts": 2,
        "status": ToolStatus.OK,  # the outer span's own status
        "arguments_sha256": sha('{"amount":5}'),  # filled from its first attempt
    }
    assert planned.normalized.attempt_of == {"bbbbbbbbbbbbbbb1": OUTER, "bbbbbbbbbbbbbbb2": OUTER}
    assert [(d.decision, d.reasons) for d in planned.plan.steps] == [(Decision.REVIEW, ("write_dispatched_more_than_once", "result_not_recorded"))]


def test_a_single_attempt_counts_once():
    outer = span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge", "tracefence.effect": "write"}, span_id=OUTER)
    planned = plan_spans(TRACE, [outer, _mcp_attempt("bbbbbbbbbbbbbbb1", 1_100_000_000)], CONFIG)
    assert [(s.attempts, s.call_id) for s in planned.normalized.steps] == [(1, OUTER)]
    assert [d.decision for d in planned.plan.steps] == [Decision.SKIP]


def test_a_tool_span_under_an_agent_under_a_tool_span_is_its_own_step():
    outer = span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delegate", "tracefence.effect": "read"}, span_id=OUTER, start=1)
    agent = span({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}, span_id="ccccccccccccccc1", parent=OUTER, start=2)
    inner = span(
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_email", "tracefence.effect": "write"},
        span_id="ccccccccccccccc2",
        parent="ccccccccccccccc1",
        start=3,
    )
    normalized = normalize_trace([inner, agent, outer], CONFIG)
    assert [(s.tool, s.span_id, s.attempts) for s in normalized.steps] == [("delegate", OUTER, 1), ("send_email", "ccccccccccccccc2", 1)]
    assert normalized.attempt_of == {}


def test_an_attempt_under_a_plain_span_under_a_tool_span_is_still_an_attempt():
    outer = span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge", "tracefence.effect": "write"}, span_id=OUTER, start=1)
    http = span({"http.request.method": "POST"}, name="POST", span_id="ddddddddddddddd1", parent=OUTER, start=2)
    attempt = _mcp_attempt("ddddddddddddddd2", 3)
    normalized = normalize_trace([outer, http, replace(attempt, parent_span_id="ddddddddddddddd1")], CONFIG)
    assert [(s.span_id, s.attempts) for s in normalized.steps] == [(OUTER, 1)]
    assert normalized.attempt_of == {"ddddddddddddddd2": OUTER}


def test_a_parent_whose_kind_attributes_are_not_strings_is_no_boundary():
    # OTLP attributes may hold arrays and kvlists anywhere; the walk up the parents must not trip on them.
    outer = span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge", "tracefence.effect": "write"}, span_id=OUTER, start=1)
    odd = span({"gen_ai.operation.name": ["invoke_agent"], "openinference.span.kind": {"k": "AGENT"}}, span_id="ddddddddddddddd1", parent=OUTER, start=2)
    inner = replace(_mcp_attempt("ddddddddddddddd2", 3), parent_span_id="ddddddddddddddd1")
    normalized = normalize_trace([outer, odd, inner], CONFIG)
    assert [(s.span_id, s.attempts) for s in normalized.steps] == [(OUTER, 1)]
    assert normalized.attempt_of == {"ddddddddddddddd2": OUTER}


def test_a_parent_cycle_does_not_loop():
    a = span({"gen_ai.tool.name": "a", "tracefence.effect": "read"}, span_id="eeeeeeeeeeeeeee1", parent="eeeeeeeeeeeeeee2")
    b = span({"gen_ai.tool.name": "b", "tracefence.effect": "read"}, span_id="eeeeeeeeeeeeeee2", parent="eeeeeeeeeeeeeee1")
    normalized = normalize_trace([a, b], CONFIG)
    # Corrupt parent ids never make a tool span vanish: each is a step of its own.
    assert sorted(s.tool for s in normalized.steps) == ["a", "b"]
    assert normalized.attempt_of == {}


def test_attempts_of_a_retry_wrapper_count_as_the_step_dispatches():
    # execute_tool > retry wrapper (itself a tool span) > two MCP calls: two calls were sent.
    outer = span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge", "gen_ai.tool.call.id": "call_1", "tracefence.effect": "write"}, span_id=OUTER, start=1)
    wrapper = span({"gen_ai.tool.name": "payments.charge", "retry.policy": "3x"}, name="retry payments.charge", span_id="ddddddddddddddd1", parent=OUTER, start=2)
    first = replace(_mcp_attempt("ddddddddddddddd2", 3), parent_span_id="ddddddddddddddd1")
    second = replace(_mcp_attempt("ddddddddddddddd3", 4), parent_span_id="ddddddddddddddd1")
    planned = plan_spans(TRACE, [second, wrapper, first, outer], CONFIG)
    assert [(s.call_id, s.attempts, s.arguments_sha256) for s in planned.normalized.steps] == [("call_1", 2, sha('{"amount":5}'))]
    assert planned.normalized.attempt_of == {"ddddddddddddddd1": OUTER, "ddddddddddddddd2": OUTER, "ddddddddddddddd3": OUTER}
    assert [(d.decision, d.reasons) for d in planned.plan.steps] == [(Decision.REVIEW, ("write_dispatched_more_than_once", "result_not_recorded"))]


def test_an_attempt_with_invalid_tracefence_values_makes_its_step_malformed():
    outer = span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payments.charge", "tracefence.effect": "write", "gen_ai.tool.call.result": "ok"}, span_id=OUTER)
    attempt = _mcp_attempt("bbbbbbbbbbbbbbb1", 1_100_000_000)
    attempt = replace(attempt, attributes={**attempt.attributes, "tracefence.effect": "bogus"})
    planned = plan_spans(TRACE, [outer, attempt], CONFIG)
    (step,) = planned.normalized.steps
    assert [(m.field, m.message) for m in step.malformed] == [("effect", "dispatch attempt bbbbbbbbbbbbbbb1: effect (a string of 5 characters) is not one of read, write, unknown")]
    assert [(d.decision, d.reasons) for d in planned.plan.steps] == [(Decision.REVIEW, ("malformed_effect",))]


# --- requested calls the trace does not show running ---------------------------------------------

CHAT = "fffffffffffffff1"


def _chat(parts: list, **kwargs) -> SpanView:
    return span(
        {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}])},
        name="chat gpt-4o",
        span_id=CHAT,
        start=500_000_000,
        end=900_000_000,
        **kwargs,
    )


def _call(call_id, name, arguments):
    part = {"type": "tool_call", "name": name, "arguments": arguments}
    if call_id is not None:
        part["id"] = call_id
    return part


def test_a_requested_call_with_no_tool_span_is_a_requested_only_step_with_status_unknown():
    planned = plan_spans(TRACE, [_chat([{"type": "text", "content": "paging"}, _call("call_9", "pager.trigger", {"service": "db"})])], RULES)
    (step,) = planned.normalized.steps
    assert fields(step, "call_id", "tool", "status", "requested_only", "arguments_sha256", "span_id", "start_time_unix_nano") == {
        "call_id": "call_9",
        "tool": "pager.trigger",
        "status": ToolStatus.UNKNOWN,
        "requested_only": True,
        "arguments_sha256": sha('{"service":"db"}'),
        "span_id": "",
        "start_time_unix_nano": 900_000_000,
    }
    assert [(d.decision, d.reasons) for d in planned.plan.steps] == [(Decision.REVIEW, ("effect_unknown", "requested_not_recorded"))]


def test_requested_calls_take_the_configured_effect():
    planned = plan_spans(TRACE, [_chat([_call("call_1", "read_file", '{"path": "a"}'), _call("call_2", "payments.charge", {"amount": 5})])], RULES)
    assert [(s.call_id, s.effect, s.effect_source) for s in planned.normalized.steps] == [
        ("call_1", Effect.READ, EffectSource.CONFIG),
        ("call_2", Effect.WRITE, EffectSource.CONFIG),
    ]
    assert [(d.decision, d.reasons) for d in planned.plan.steps] == [
        (Decision.REPLAY, ("declared_read", "requested_not_recorded")),
        (Decision.REVIEW, ("write_status_unknown", "requested_not_recorded")),
    ]
    assert planned.plan.replay_class is ReplayClass.REVIEW


def test_requested_calls_matched_by_call_id_are_not_duplicated():
    tool = span(
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file", "gen_ai.tool.call.id": "call_1", "tracefence.effect": "read"},
        span_id="1234567812345678",
        parent=None,
        start=950_000_000,
    )
    # Different arguments on purpose: the call id alone matches.
    chat = _chat([_call("call_1", "read_file", {"path": "a"}), _call("call_2", "read_file", {"path": "b"})])
    planned = plan_spans(TRACE, [tool, chat], CONFIG)
    assert [(s.call_id, s.requested_only) for s in planned.normalized.steps] == [("call_2", True), ("call_1", False)]


def test_requested_calls_matched_by_tool_and_canonical_arguments_when_tool_spans_have_no_call_id():
    tool = span({"gen_ai.tool.name": "read_file", "tool_arguments": '{"path": "a", "lines": 10}', "tracefence.effect": "read"}, span_id="1234567812345678", start=950_000_000)
    chat = _chat([_call("call_1", "read_file", {"lines": 10, "path": "a"}), _call("call_2", "read_file", {"lines": 10, "path": "a"}), _call(None, "read_file", {"path": "z"})])
    planned = plan_spans(TRACE, [chat, tool], CONFIG)
    steps = planned.normalized.steps
    # One span records one of the two identical requests; the other and the third stay requested-only.
    assert [(s.call_id, s.requested_only) for s in steps] == [("call_2", True), (f"{CHAT}/2", True), ("1234567812345678", False)]


def test_requested_call_with_other_arguments_than_the_unlabelled_tool_span_is_not_matched():
    tool = span({"gen_ai.tool.name": "read_file", "tool_arguments": '{"path": "a"}', "tracefence.effect": "read"}, span_id="1234567812345678", start=950_000_000)
    planned = plan_spans(TRACE, [_chat([_call("call_1", "read_file", {"path": "b"})]), tool], CONFIG)
    assert [(s.call_id, s.requested_only) for s in planned.normalized.steps] == [("call_1", True), ("1234567812345678", False)]


def test_openinference_llm_output_tool_calls_are_requested_calls():
    llm = span(
        {
            "openinference.span.kind": "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "oi_1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
            "llm.output_messages.0.message.tool_calls.1.tool_call.id": "oi_2",
            "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "send_email",
            "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": '{"to": "a@example.invalid"}',
        },
        name="ChatCompletion",
        span_id=CHAT,
        end=900_000_000,
    )
    tool = span({"openinference.span.kind": "TOOL", "tool.name": "get_weather", "tool.id": "oi_1", "input.value": '{"city": "Paris"}'}, span_id="1234567812345678", start=950_000_000)
    planned = plan_spans(TRACE, [llm, tool], CONFIG)
    assert [(s.call_id, s.tool, s.requested_only, s.status, s.arguments_sha256) for s in planned.normalized.steps] == [
        ("oi_2", "send_email", True, ToolStatus.UNKNOWN, sha('{"to":"a@example.invalid"}')),
        ("oi_1", "get_weather", False, ToolStatus.OK, sha('{"city":"Paris"}')),
    ]


# --- arguments and keys ---------------------------------------------------------------------------


def test_code_function_parameters_are_rebuilt_into_an_object():
    view = span({"gen_ai.tool.name": "forecast", "code.function.parameters.city.value": "Paris", "code.function.parameters.days.value": 3, "code.function.name": "forecast"})
    assert step_of(view).arguments_sha256 == sha('{"city":"Paris","days":3}')


def test_idempotency_key_from_configured_argument_fields():
    config = TraceFenceConfig(idempotency_key_arguments=["request.id", "idempotency_key"])
    view = span({"gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": '{"request": {"id": "r-1"}, "idempotency_key": "k-2"}'})
    assert step_of(view, config).idempotency_key == "r-1"
    assert step_of(view).idempotency_key == "k-2"  # default: idempotency_key


def test_idempotency_key_from_a_tool_rule_and_integers_become_strings():
    config = TraceFenceConfig(tool_rules=[ToolRule(match="invoice.*", idempotency_key_argument="order")])
    view = span({"gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.arguments": '{"order": 42, "idempotency_key": "k-2"}'})
    assert step_of(view, config).idempotency_key == "42"


def test_idempotency_key_is_never_the_tool_call_id():
    view = span({"gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "call_abc", "gen_ai.tool.call.arguments": '{"invoice": "demo-17"}'})
    step = step_of(view)
    assert step.call_id == "call_abc"
    assert step.idempotency_key is None


def test_declared_idempotency_key_wins_over_arguments():
    view = span({"gen_ai.tool.name": "invoice.create", "tracefence.idempotency_key": "decl-1", "gen_ai.tool.call.arguments": '{"idempotency_key": "arg-1"}'})
    assert step_of(view).idempotency_key == "decl-1"


def test_arguments_beyond_the_limits_are_unavailable_not_parsed():
    config = TraceFenceConfig(limits=Limits(max_argument_bytes=64, max_argument_depth=3))
    big = step_of(span({"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": json.dumps({"blob": "x" * 100})}), config)
    deep = step_of(span({"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": '{"a": {"b": {"c": {"d": 1}}}}'}), config)
    huge_int = step_of(span({"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": '{"n": 123456789012345678901234567890}'}))
    nan = step_of(span({"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": '{"n": NaN}'}))
    assert [(s.arguments_sha256, s.arguments_unavailable) for s in (big, deep, huge_int)] == [
        (None, "arguments_too_large"),
        (None, "arguments_too_deep"),
        (None, "arguments_not_i_json"),
    ]
    assert [m.field for m in nan.malformed] == ["arguments"]


def test_raw_values_only_when_opted_in():
    config = TraceFenceConfig(store_raw_values=True)
    step = step_of(span({"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": '{"b": 1, "a": 2}', "gen_ai.tool.call.result": "done"}), config)
    assert (step.arguments_json, step.result_value) == ('{"a":2,"b":1}', "done")


# --- both entry points give the same step ---------------------------------------------------------


def _sdk_spans():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span(
            "execute_tool invoice.create",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "invoice.create",
                "gen_ai.tool.call.id": "call_17",
                "gen_ai.tool.call.arguments": '{"invoice": "demo-17", "idempotency_key": "inv-17"}',
                "tracefence.effect": "write",
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as tool_span:
            tool_span.record_exception(TimeoutError("no answer"))
            tool_span.set_status(Status(StatusCode.ERROR, "no answer"))
        with tracer.start_as_current_span(
            "execute_tool read_file",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file", "gen_ai.tool.call.id": "call_18", "tracefence.effect": "read"},
        ) as read_span:
            read_span.set_attribute("gen_ai.tool.call.result", "contents")
    provider.shutdown()
    return exporter.get_finished_spans()


def test_from_otlp_and_from_readable_give_the_same_steps():
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    readable = _sdk_spans()
    request = encode_spans(readable)
    otlp = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(otlp) == len(readable) == 3
    by_id = {s.span_id.hex(): s for s in otlp}
    views_sdk = [from_readable(s, i) for i, s in enumerate(readable)]
    views_otlp = [from_otlp(by_id[v.span_id], i) for i, v in enumerate(views_sdk)]
    for a, b in zip(views_sdk, views_otlp):
        assert (a.trace_id, a.span_id, a.parent_span_id, a.start_time_unix_nano, a.end_time_unix_nano, a.status_code) == (
            b.trace_id,
            b.span_id,
            b.parent_span_id,
            b.start_time_unix_nano,
            b.end_time_unix_nano,
            b.status_code,
        )
    steps_sdk = [span_to_step(v, CONFIG) for v in views_sdk]
    steps_otlp = [span_to_step(v, CONFIG) for v in views_otlp]
    assert steps_sdk == steps_otlp
    tools = [s for s in steps_sdk if s is not None]
    assert [(s.tool, s.call_id, s.status, s.idempotency_key, s.arguments_sha256, s.result_recorded) for s in tools] == [
        ("invoice.create", "call_17", ToolStatus.TIMEOUT, "inv-17", sha('{"idempotency_key":"inv-17","invoice":"demo-17"}'), False),
        ("read_file", "call_18", ToolStatus.OK, None, None, True),
    ]
    trace_id = views_sdk[0].trace_id
    assert plan_spans(trace_id, views_sdk, CONFIG).plan == plan_spans(trace_id, views_otlp, CONFIG).plan


def test_otlp_kvlist_arguments_and_int_values():
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

    arguments = AnyValue(
        kvlist_value=KeyValueList(
            values=[
                KeyValue(key="tags", value=AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="a"), AnyValue(int_value=2)]))),
                KeyValue(key="amount", value=AnyValue(int_value=1250)),
            ]
        )
    )
    otlp = Span(
        trace_id=bytes.fromhex(TRACE),
        span_id=bytes.fromhex("00f067aa0ba902b7"),
        name="execute_tool payments.charge",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=[
            KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="execute_tool")),
            KeyValue(key="gen_ai.tool.call.id", value=AnyValue(int_value=77)),
            KeyValue(key="gen_ai.tool.call.arguments", value=arguments),
        ],
        status=Status(code=Status.STATUS_CODE_ERROR, message="deadline exceeded"),
    )
    step = step_of(from_otlp(otlp))
    assert fields(step, "tool", "call_id", "status", "arguments_sha256") == {
        "tool": "payments.charge",
        "call_id": "77",
        "status": ToolStatus.TIMEOUT,
        "arguments_sha256": sha('{"amount":1250,"tags":["a",2]}'),
    }


# --- never raises ---------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from otel_tracefence.normalize import conventions as cv  # noqa: E402

_KEYS = sorted(
    {
        *cv.TRACEFENCE_INPUTS,
        cv.GEN_AI_OPERATION,
        cv.GEN_AI_TOOL_NAME,
        *cv.CALL_ID_KEYS,
        *cv.ARGUMENT_KEYS,
        *cv.RESULT_KEYS,
        *cv.MIME_TYPE_KEYS.values(),
        *cv.MCP_READ_ONLY_HINT_KEYS,
        *cv.HTTP_METHOD_KEYS,
        *(key for key, _ in cv.TOOL_KIND_MARKERS),
        *cv.TOOL_PRESENCE_MARKERS,
        "tool.name",
        "traceloop.entity.name",
        "error.type",
        cv.GEN_AI_OUTPUT_MESSAGES,
        "code.function.parameters.x.value",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id",
    }
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=8),
    st.sampled_from(["execute_tool", "tool", "TOOL", "tools/call", "read", "write", "ok", "timeout", "GET", '{"a": 1}', "[1, 2]", "{", "NaN", '[{"parts": [{"type": "tool_call", "name": "t", "id": 1, "arguments": "{}"}]}]']),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)), max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=8),
            st.sampled_from(["", "execute_tool x", "execute_tool ", "tool"]),
            st.sampled_from(["unset", "ok", "error"]),
            st.sampled_from([None, 5]),
            st.sampled_from([None, "0000000000000001", "0000000000000002"]),
        ),
        max_size=4,
    )
)
def test_normalizing_and_planning_never_raise_for_any_attributes(spans):
    views = [
        span(attributes, name=name, status=status, end=end, span_id=f"{i + 1:016x}", parent=parent, events=(exception("X"),) if status == "error" else ())
        for i, (attributes, name, status, end, parent) in enumerate(spans)
    ]
    planned = plan_spans(TRACE, views, CONFIG)
    for d in planned.plan.steps:
        if d.step.malformed:
            assert d.decision is Decision.REVIEW
        if d.step.effect is Effect.WRITE and d.step.status is not ToolStatus.OK:
            assert d.decision in (Decision.REVIEW, Decision.CONFLICT)
    assert plan_spans(TRACE, list(reversed(views)), CONFIG).plan == planned.plan
