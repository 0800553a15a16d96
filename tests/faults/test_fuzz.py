"""Fuzzing (issue 5, item 1): any span, row or file gives a plan or a specific error, never another exception,
and the planner's promises hold for every input.

Four parts, each bounded so the file runs in well under a minute on two cores:

* any OTLP protobuf ``Span`` (every ``AnyValue`` kind, ids of every length, parent cycles, odd
  status codes and flags) through ``from_otlp`` → ``plan_spans``: a plan, or the service's
  ``invalid_reason`` rejects the span;
* any text through ``plan_text`` (and bytes through ``decode_utf8``): plans and ``InputError`` s, or
  ``UnreadableInput``; what the CLI then prints (``plan_to_json``, the table, the errors) never fails;
* the planner's invariants over random ``ToolStep`` lists drawn from small pools, so groups collide,
  checked against an oracle written separately from the rules;
* ``python -m otel_tracefence plan FILE`` on generated files: exit code 0, 1 or 2, never a traceback.

Every fault the fuzzing found is kept as an explicit case: an ``@example`` of the test that found
it, or a text in ``_REGRESSION_TEXTS`` (run in every format with both configurations), plus a
test that pins what the fix now answers. ``TRACEFENCE_FUZZ_SCALE=N`` multiplies every example count.
The coverage-guided runs (atheris) are ``bench/fuzz_otlp.py`` and ``bench/fuzz_csv.py`` (``make fuzz``).
"""

from __future__ import annotations

import pytest

import base64
import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from otel_tracefence.core import reasons
from otel_tracefence.cli import table
from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import ConfigError, Limits, ToolRule, TraceFenceConfig
from otel_tracefence.core.model import Decision, Effect, EffectSource, MalformedField, ReplayClass, ToolStatus, ToolStep, TracePlan
from otel_tracefence.normalize import conventions as cv
from otel_tracefence.normalize import from_otlp
from otel_tracefence.normalize.values import arguments_from_value
from otel_tracefence.pipeline.plan import group_request, plan_spans
from otel_tracefence.planner import plan_trace
from otel_tracefence.readers.errors import InputError, UnreadableInput, decode_utf8
from otel_tracefence.readers.rows import _json_array_rows
from otel_tracefence.core.schema import plan_to_json
from otel_tracefence.service.otlp_spans import invalid_reason

ROOT = Path(__file__).resolve().parents[2]

DEFAULT = TraceFenceConfig()
# Rules, raw values and tight limits, so the config, raw-value and limit paths are fuzzed too.
TIGHT = TraceFenceConfig(
    tool_rules=[
        ToolRule(match="read_*", effect="read"),
        ToolRule(match="pay*", effect="write", idempotency_key_argument="k"),
        ToolRule(match="x", idempotency_key_argument="a.b"),
    ],
    idempotency_key_arguments=["idempotency_key", "k"],
    store_raw_values=True,
    limits=Limits(max_argument_bytes=64, max_argument_depth=3, max_related_call_ids=2),
)
CONFIGS = st.sampled_from([DEFAULT, TIGHT])
# TRACEFENCE_FUZZ_SCALE=20 runs every property test twenty times longer (a deeper run by hand).
SCALE = float(os.environ.get("TRACEFENCE_FUZZ_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

DECISIONS = {Decision.REPLAY, Decision.SKIP, Decision.REVIEW, Decision.CONFLICT}
FENCING = (Decision.REVIEW, Decision.CONFLICT)


# --- shared checks -------------------------------------------------------------------------------


def check_plan(plan: TracePlan) -> None:
    """What every plan from every door promises, and that the CLI can print it."""
    for d in plan.steps:
        assert d.decision in DECISIONS
        assert d.reasons, d
        if d.decision is Decision.REPLAY:
            assert d.step.effect is Effect.READ, d
        if d.decision is Decision.SKIP:
            assert (d.step.effect, d.step.status) == (Effect.WRITE, ToolStatus.OK), d
        if d.step.effect is not Effect.READ and d.step.status is not ToolStatus.OK:
            assert d.decision in FENCING, d
        if d.step.effect is Effect.UNKNOWN or d.step.malformed or (d.step.effect is Effect.WRITE and d.step.attempts > 1):
            assert d.decision in FENCING, d
    assert plan.replay_class == oracle_class(plan)
    # The CLI prints every plan as canonical protobuf JSON (and stdout is UTF-8): that must never fail.
    plan_to_json(plan).encode("utf-8")
    table.render([plan]).encode("utf-8")


def oracle_class(plan: TracePlan) -> ReplayClass | None:
    """The replay class recomputed from the decisions alone: the most restrictive any step asks for."""
    if not plan.steps:
        return None

    def step_class(d) -> ReplayClass:
        if d.decision in FENCING:
            return ReplayClass.REVIEW
        if d.decision is Decision.SKIP:
            return ReplayClass.INJECTED if d.step.result_recorded else ReplayClass.STATIC
        return ReplayClass.DYNAMIC

    return max((step_class(d) for d in plan.steps), key=lambda c: c.rank)


# --- 1. any OTLP protobuf span -------------------------------------------------------------------

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
        *cv.AGENT_BOUNDARY_KINDS,
        "tool.name",
        "traceloop.entity.name",
        "error.type",
        "exception.type",
        cv.GEN_AI_OUTPUT_MESSAGES,
        "code.function.parameters.x.value",
        "code.function.parameters..value",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
        "llm.output_messages.0.message.tool_calls.1.tool_call.id",
        "llm.output_messages.00.message.tool_calls.0.tool_call.id",
    }
)
_WORDS = [
    "execute_tool", "tool", "TOOL", "tools/call", "read", "write", "unknown", "ok", "error", "timeout", "GET", "POST",
    "invoke_agent", "chat", "AGENT", "LLM", "agent", "workflow", "application/json", "text/plain", "TimeoutError",
    "DEADLINE_EXCEEDED", "CancelledError", "pay", "pay.now", "read_file", "x", "k1", "",
    '{"a": 1}', '{"idempotency_key": "k1"}', '{"k": 1, "a": {"b": "z"}}', '{"idempotency_key": 7}', "[1, 2]", "{", "NaN", "1e400",
    "1" * 400, '{"n": ' + "9" * 4400 + "}", '"\\ud800"', "[" * 70 + "]" * 70,
    '[{"parts": [{"type": "tool_call", "name": "pay", "id": "c1", "arguments": "{}"}]}]',
    '[{"parts": [{"type": "tool_call", "name": "t", "arguments": {"k": 1}}, {"type": "tool_call", "name": "t", "id": 3}]}]',
]
_TEXT = st.one_of(st.sampled_from(_WORDS), st.text(max_size=12))


