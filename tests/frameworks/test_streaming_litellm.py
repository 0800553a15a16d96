"""LiteLLM's agent loop with its model turns streamed (``completion(stream=True)``, the chunks consumed and joined with
``stream_chunk_builder``), under LiteLLM's OpenTelemetry callback (row ``litellm``, runner scenarios ``stream_*``).

Streamed, the callback no longer writes the model call onto the loop's current span: it runs after the stream ends, on
LiteLLM's logging thread, without the caller's context, and makes a ``litellm_request`` span (``llm.is_streaming`` "True",
``gen_ai.completion.<i>.function_call.{name,arguments}``, ``gen_ai.response.finish_reasons``) with a
``raw_gen_ai_request`` child as the root of a trace of its own, for every model turn. The loop's trace (``billing
agent`` and its ``execute_tool`` spans) then holds no model call. Each run's expected plan is the non-streamed
cell's, one trace per run; today each differs (strict xfails naming the kind).
"""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from tests.frameworks.isolated import envs
from tests.frameworks.matrix_table import COMMITTED, READ_OK
from tests.frameworks.streaming import expected, plans, save

KEY = "litellm"
EXPECTED = {
    "stream_write_commits": expected("INJECTED", COMMITTED),
    "stream_tool_error_to_model": expected("REVIEW", ("refund_order", "review", ("write_error",))),
    "stream_parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", ("write_error",))),
    # the loop's step budget stops after the model asked: only the model call's span shows the request
    "stream_requested_never_ran": expected("REVIEW", ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))),
}
DETACHED = (
    "new kind, model-call spans detached from their run: each streamed turn's litellm_request span is the root of a "
    "trace of its own (the callback runs on LiteLLM's logging thread without the caller's context)"
)
WRONG_TODAY = {
    "stream_write_commits": f"{DETACHED}; over-hold: each turn's trace holds its requested call as requested_not_recorded (review) beside the run's own",
    "stream_tool_error_to_model": f"{DETACHED}; the run's trace plans right, each turn's trace is one more (an over-hold)",
    "stream_parallel_one_fails": f"{DETACHED}; the run's trace plans right, each turn's trace is one more (an over-hold)",
    "stream_requested_never_ran": f"{DETACHED}; FAIL-OPEN: the loop's trace holds no model call and no tool span, so it plans tool-free",
}


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> dict:
    """The loop's streamed runs, in LiteLLM's own environment: {scenario: spans}."""
    env = envs.prepare(KEY, "python")
    if not env.ok:
        pytest.skip(f"{KEY} cannot run on this machine: {env.why}")
    out = {}
    for scenario, outcome in envs.run(env, tmp_path_factory.mktemp(KEY), list(EXPECTED)).items():  # named: uncached
        assert outcome.request is not None, outcome.error or outcome.cannot
        out[scenario] = readable_spans_of(ExportTraceServiceRequest.FromString(outcome.request))
        save(out[scenario], KEY, scenario)
    return out


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=WRONG_TODAY[s])) for s in EXPECTED])
def test_a_streamed_run_plans_as_the_rules_say(streamed, scenario):
    assert plans(streamed[scenario], KEY) == EXPECTED[scenario]


def test_a_streamed_turn_is_a_trace_of_its_own_and_the_run_plans_tool_free(streamed):
    """The fail-open behind stream_requested_never_ran, pinned: (span, has a parent, trace index) and the plans."""
    spans = streamed["stream_requested_never_ran"]
    traces = [s.context.trace_id for s in spans]
    shape = sorted((s.name, s.parent is not None, traces.index(s.context.trace_id)) for s in spans)
    request = next(s for s in spans if s.name == "litellm_request")
    assert (shape, request.attributes["gen_ai.completion.0.function_call.name"], request.attributes["llm.is_streaming"]) == (
        [("billing agent", False, 2), ("litellm_request", False, 0), ("raw_gen_ai_request", True, 0)], "create_invoice", "True",
    )
    assert plans(spans, KEY) == [(None, []), ("REVIEW", [("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))])]
