"""Microsoft Agent Framework beyond the matrix's row (issue 24: what users do besides the ten scenarios).

The row (tests/frameworks/isolated/agent_framework) runs with sensitive data on. Here the same runner, in the same
environment, runs (1) the framework's default settings, sensitive data off (``TRACEFENCE_MAF_CONTENT=off``: no
``gen_ai.tool.call.arguments`` / ``.result``, no ``gen_ai.output.messages``), whose every cell must plan as stated;
and (2) a ``MiddlewareFailure`` (the framework's fail-closed abort) from a failed read cancelling the write that ran
beside it (runner scenario ``parallel_abort_read``): the write's ``execute_tool`` span ends UNSET with no result and
no error, the same record as a write that committed with its result unrecorded, whatever the body did. Its plan is a
held: a write with no result in a run that ended in error is ``write_outcome_unrecorded`` (issue 24 kind A, DECISIONS
957; before it, a fail-open: the cancelled write was planned ``skip``, ``write_committed``, the trace ``static``).
"""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from framework_helpers import plan_of_spans
from tests.frameworks import conformance as matrix
from tests.frameworks.isolated import envs
from tests.frameworks.matrix_table import SCENARIO_KEYS

KEY = "agent_framework"
NA, NR = "arguments_not_recorded", "result_not_recorded"
REUSED = "idempotency_key_reused_arguments_unavailable"
HELD_BY_FINISH = ("review", ("unrecognized_tool_span", "effect_unknown", NA))
# Sensitive data off (the framework's default): every failed call still ends its span ERROR, so each cell is decided
# as the row's, committed writes are static (DECISIONS 401: content capture off), and the requested call that never
# ran is held by the chat and agent spans' finish reason tool_calls (no output messages to name it).
SENSITIVE_OFF = {
    "read_ok": ("DYNAMIC", [("lookup_customer", "replay", ("declared_read", NA))]),
    "write_commits": ("STATIC", [("create_invoice", "skip", ("write_committed", NR, NA))]),
    "write_raises": ("REVIEW", [("charge_card", "review", ("write_error", NA))]),
    "write_times_out": ("REVIEW", [("send_payment", "review", ("write_timeout", NA))]),
    "tool_error_to_model": ("REVIEW", [("refund_order", "review", ("write_error", NA))]),
    "parallel_one_fails": ("REVIEW", [("lookup_customer", "replay", ("declared_read", NA)), ("refund_order", "review", ("write_error", NA))]),
    "framework_retries": ("REVIEW", [("create_invoice", "review", (REUSED, "write_error", NA)), ("create_invoice", "review", (REUSED, NR, NA))]),
    "requested_never_ran": ("REVIEW", [("chat scripted-model", *HELD_BY_FINISH), ("invoke_agent billing", *HELD_BY_FINISH)]),
    "approval_interrupt_resume": ("STATIC", [("create_invoice", "skip", ("write_committed", NR, NA))]),
    "mcp_is_error": ("REVIEW", [("charge_card", "review", ("write_error", NA))]),
}


def _env():
    env = envs.prepare(KEY, "python")
    if not env.ok:
        pytest.skip(f"Microsoft Agent Framework cannot run on this machine: {env.why}")
    return env


def _spans(outcome) -> list:
    assert outcome.request is not None, outcome.error or outcome.cannot
    return readable_spans_of(ExportTraceServiceRequest.FromString(outcome.request))


def _plan(spans) -> tuple:
    plan = plan_of_spans(spans, matrix._config(KEY))
    return plan.replay_class.name, sorted((d.step.tool, d.decision.name.lower(), tuple(d.reasons)) for d in plan.steps)


def test_with_sensitive_data_off_every_scenario_plans_as_stated(tmp_path, monkeypatch):
    env = _env()
    monkeypatch.setenv("TRACEFENCE_MAF_CONTENT", "off")
    outcomes = envs.run(env, tmp_path / "out", list(SCENARIO_KEYS))  # named: never the row's cached outcomes
    planned = {name: _plan(_spans(outcome)) for name, outcome in outcomes.items()}
    assert planned == {name: (cls, sorted(steps)) for name, (cls, steps) in SENSITIVE_OFF.items()}
    for name, outcome in outcomes.items():
        for span in _spans(outcome):
            assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.output.messages"} & set(span.attributes), name


@pytest.fixture(scope="module")
def aborted(tmp_path_factory) -> dict:
    """``parallel_abort_read`` with sensitive data on and off: {content: spans}."""
    env = _env()
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        for content in ("on", "off"):
            patch.setenv("TRACEFENCE_MAF_CONTENT", content)
            (outcome,) = envs.run(env, tmp_path_factory.mktemp(f"abort_{content}"), ["parallel_abort_read"]).values()
            out[content] = _spans(outcome)
    return out


@pytest.mark.parametrize("content", ["on", "off"])
def test_a_write_cancelled_by_a_siblings_abort_ends_unset_with_no_result(aborted, content):
    spans = {s.name: s for s in aborted[content]}
    write, read, agent = spans["execute_tool send_payment"], spans["execute_tool lookup_customer"], spans["invoke_agent billing"]
    assert (write.status.status_code.name, list(write.events), "gen_ai.tool.call.result" in write.attributes) == ("UNSET", [], False)
    assert ("gen_ai.tool.call.arguments" in write.attributes) is (content == "on")  # one switch records both, or neither
    assert (read.status.status_code.name, read.attributes["error.type"]) == ("ERROR", "ConnectionError")
    assert (agent.status.status_code.name, agent.attributes["error.type"]) == ("ERROR", "MiddlewareFailure")


@pytest.mark.parametrize("content", ["on", "off"])
def test_a_write_cancelled_by_a_siblings_abort_is_held(aborted, content):
    extra = () if content == "on" else (NA,)
    assert _plan(aborted[content]) == (
        "REVIEW",
        [("lookup_customer", "replay", ("declared_read", *extra)), ("send_payment", "review", ("write_outcome_unrecorded", NR, *extra))],
    )