def _any_value(spec) -> AnyValue:
    kind, payload = spec
    value = AnyValue()
    if kind == "empty":
        pass
    elif kind == "array":
        value.array_value.SetInParent()
        value.array_value.values.extend(_any_value(child) for child in payload)
    elif kind == "kvlist":
        value.kvlist_value.SetInParent()
        value.kvlist_value.values.extend(KeyValue(key=k, value=_any_value(child)) for k, child in payload)
    else:
        setattr(value, kind, payload)
    return value


_SCALAR_SPECS = st.one_of(
    st.just(("empty", None)),
    st.tuples(st.just("string_value"), _TEXT),
    st.tuples(st.just("bool_value"), st.booleans()),
    st.tuples(st.just("int_value"), st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, 1, 2**53, -(2**63)]))),
    st.tuples(st.just("double_value"), st.floats()),
    st.tuples(st.just("bytes_value"), st.binary(max_size=8)),
)
_VALUE_SPECS = st.recursive(
    _SCALAR_SPECS,
    lambda inner: st.one_of(
        st.tuples(st.just("array"), st.lists(inner, max_size=3)),
        st.tuples(st.just("kvlist"), st.lists(st.tuples(st.one_of(st.sampled_from(["parts", "type", "name", "id", "arguments", "idempotency_key", "k", "a", "b"]), st.text(max_size=4)), inner), max_size=3)),
    ),
    max_leaves=10,
)
_ATTRIBUTES = st.lists(st.tuples(st.one_of(st.sampled_from(_KEYS), st.text(max_size=10)), _VALUE_SPECS), max_size=8)

_TRACE_IDS = st.one_of(st.sampled_from([b"\x01" * 16, b"\x02" * 16, b"", b"\x00" * 16, b"\x01" * 15, b"\x01" * 17]), st.binary(max_size=20))
_SPAN_ID_POOL = [bytes([i]) * 8 for i in range(1, 5)]
_SPAN_IDS = st.one_of(st.sampled_from(_SPAN_ID_POOL + [b"", b"\x00" * 8, b"\x01" * 7, b"\x01" * 9]), st.binary(max_size=10))
_TIMES = st.one_of(st.sampled_from([0, 1, 2, 10, 2**64 - 1]), st.integers(0, 2**64 - 1))


@st.composite
def otlp_spans(draw) -> Span:
    span = Span(
        trace_id=draw(_TRACE_IDS),
        span_id=draw(_SPAN_IDS),
        parent_span_id=draw(st.one_of(st.just(b""), _SPAN_IDS)),  # the pool makes self-parents and cycles common
        name=draw(st.one_of(st.sampled_from(["execute_tool pay", "execute_tool ", "execute_tool read_file", "running tool", "pay", ""]), _TEXT)),
        kind=draw(st.integers(0, 6)),
        flags=draw(st.one_of(st.sampled_from([0, 0x100, 0x200, 0x300]), st.integers(0, 2**32 - 1))),
        start_time_unix_nano=draw(_TIMES),
        end_time_unix_nano=draw(_TIMES),
        status=Status(code=draw(st.sampled_from([0, 1, 2, 3, 99])), message=draw(_TEXT)),
    )
    span.attributes.extend(KeyValue(key=k, value=_any_value(v)) for k, v in draw(_ATTRIBUTES))
    for name, attributes in draw(st.lists(st.tuples(st.sampled_from(["exception", "event", ""]), _ATTRIBUTES), max_size=2)):
        event = span.events.add(name=name)
        event.attributes.extend(KeyValue(key=k, value=_any_value(v)) for k, v in attributes)
    return span


_TOOLISH = {
    # What tool spans usually carry, each value drawn from a few good ones and a few bad ones.
    "gen_ai.operation.name": [("string_value", "execute_tool"), ("string_value", "invoke_agent"), ("string_value", "chat")],
    "gen_ai.tool.name": [("string_value", "pay"), ("string_value", "read_file"), ("string_value", "")],
    "gen_ai.tool.call.id": [("string_value", "c1"), ("string_value", "c2"), ("int_value", 7), ("string_value", "")],
    "tracefence.effect": [("string_value", "write"), ("string_value", "write"), ("string_value", "read"), ("string_value", "delete"), ("int_value", 1)],
    "tracefence.status": [("string_value", "ok"), ("string_value", "timeout"), ("string_value", "OK"), ("bool_value", True)],
    "tracefence.idempotency_key": [("string_value", "k1"), ("string_value", "k2"), ("string_value", ""), ("int_value", 3)],
    "gen_ai.tool.call.arguments": [
        ("string_value", '{"a": 1}'),
        ("string_value", '{"a": 2, "idempotency_key": "k1"}'),
        ("string_value", "{not json"),
        ("kvlist", [("a", ("int_value", 1))]),
        ("bytes_value", b"{}"),
    ],
    "gen_ai.tool.call.result": [("string_value", "done"), ("kvlist", []), ("empty", None)],
    "error.type": [("string_value", "TimeoutError"), ("string_value", "CancelledError"), ("string_value", "ValueError")],
    "mcp.method.name": [("string_value", "tools/call")],
    "gen_ai.output.messages": [
        ("string_value", '[{"parts": [{"type": "tool_call", "name": "pay", "id": "c1", "arguments": "{\\"a\\": 1}"}]}]'),
        ("string_value", '[{"parts": [{"type": "tool_call", "name": "pay", "id": "c1", "arguments": "{\\"a\\": 2}"}]}]'),
        ("string_value", '[{"parts": [{"type": "tool_call", "name": "pay", "arguments": {}}]}]'),
    ],
    "http.request.method": [("string_value", "GET"), ("string_value", "POST")],
}


