"""AutoGen AgentChat and the Microsoft Agent Framework run streamed, each in its own environment.

* AutoGen (rows ``autogen``, native, and ``autogen_openinference``): the runner's extra scenarios ``stream_*``,
  ``AssistantAgent.run_stream`` consumed to its end with ``model_client_stream=True`` (the model client's
  ``create_stream``; under OpenInference an OpenAI client whose scripted transport answers server-sent events).
* Microsoft Agent Framework (row ``agent_framework``): the matrix's scenarios with ``TRACEFENCE_MAF_STREAM=1``, the
  runner's switch running every agent call ``agent.run(..., stream=True)`` (the updates consumed to the end).

Each run's expected plan is the rules' (one trace per run); where today's differs the case is a strict xfail.
"""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from tests.frameworks.isolated import envs
from tests.frameworks.matrix_table import COMMITTED, READ_OK
from tests.frameworks.streaming import expected, plans, save

K = "arguments_not_recorded"  # AutoGen's execute_tool spans record no arguments
FAILED = ("write_error", "dispatch_attempt_failed")  # OpenInference's OK TOOL span, autogen-core's span inside it ERROR
EXPECTED = {
    "autogen": {
        "stream_write_commits": expected("STATIC", ("create_invoice", "skip", ("write_committed", "result_not_recorded", K))),
        "stream_tool_error_to_model": expected("REVIEW", ("refund_order", "review", ("write_error", K))),
        "stream_parallel_one_fails": expected("REVIEW", ("lookup_customer", "replay", ("declared_read", K)), ("refund_order", "review", ("write_error", K))),
        # no model span, the agent run with no output: held for what it asked for (DECISIONS 1010)
        "stream_requested_never_ran": expected("REVIEW", ("invoke_agent billing", "review", ("requested_call_unread", "effect_unknown", K))),
    },
    "autogen_openinference": {
        "stream_write_commits": expected("INJECTED", COMMITTED),
        "stream_tool_error_to_model": expected("REVIEW", ("refund_order", "review", FAILED)),
        "stream_parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", FAILED)),
        "stream_requested_never_ran": expected("REVIEW", ("delete_customer", "review", ("effect_unknown", "error_template_in_result"))),
    },
}
MAF = {  # the matrix's scenario names, run streamed by the runner's switch
    "write_commits": expected("INJECTED", COMMITTED),
    "write_raises": expected("REVIEW", ("charge_card", "review", ("write_error",))),  # MiddlewareFailure ends the run
    "tool_error_to_model": expected("REVIEW", ("refund_order", "review", ("write_error",))),
    "parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", ("write_error",))),
    "requested_never_ran": expected("REVIEW", ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))),
}
WRONG_TODAY: dict[tuple[str, str], str] = {}
CASES = [
    pytest.param(key, scenario, marks=[pytest.mark.xfail(strict=True, reason=WRONG_TODAY[key, scenario])] if (key, scenario) in WRONG_TODAY else [])
    for key, table in EXPECTED.items()
    for scenario in table
]


def _spans(outcome) -> list:
    assert outcome.request is not None, outcome.error or outcome.cannot
    return readable_spans_of(ExportTraceServiceRequest.FromString(outcome.request))


def _env(key: str):
    env = envs.prepare(key, "python")
    if not env.ok:
        pytest.skip(f"{key} cannot run on this machine: {env.why}")
    return env


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> dict:
    """Each AutoGen row's streamed runs: {(row, scenario): spans}."""
    out = {}
    for key, table in EXPECTED.items():
        for scenario, outcome in envs.run(_env(key), tmp_path_factory.mktemp(key), list(table)).items():  # named: uncached
            out[key, scenario] = _spans(outcome)
            save(out[key, scenario], key, scenario)
    return out


@pytest.fixture(scope="module")
def maf_streamed(tmp_path_factory) -> dict:
    """The Agent Framework's runs with every agent call streamed: {scenario: spans}."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRACEFENCE_MAF_STREAM", "1")
        outcomes = envs.run(_env("agent_framework"), tmp_path_factory.mktemp("maf"), list(MAF))
    out = {scenario: _spans(outcome) for scenario, outcome in outcomes.items()}
    for scenario, spans in out.items():
        save(spans, "agent_framework", f"stream_{scenario}")
    return out


@pytest.mark.parametrize(("key", "scenario"), CASES)
def test_a_streamed_autogen_run_plans_as_the_rules_say(streamed, key, scenario):
    assert plans(streamed[key, scenario], key) == EXPECTED[key][scenario]


@pytest.mark.parametrize("scenario", list(MAF))
def test_a_streamed_agent_framework_run_plans_as_the_rules_say(maf_streamed, scenario):
    assert plans(maf_streamed[scenario], "agent_framework") == MAF[scenario]