@st.composite
def tool_like_spans(draw) -> Span:
    """A span with valid ids and the attributes of a tool span: most reach the planner as steps."""
    span = Span(
        trace_id=draw(st.sampled_from([b"\x01" * 16, b"\x02" * 16])),
        span_id=draw(st.sampled_from(_SPAN_ID_POOL)),
        parent_span_id=draw(st.sampled_from([b"", *_SPAN_ID_POOL])),
        name=draw(st.sampled_from(["execute_tool pay", "tools/call pay", "invoke_agent a", ""])),
        start_time_unix_nano=draw(st.integers(0, 3)),
        end_time_unix_nano=draw(st.sampled_from([0, 5])),
        status=Status(code=draw(st.sampled_from([0, 1, 2])), message=draw(st.sampled_from(["", "deadline exceeded", "cancelled"]))),
    )
    keys = draw(st.sets(st.sampled_from(sorted(_TOOLISH))))
    span.attributes.extend(KeyValue(key=k, value=_any_value(draw(st.sampled_from(_TOOLISH[k])))) for k in sorted(keys))
    span.attributes.extend(KeyValue(key=k, value=_any_value(v)) for k, v in draw(st.lists(st.tuples(st.sampled_from(_KEYS), _VALUE_SPECS), max_size=2)))
    if draw(st.integers(0, 3)) == 0:
        span.events.add(name="exception").attributes.append(KeyValue(key="exception.type", value=AnyValue(string_value=draw(st.sampled_from(["TimeoutError", "KeyError"])))))
    return span


def _request(spans: list[Span]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(spans)
    return request


def _attrs(**attributes) -> list[KeyValue]:
    return [KeyValue(key=k, value=_any_value(v)) for k, v in attributes.items()]


def _tool_span(span_id: bytes, *, parent: bytes = b"", name: str = "execute_tool pay", end: int = 5, **attributes) -> Span:
    span = Span(trace_id=b"\x01" * 16, span_id=span_id, parent_span_id=parent, name=name, end_time_unix_nano=end)
    span.attributes.extend(_attrs(**attributes))
    return span


def _requesting(span_id: bytes, end: int, arguments: str) -> Span:
    """A model span whose output asks for call c9."""
    parts = [{"type": "tool_call", "name": "pay", "id": "c9", "arguments": arguments}]
    return _tool_span(span_id, name="chat m", end=end, **{"gen_ai.operation.name": ("string_value", "chat"), "gen_ai.output.messages": ("string_value", json.dumps([{"parts": parts}]))})


@settings(max_examples=examples(250), **FAST)
@given(st.one_of(st.lists(otlp_spans(), max_size=6), st.lists(tool_like_spans(), max_size=6), st.lists(st.one_of(otlp_spans(), tool_like_spans()), max_size=6)), CONFIGS)
# Regressions: an OpenInference output-message index too long for int() (ValueError in requested.py);
# a cycle of tool spans; an empty kvlist and an empty AnyValue as arguments.
@example(
    [_tool_span(b"\x01" * 8, **{"llm.output_messages." + "1" * 5000 + ".message.tool_calls.0.tool_call.function.name": ("string_value", "pay"), "openinference.span.kind": ("string_value", "LLM")})],
    DEFAULT,
)
@example(
    [_tool_span(b"\x01" * 8, parent=b"\x02" * 8), _tool_span(b"\x02" * 8, parent=b"\x01" * 8)],
    DEFAULT,
)
@example([_tool_span(b"\x01" * 8, **{"gen_ai.tool.call.arguments": ("kvlist", []), "gen_ai.tool.call.result": ("empty", None)})], TIGHT)
# Two different spans under one span id: one step was dropped, which one depending on the input order.
@example(
    [
        _tool_span(b"\x01" * 8, **{"gen_ai.operation.name": ("string_value", "execute_tool"), "error.type": ("string_value", "TimeoutError")}),
        _tool_span(b"\x01" * 8, **{"mcp.method.name": ("string_value", "tools/call"), "tracefence.effect": ("string_value", "read")}),
    ],
    DEFAULT,
)
# Two model spans asking for the same call id, no tool span: the step came from whichever was given first.
@example([_requesting(b"\x01" * 8, 2, "{}"), _requesting(b"\x02" * 8, 6, '{"x": 1}')], DEFAULT)
# A parent cycle through two spans under one span id (one names the tool span its parent, one itself): the held
# step's message named whichever of the two came last.
@example(
    [_tool_span(b"\x01" * 8, parent=b"\x02" * 8, **{"gen_ai.operation.name": ("string_value", "execute_tool"), "gen_ai.tool.name": ("string_value", "pay")}), _tool_span(b"\x02" * 8, parent=b"\x01" * 8, name="a"), _tool_span(b"\x02" * 8, parent=b"\x02" * 8, name="b")],
    DEFAULT,
)
def test_any_otlp_span_gives_a_plan_or_is_rejected_by_invalid_reason(spans, config):
    request = ExportTraceServiceRequest.FromString(_request(spans).SerializeToString())
    valid = [span for span in request.resource_spans[0].scope_spans[0].spans if invalid_reason(span) is None]
    # The service's path: spans invalid_reason rejects never reach the normalizer.
    for trace_id, views in group_request(_request(valid)).items():
        planned = plan_spans(trace_id, views, config)
        check_plan(planned.plan)
        assert plan_spans(trace_id, list(reversed(views)), config).plan == planned.plan
    # The normalizer itself never raises, even for spans the service would reject (bad ids).
    for trace_id, views in group_request(request).items():
        check_plan(plan_spans(trace_id, views, config).plan)


def test_a_span_delivered_twice_is_one_step_and_two_spans_sharing_an_id_are_two_malformed_steps():
    write = _tool_span(b"\x01" * 8, **{"tracefence.effect": ("string_value", "write"), "error.type": ("string_value", "TimeoutError")})
    read = _tool_span(b"\x01" * 8, name="execute_tool read_file", **{"tracefence.effect": ("string_value", "read")})
    views = [from_otlp(write, 0), from_otlp(write, 1)]
    plan = plan_spans("01" * 16, views, DEFAULT).plan
    assert [(d.step.tool, d.step.sequence, d.step.malformed) for d in plan.steps] == [("pay", 0, ())]
    views = [from_otlp(read, 0), from_otlp(write, 1)]
    plan = plan_spans("01" * 16, views, DEFAULT).plan
    assert sorted(d.step.tool for d in plan.steps) == ["pay", "read_file"]
    assert all(d.decision is Decision.REVIEW and "malformed_span_id" in d.reasons for d in plan.steps)
    assert plan_spans("01" * 16, views[::-1], DEFAULT).plan == plan


def test_two_different_calls_requested_under_one_call_id_are_two_steps_whatever_the_input_order():
    # Models that number call ids per turn reuse them: the same id with other arguments is another request.
    views = [from_otlp(_requesting(b"\x02" * 8, 6, '{"x": 1}'), 0), from_otlp(_requesting(b"\x01" * 8, 2, "{}"), 1)]
    plan = plan_spans("01" * 16, views, DEFAULT).plan
    assert [(d.step.call_id, d.step.start_time_unix_nano) for d in plan.steps] == [("c9", 2), ("c9", 6)]
    assert plan_spans("01" * 16, views[::-1], DEFAULT).plan == plan


# --- 2. any text through the CLI's reader --------------------------------------------------------

_FORMATS = st.sampled_from(["auto", "auto", "csv", "json", "ndjson", "otlp-json"])
_COLUMNS = ["trace_id", "call_id", "id", "tool", "effect", "status", "idempotency_key", "arguments", "result", "start_time", "extra"]
_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**64, -1, 2**63, 10**30, 0]),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
    st.sampled_from(["read", "write", "ok", "timeout", "unknown", "2024-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "²", "١٢", "1" * 30, "\ud800"]),
)
_JSON_VALUES = st.recursive(_JSON_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=8)


_VALID_CELLS = {
    "trace_id": ["t1", "t2", ""],
    "call_id": ["c1", "c2", "c3", 7],
    "id": ["c1", "c4"],
    "tool": ["pay", "pay.now", "read_file", "x", "mail"],
    "effect": ["read", "write", "unknown"],
    "status": ["ok", "error", "timeout", "unknown"],
    "idempotency_key": ["k1", "k2", 3],
    "arguments": [{"a": 1}, {"a": 2}, {"k": "k1", "a": {"b": "z"}}, {"idempotency_key": "k1"}, [1], 10**20],
    "result": [{"r": 1}, "done"],
    "start_time": [0, 5, "5", "2024-06-01T00:00:00+00:00", 2**64 - 1],
    "extra": [None, 1, "x"],
}
# Near misses: the right name with a value of the wrong kind or out of range.
_ODD_CELLS = {
    "trace_id": [{"t": 1}, 1.5, True],
    "call_id": [1.5, [1], True],
    "id": [{}],
    "tool": [3, ["pay"]],
    "effect": ["delete", "READ", 1],
    "status": ["OK", "failed", 0],
    "idempotency_key": [1.5, {"k": 1}, ""],
    "arguments": ["{not json", "[1,", "NaN", '"\\ud800"'],
    "result": [[], 0],
    "start_time": ["2024-06-01", "-3", -3, 2**64, "1" * 25, "²", "0001-01-01T00:00:00+01:00", 1.5],
    "extra": [[]],
}


def _cell_values(column: str, clean: bool) -> st.SearchStrategy:
    """Values of a row field: valid ones, or (unless ``clean``) now and then a near miss or any JSON value."""
    valid = st.sampled_from(_VALID_CELLS[column])
    if clean:
        return valid
    odd = st.sampled_from(_ODD_CELLS[column])
    return st.integers(0, 9).flatmap(lambda n: odd if n == 0 else _JSON_VALUES if n == 1 else valid)


_ROW_COLUMNS = st.tuples(st.integers(0, 3).map(bool), st.lists(st.sampled_from(_COLUMNS), max_size=len(_COLUMNS))).map(
    # Mostly with the columns a row needs, so many files are clean and reach the planner whole.
    lambda drawn: list(dict.fromkeys((["call_id", "tool", "effect", "status"] if drawn[0] else []) + drawn[1])) or ["tool"]
)


@st.composite
def json_rows(draw) -> list[dict]:
    columns = draw(_ROW_COLUMNS)
    clean = draw(st.integers(0, 2)) == 0
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        row = {column: draw(_cell_values(column, clean)) for column in columns if (clean and column in ("call_id", "tool")) or draw(st.integers(0, 9))}
        rows.append(row)
    return rows


def _dumps(value, draw) -> str:
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@st.composite
def ndjson_texts(draw) -> str:
    lines = [_dumps(row, draw) for row in draw(json_rows())]
    lines += draw(st.lists(st.sampled_from(["", "[1]", "7", "{", '{"tool": "x", "call_id": 1e999}', '{"a": NaN}', "{" + '"n": ' + "1" * 5000 + "}"]), max_size=2))
    lines = draw(st.permutations(lines))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@st.composite
def json_array_texts(draw) -> str:
    rows: list = draw(json_rows())
    rows += draw(st.lists(_JSON_VALUES, max_size=2))
    text = json.dumps(rows, indent=draw(st.sampled_from([None, 1])), ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 4)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


def _cell(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)


@st.composite
def csv_texts(draw) -> str:
    columns = draw(_ROW_COLUMNS)
    clean = draw(st.integers(0, 2)) == 0
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(columns)
    for _ in range(draw(st.integers(0, 5))):
        cells = [_cell(draw(_cell_values(c, clean))) if (clean and c in ("call_id", "tool")) or draw(st.integers(0, 9)) else "" for c in columns]
        if draw(st.integers(0, 6)) == 0:
            cells = cells[: draw(st.integers(0, len(cells)))] + draw(st.lists(_TEXT, max_size=2))  # ragged
        writer.writerow(cells)
    text = out.getvalue()
    if draw(st.integers(0, 6)) == 0:
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(['"', "\x00", ",", "\n", '"a"b'])) + text[cut:]
    return text


def _hex(n: int) -> st.SearchStrategy:
    return st.one_of(st.sampled_from(["01" * n, "02" * n, "00" * n, "0" * (2 * n - 1), "zz" * n, ""]), st.text("0123456789abcdefABCDEF", max_size=2 * n + 2))


def _otlp_value(draw, depth: int = 0):
    kind = draw(st.sampled_from(["stringValue", "intValue", "doubleValue", "boolValue", "bytesValue", "arrayValue", "kvlistValue", "wrong", "empty"]))
    if kind == "empty":
        return {}
    if kind == "wrong":
        return draw(_JSON_VALUES)
    if kind == "arrayValue":
        return {kind: {"values": [_otlp_value(draw, depth + 1) for _ in range(draw(st.integers(0, 2 if depth < 3 else 0)))]}}
    if kind == "kvlistValue":
        return {kind: {"values": [{"key": draw(_TEXT), "value": _otlp_value(draw, depth + 1)} for _ in range(draw(st.integers(0, 2 if depth < 3 else 0)))]}}
    good = {
        "stringValue": _TEXT,
        "intValue": st.one_of(st.integers(-(2**63), 2**63 - 1).map(str), st.integers(-(2**63), 2**63 - 1)),
        "doubleValue": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["NaN", "Infinity"])),
        "boolValue": st.booleans(),
        "bytesValue": st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode()),
    }[kind]
    return {kind: draw(st.one_of(good, good, good, _JSON_SCALARS))}


_SPAN_HEX_IDS = [f"{i:016x}" for i in range(1, 6)]


def _tool_attributes(draw) -> list[dict]:
    """The attributes of a GenAI tool span, well typed: what a clean file holds."""
    def string(value):
        return {"stringValue": value}

    attributes = {
        "gen_ai.operation.name": string(draw(st.sampled_from(["execute_tool", "execute_tool", "invoke_agent", "chat"]))),
        "gen_ai.tool.name": string(draw(st.sampled_from(["pay", "read_file", "mail"]))),
        "gen_ai.tool.call.id": string(draw(st.sampled_from(["c1", "c2", "c3"]))),
        "tracefence.effect": string(draw(st.sampled_from(["read", "write"]))),
        "tracefence.idempotency_key": string(draw(st.sampled_from(["k1", "k2"]))),
        "gen_ai.tool.call.arguments": draw(
            st.sampled_from([string('{"a": 1}'), string('{"a": 2}'), {"kvlistValue": {"values": [{"key": "a", "value": {"intValue": "1"}}]}}])
        ),
        "gen_ai.tool.call.result": string("done"),
        "error.type": string(draw(st.sampled_from(["TimeoutError", "ValueError"]))),
        "gen_ai.output.messages": string('[{"parts": [{"type": "tool_call", "name": "pay", "id": "c9", "arguments": "{}"}]}]'),
    }
    keep = draw(st.sets(st.sampled_from(sorted(attributes))))
    return [{"key": k, "value": v} for k, v in attributes.items() if k in keep or k in ("gen_ai.operation.name", "gen_ai.tool.name")]


@st.composite
def otlp_json_texts(draw) -> str:
    noise = draw(st.integers(0, 3))  # 0: a clean file; 3: a value of the wrong kind in about one field in three

    def maybe(strategy, wrong=_JSON_VALUES):
        return draw(wrong) if draw(st.integers(0, 9)) < noise else draw(strategy)

    def attributes():
        clean = _tool_attributes(draw)
        if not noise:
            return clean
        return clean + [{"key": draw(st.sampled_from(_KEYS)), "value": _otlp_value(draw)} for _ in range(draw(st.integers(0, 4)))]

    def span():
        body = {
            "traceId": maybe(st.sampled_from(["01" * 16, "02" * 16]), _hex(16)),
            "spanId": maybe(st.sampled_from(_SPAN_HEX_IDS), _hex(8)),
            "parentSpanId": maybe(st.sampled_from(_SPAN_HEX_IDS + [""]), _hex(8)),
            "name": maybe(st.sampled_from(["execute_tool pay", "execute_tool read_file", "tool", ""])),
            "kind": maybe(st.sampled_from([1, "SPAN_KIND_CLIENT", 3]), st.sampled_from([9, "X"])),
            "startTimeUnixNano": maybe(st.sampled_from(["1", "10", 5]), st.sampled_from(["-1", str(2**64), "1.5"])),
            "endTimeUnixNano": maybe(st.sampled_from(["2", "20", 20]), st.sampled_from(["", "x"])),
            "attributes": maybe(st.builds(attributes)),
            "status": maybe(st.fixed_dictionaries({"code": st.sampled_from([0, 1, 2, "STATUS_CODE_ERROR"]), "message": _TEXT}), st.sampled_from([{"code": 7}, {"code": "BAD"}])),
            "events": maybe(
                st.builds(lambda: [{"name": "exception", "attributes": [{"key": "exception.type", "value": {"stringValue": draw(st.sampled_from(["TimeoutError", "KeyError"]))}}]}]),
                st.builds(lambda: [{"name": "exception", "attributes": [{"key": "exception.type", "value": _otlp_value(draw)}]}]),
            ),
            "links": maybe(st.just([{"traceId": "03" * 16, "spanId": "03" * 8}]), st.builds(lambda: [{"traceId": draw(_hex(16)), "spanId": draw(_hex(8))}])),
            "flags": maybe(st.sampled_from([0, 256, 768])),
        }
        required = () if noise else ("traceId", "spanId", "attributes")
        return {k: v for k, v in body.items() if k in required or draw(st.integers(0, 6))}

    def scope():
        return {"scope": maybe(st.just({"name": "s"})), "spans": maybe(st.builds(lambda: [span() for _ in range(draw(st.integers(0, 4)))]))}

    def resource():
        return {
            "resource": maybe(st.just({"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]})),
            "scopeSpans": maybe(st.builds(lambda: [scope() for _ in range(draw(st.integers(1, 2)))])),
        }

    requests = [{"resourceSpans": maybe(st.builds(lambda: [resource() for _ in range(draw(st.integers(1, 2)))]))} for _ in range(draw(st.integers(1, 2)))]
    return "\n".join(_dumps(r, draw) for r in requests) if draw(st.booleans()) else _dumps(requests[0], draw)


TEXTS = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", errors="replace")),
    csv_texts(),
    ndjson_texts(),
    json_array_texts(),
    otlp_json_texts(),
)


def _event(label: str) -> None:
    """What kind of outcome an input had (``--hypothesis-show-statistics``), when run by hypothesis."""
    if currently_in_test_context():
        event(label)


def check_plan_text(text: str, input_format: str, config: TraceFenceConfig) -> None:
    try:
        plans, errors = plan_text(text, input_format, config)
    except (UnreadableInput, ConfigError) as exc:
        assert str(exc)
        _event("unreadable")
        return
    steps = sum(len(p.steps) for p in plans)
    _event(f"{'rejected' if any(not e.planned for e in errors) else 'malformed' if errors else 'clean'}, {'steps' if steps else 'no steps'}")
    assert [p.trace_id for p in plans] == sorted(p.trace_id for p in plans)
    for plan in plans:
        check_plan(plan)
    for error in errors:
        assert isinstance(error, InputError)
        assert error.field and isinstance(error.line, int) and error.line >= 0
        str(error).encode("utf-8", "backslashreplace")  # the CLI prints them to stderr
    table.render(plans).encode("utf-8")


# Regressions: each raised an exception of another kind before it was fixed (see the report of issue 5).
_REGRESSION_TEXTS = [
    '{"resourceSpans": 5}',  # a non-array where OTLP/JSON has an array: TypeError
    '{"resourceSpans": [{"scopeSpans": 7}]}',
    '{"resourceSpans": [{"scopeSpans": [{"spans": true}]}]}',
    '{"resourceSpans": [], "x": ' + "1" * 5000 + "}",  # an integer past Python's digit limit: ValueError
    '{"tool": "x", "call_id": "a", "n": ' + "1" * 5000 + "}",
    "tool,call_id,arguments\nx,a," + "1" * 5000 + "\n",  # ... inside arguments: ValueError, now arguments_not_i_json
    'tool,call_id,arguments\nx,a,"{""a"": [' + "2" * 4400 + ']}"\n',
    '{"tool": "\\ud800", "call_id": "a"}',  # a lone surrogate in a field the plan prints: UnicodeEncodeError
    '{"tool": "x", "call_id": "\\udfff", "trace_id": "\\ud800", "idempotency_key": "\\ud834"}',
    '[{"tool": "x", "call_id": "a", "result": "\\ud800"}]',
    '{"tool": "x", "call_id": "a", "result": {"\\ud800": 1}}',
    "tool,call_id,start_time\nx,a,²\n",  # isdigit() but not int(): ValueError
    "tool,call_id,start_time\nx,a," + "1" * 5000 + "\n",
    '{"tool": "x", "call_id": "a", "start_time": 99999999999999999999999}',  # beyond uint64: ValueError in the plan's JSON
    '{"tool": "x", "call_id": "a", "start_time": "0001-01-01T00:00:00+01:00"}',  # before 1970 / year 0
    '{"tool": "x", "call_id": "a", "start_time": "1900-01-01T00:00:00+00:00"}',
    '{"tool": "x", "call_id": "a", "trace_id": {"a": 1}}',
    # a lone surrogate quoted by protobuf's parse error into a malformed field's message: UnicodeEncodeError in the plan
    '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01010101010101010101010101010101", "spanId": "0000000000000001", '
    '"attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}, {"key": "gen_ai.tool.name", "value": '
    '{"stringValue": "pay"}}, {"key": "n", "value": {"doubleValue": "\\ud800"}}]}]}]}]}',
    # an unknown key that is empty, holding an array: its error named no field (s32)
    '{"resourceSpans":[{"":[null]}]}',
    # a lone surrogate inside a field of the wrong type: the message quoting it could not be written (s43)
    '{"tool": ["\\ud800"]}',
    '{"id":[null,null,"\\ud800"]}',
]


@settings(max_examples=examples(400), **FAST)
@given(TEXTS, _FORMATS, CONFIGS)
def test_any_text_gives_plans_or_input_errors(text, input_format, config):
    check_plan_text(text, input_format, config)


def test_regression_texts_give_plans_or_input_errors():
    for text in _REGRESSION_TEXTS:
        for input_format in ("auto", "csv", "json", "ndjson", "otlp-json"):
            for config in (DEFAULT, TIGHT):
                check_plan_text(text, input_format, config)


@settings(max_examples=examples(200), **FAST)
@given(st.one_of(st.binary(max_size=100), TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")), st.sampled_from([b"\xef\xbb\xbf{", b"\xed\xa0\x80", b"a\n\xff", b"\xf4\x90\x80\x80"])), CONFIGS)
def test_any_bytes_decode_or_are_unreadable(data, config):
    try:
        text = decode_utf8(data)
    except UnreadableInput as exc:
        assert str(exc).startswith("line ")
        return
    text.encode("utf-8")  # strict UTF-8 never lets a lone surrogate through
    check_plan_text(text, "auto", config)


def _strict_json(text: str):
    def reject(name):
        raise ValueError(name)

    return json.loads(text, parse_constant=reject)


_JSONISH = st.text(alphabet=' \t\r\n[]{},:"0123456789.eE-+tfalsenru\\\u00a0', max_size=30)


@settings(max_examples=examples(400), **FAST)
@given(st.one_of(json_array_texts(), _JSONISH, st.builds(lambda a, b: "[" + a + "]" + b, _JSONISH, st.sampled_from(["", " ", "\n", "x", "]", ",", "\u00a0"]))))
@example("[1 2]")  # Regressions: a missing comma, a trailing comma, text after the array were all read as rows.
@example("[1,]")
@example('[{"tool": "x"}] {"tool": "y"}')
@example("\u00a0[1]")
def test_the_json_rows_reader_reads_exactly_what_json_reads(text):
    try:
        expected = _strict_json(text)
    except (ValueError, RecursionError):
        expected = None
    try:
        got = [value for _, value in _json_array_rows(text)]
    except UnreadableInput:
        got = None
    assert got == (expected if isinstance(expected, list) else None)


def test_the_json_rows_reader_is_linear():
    rows = ",\n".join('{"call_id": "c%d", "tool": "read_x", "effect": "read", "status": "ok"}' % i for i in range(60_000))
    started = time.perf_counter()
    assert sum(1 for _ in _json_array_rows("[" + rows + "]")) == 60_000
    assert time.perf_counter() - started < 10  # counting lines from the start for every row took minutes


def test_lone_surrogates_in_row_fields_are_malformed_not_printed():
    plans, errors = plan_text('{"tool": "\\ud800", "call_id": "a", "trace_id": "t"}\n', "auto", DEFAULT)
    assert [(e.line, e.field) for e in errors] == [(1, "tool")]
    assert plans[0].steps[0].decision is Decision.REVIEW
    plans, errors = plan_text('{"tool": "x", "call_id": "\\udfff", "trace_id": "\\ud800", "idempotency_key": "\\ud834"}\n', "auto", DEFAULT)
    assert sorted(e.field for e in errors) == ["call_id", "idempotency_key", "trace_id"]
    plan_to_json(plans[0]).encode("utf-8")


def test_start_times_the_plan_cannot_hold_are_malformed():
    for value in ('"²"', '"' + "1" * 5000 + '"', "99999999999999999999999", '"0001-01-01T00:00:00+01:00"', '"1900-01-01T00:00:00+00:00"', "-5"):
        plans, errors = plan_text('{"tool": "x", "call_id": "a", "start_time": %s}\n' % value, "ndjson", DEFAULT)
        assert [e.field for e in errors] == ["start_time"], value
        assert plans[0].steps[0].decision is Decision.REVIEW
    plans, errors = plan_text('{"tool": "x", "call_id": "a", "start_time": %d}\n' % (2**64 - 1), "ndjson", DEFAULT)
    assert not errors and plans[0].steps[0].step.start_time_unix_nano == 2**64 - 1


def test_integers_past_the_digit_limit_in_arguments_are_not_i_json():
    plans, errors = plan_text("tool,call_id,arguments\nx,a," + "1" * 5000 + "\n", "csv", DEFAULT)
    assert not errors
    assert plans[0].steps[0].step.arguments_unavailable == reasons.ARGUMENTS_NOT_I_JSON
    assert arguments_from_value('{"a": ' + "9" * 4400 + "}", Limits()).unavailable == reasons.ARGUMENTS_NOT_I_JSON


def test_otlp_json_whose_arrays_are_not_arrays_is_an_input_error():
    for text in _REGRESSION_TEXTS[:3]:
        plans, errors = plan_text(text, "auto", DEFAULT)
        assert plans == [] and len(errors) == 1 and not errors[0].planned, text


# --- 3. planner invariants -----------------------------------------------------------------------

_ARGUMENT_POOL = [arguments_from_value(v, Limits()) for v in ({"a": 1}, {"a": 2}, {"b": [1]})]


@st.composite
def tool_steps(draw, calm: bool = False) -> ToolStep:
    """A step from small pools, so keys, call ids, contents and order keys collide. ``calm``: a read or a
    write recorded ok, well formed, dispatched once: traces of such steps reach every replay class."""
    arguments = draw(st.sampled_from([None, *_ARGUMENT_POOL]))
    result = draw(st.booleans())
    bad = () if calm else draw(st.sampled_from([(), (), (), (MalformedField("effect", "bad"),), (MalformedField("status", "bad"), MalformedField("tool", "bad"))]))
    return ToolStep(
        trace_id="t",
        call_id=draw(st.sampled_from(["c1", "c2", "c3", "c4", "c5", "c6"])),
        call_id_from_span=draw(st.booleans()),
        span_id=draw(st.sampled_from(["", "s1", "s2", "s3"])),
        tool=draw(st.sampled_from(["pay", "mail", "read", ""])),
        effect=draw(st.sampled_from([Effect.READ, Effect.WRITE] if calm else list(Effect))),
        effect_source=draw(st.sampled_from(list(EffectSource))),
        status=ToolStatus.OK if calm else draw(st.sampled_from(list(ToolStatus))),
        idempotency_key=draw(st.sampled_from([None, None, "k1", "k2"])),
        arguments_json=arguments.json if arguments else None,
        arguments_sha256=arguments.sha256 if arguments else None,
        arguments_unavailable=None if arguments else draw(st.sampled_from([reasons.ARGUMENTS_NOT_RECORDED, reasons.ARGUMENTS_TOO_LARGE])),
        result_recorded=result,
        result_sha256="ab" * 32 if result else None,
        attempts=1 if calm else draw(st.sampled_from([1, 1, 2, 3])),
        start_time_unix_nano=draw(st.integers(0, 3)),
        sequence=draw(st.integers(0, 2)),
        requested_only=not calm and draw(st.integers(0, 5)) == 0,
        malformed=bad,
    )


STEP_LISTS = st.one_of(
    st.lists(tool_steps(), max_size=10),
    st.lists(tool_steps(calm=True), max_size=5),
    st.tuples(st.lists(tool_steps(calm=True), max_size=4), st.lists(tool_steps(), max_size=2)).map(lambda pair: pair[0] + pair[1]),
)


def _oracle(plan: TracePlan, max_related: int) -> None:
    """The decision table checked pairwise, written apart from the planner's groups and rules."""
    ordered = [d.step for d in plan.steps]
    assert [s.order_key for s in ordered] == sorted(s.order_key for s in ordered)
    for i, d in enumerate(plan.steps):
        s = d.step
        key_group = [o for o in ordered if s.idempotency_key is not None and (o.tool, o.idempotency_key) == (s.tool, s.idempotency_key)]
        hashes = {o.arguments_sha256 for o in key_group if o.arguments_sha256 is not None}
        key_conflict = len(hashes) > 1
        key_uncomparable = len(key_group) > 1 and not key_conflict and any(o.arguments_sha256 is None for o in key_group)
        executions = [o for o in ordered if not o.call_id_from_span and not o.requested_only and o.call_id == s.call_id]
        call_conflict = s.effect is not Effect.READ and not s.call_id_from_span and not s.requested_only and len(executions) > 1
        repeats = s.effect is Effect.WRITE and s.arguments_sha256 is not None and any(
            o.effect is Effect.WRITE and (o.tool, o.arguments_sha256) == (s.tool, s.arguments_sha256) for o in ordered[:i]
        )
        uncomparable = ("arguments_too_large", "arguments_too_deep", "arguments_not_i_json")  # docs/DECISIONS.md 501

        def uncompared(o):
            return o.effect is Effect.WRITE and o.arguments_sha256 is None and o.arguments_unavailable in uncomparable

        repeat_uncompared = uncompared(s) and any(o is not s and o.tool == s.tool and uncompared(o) for o in ordered)
        fenced = (
            bool(s.malformed)
            or repeat_uncompared
            or key_conflict
            or call_conflict
            or key_uncomparable
            or s.effect is Effect.UNKNOWN
            or (s.effect is Effect.WRITE and (s.status is not ToolStatus.OK or s.attempts > 1 or repeats))
        )
        if not fenced:
            expected = Decision.SKIP if s.effect is Effect.WRITE else Decision.REPLAY
        elif s.malformed:
            expected = Decision.REVIEW
        else:
            expected = Decision.CONFLICT if key_conflict or call_conflict else Decision.REVIEW
        assert d.decision is expected, (d, expected)
        # Every side of a conflict group is fenced and names the others (up to the cap).
        if key_conflict:
            assert reasons.IDEMPOTENCY_KEY_CONFLICT in d.reasons, d
            others = {o.call_id for o in key_group if o is not s and o.call_id != s.call_id}
            if len(key_group) <= max_related:
                assert others <= set(d.related_call_ids), d
        if call_conflict:
            assert reasons.CALL_ID_EXECUTED_MORE_THAN_ONCE in d.reasons, d
            if reasons.RELATED_CALL_IDS_TRUNCATED not in d.reasons:
                assert s.call_id in d.related_call_ids, d
        if key_uncomparable:
            assert reasons.IDEMPOTENCY_KEY_REUSED_ARGUMENTS_UNAVAILABLE in d.reasons, d
        if s.malformed:
            assert d.reasons[: len(s.malformed)] == tuple(reasons.malformed(f.field) for f in s.malformed), d
        assert len(d.related_call_ids) <= max_related
        assert (reasons.RELATED_CALL_IDS_TRUNCATED in d.reasons) == (d.reasons[-1] == reasons.RELATED_CALL_IDS_TRUNCATED)


@settings(max_examples=examples(600), **FAST)
@given(STEP_LISTS, st.sampled_from([Limits(), Limits(max_related_call_ids=1), Limits(max_related_call_ids=2)]), st.randoms(use_true_random=False))
# Regressions kept from the planner's own history: the same object twice, and steps alike in every ordering field.
@example([ToolStep("t", "c1", "pay", Effect.WRITE, ToolStatus.OK)] * 2, Limits(), None)
@example(
    [
        ToolStep("t", "c1", "pay", Effect.WRITE, ToolStatus.OK, idempotency_key="k", arguments_sha256="a", arguments_unavailable=None),
        ToolStep("t", "c1", "pay", Effect.WRITE, ToolStatus.OK, idempotency_key="k", arguments_sha256="b", arguments_unavailable=None),
        ToolStep("t", "c1", "pay", Effect.READ, ToolStatus.OK, idempotency_key="k", malformed=(MalformedField("tool", "x"),)),
    ],
    Limits(max_related_call_ids=1),
    None,
)
def test_planner_invariants_hold_for_any_steps(steps, limits, rnd):
    plan = plan_trace("t", steps, limits=limits)
    assert len(plan.steps) == len(steps)
    check_plan(plan)
    _oracle(plan, limits.max_related_call_ids)
    # The same plan whatever the order of the input, and from equal copies of the steps.
    shuffled = list(steps)
    if rnd is not None:
        rnd.shuffle(shuffled)
    assert plan_trace("t", shuffled, limits=limits) == plan
    assert plan_trace("t", list(reversed(steps)), limits=limits) == plan


# --- 4. the CLI end to end -----------------------------------------------------------------------

_CLI_FILES = st.one_of(
    csv_texts().map(lambda t: (".csv", t.encode("utf-8"))),
    ndjson_texts().map(lambda t: (".ndjson", t.encode("utf-8", "surrogatepass"))),
    json_array_texts().map(lambda t: (".json", t.encode("utf-8", "surrogatepass"))),
    otlp_json_texts().map(lambda t: (".json", t.encode("utf-8", "surrogatepass"))),
    st.binary(max_size=80).map(lambda b: (".bin", b)),
)


def _run_cli(path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_TRACEFENCE_")}
    return subprocess.run(
        [sys.executable, "-m", "otel_tracefence", "plan", str(path), *extra],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


@settings(max_examples=examples(12), **FAST)
@given(_CLI_FILES, st.sampled_from([(), ("--format", "table"), ("--on-malformed", "review", "--fail-on", "static")]))
def test_the_cli_exits_0_1_or_2_and_never_with_a_traceback(tmp_path_factory, file, extra):
    suffix, data = file
    path = tmp_path_factory.mktemp("fuzz") / f"input{suffix}"
    path.write_bytes(data)
    done = _run_cli(path, *extra)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode in (0, 1, 2), stderr
    assert "Traceback" not in stderr, stderr
    if done.returncode != 2:
        for line in done.stdout.decode("utf-8").splitlines() if not extra else ():
            json.loads(line)


def test_the_cli_on_each_regression_file(tmp_path):
    for index, text in enumerate(_REGRESSION_TEXTS[::2]):
        path = tmp_path / f"r{index}"
        path.write_bytes(text.encode("utf-8"))
        done = _run_cli(path)
        stderr = done.stderr.decode("utf-8", "replace")
        assert done.returncode in (0, 1, 2) and "Traceback" not in stderr, (text[:80], stderr)


# -- keys given twice: never read last-wins (found by a newcomer's trial) -----------------------------


def test_a_row_key_given_twice_is_refused_not_read_last_wins(config):
    from otel_tracefence.pipeline.documents import plan_text
    from otel_tracefence.readers.errors import UnreadableInput

    row = '{"trace_id": "t", "call_id": "a", "tool": "payments.charge", "effect": "write", "effect": "read", "status": "ok"}'
    plans, errors = plan_text(row + "\n", "ndjson", config)
    assert plans == [] and [(e.line, e.field) for e in errors] == [(1, "row")]
    assert "key 'effect' appears twice" in errors[0].message
    with pytest.raises(UnreadableInput, match="key 'effect' appears twice"):
        plan_text("[" + row + "]", "json", config)
    with pytest.raises(UnreadableInput, match="column 'effect' appears twice in the header"):
        plan_text("call_id,tool,effect,effect,status\na,payments.charge,write,read,ok\n", "csv", config)


def test_an_otlp_attribute_given_twice_makes_the_tool_span_malformed(config):
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

    from otel_tracefence.normalize import from_otlp
    from otel_tracefence.pipeline.plan import plan_spans

    span = PbSpan(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="execute_tool payments.charge", end_time_unix_nano=2)
    for key, value in (("gen_ai.tool.name", "payments.charge"), ("tracefence.effect", "write"), ("tracefence.effect", "read")):
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    plan = plan_spans("01" * 16, [from_otlp(span)], config).plan
    (decision,) = plan.steps
    assert (decision.decision.value, decision.reasons[0], plan.replay_class.value) == ("review", "malformed_attributes", "review")
    assert "'tracefence.effect' given more than once" in decision.step.malformed[0].message


def test_string_arguments_are_json_text_in_every_row_format(config):
    """The same calls give the same plan as CSV and as NDJSON, arguments encoded or not (newcomer's trial)."""
    from otel_tracefence.pipeline.documents import plan_text

    def decisions(text: str, fmt: str) -> dict[str, str]:
        plans, errors = plan_text(text, fmt, config)
        assert errors == []
        return {d.step.call_id: f"{d.decision.value}:{d.reasons[0]}" for d in plans[0].steps}

    rows = [("a", '{"ticket": 7, "state": "closed", "idempotency_key": "k1"}'), ("b", '{"ticket": 7, "state": "open", "idempotency_key": "k1"}')]
    ndjson = "".join(json.dumps({"trace_id": "t", "call_id": c, "tool": "ticket.update", "effect": "write", "status": "ok", "arguments": a}) + "\n" for c, a in rows)
    objects = "".join(json.dumps({"trace_id": "t", "call_id": c, "tool": "ticket.update", "effect": "write", "status": "ok", "arguments": json.loads(a)}) + "\n" for c, a in rows)
    csv_text = "trace_id,call_id,tool,effect,status,arguments\n" + "".join(f't,{c},ticket.update,write,ok,"{a.replace(chr(34), chr(34) * 2)}"\n' for c, a in rows)
    expected = {"a": "conflict:idempotency_key_conflict", "b": "conflict:idempotency_key_conflict"}
    assert decisions(ndjson, "ndjson") == decisions(objects, "ndjson") == decisions(csv_text, "csv") == expected
    plans, errors = plan_text(json.dumps({"call_id": "n", "tool": "x", "arguments": '{"x": NaN}'}) + "\n", "ndjson", config)
    # An object that does not parse, NaN included, is cut off or broken: arguments_truncated (docs/DECISIONS.md 340).
    assert [(e.field, "cut off" in e.message) for e in errors] == [("arguments", True)]
