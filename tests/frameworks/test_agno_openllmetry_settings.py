"""Agno under OpenLLMetry beyond the matrix's row: content capture off (``TRACELOOP_TRACE_CONTENT=false``).

The row (tests/frameworks/isolated/agno_openllmetry) runs with content traced. Here the same runner, in the same
environment, runs every scenario with content capture off: no ``traceloop.entity.input`` / ``.output`` anywhere.
OpenLLMetry's wrapper of ``FunctionCall.execute`` ends the tool span OK whenever ``execute`` returns, and Agno turns a
raised tool into a returned ``status='failure'`` result, so with content off a failed write and a committed one are
the same record: OK, no result. Every such write is held ``write_outcome_unrecorded`` (the producer's path in
``status_paths.STATUS_EVIDENCE_PATHS``, DECISIONS 981); before, a failed refund beside a read that also had no result
read as content capture off and passed as ``skip`` (``write_committed``, the trace ``static``: a fail-open).

A call requested and never run (``requires_confirmation`` never confirmed) is in no span when content is off: the
agent span's paused-run text (DECISIONS 958) is not recorded, and OpenLLMetry makes no model span: the agent run,
recording neither input nor output in a trace with no tool span and no model span, is held (``requested_call_unread``,
DECISIONS 1010; before, the trace planned tool-free, a fail-open). OpenLLMetry would have to record the run's status
(Agno's ``RunStatus.paused``) or its requirements on the agent span for the waiting call to be named.
"""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from framework_helpers import plan_of_spans
from tests.frameworks import conformance as matrix
from tests.frameworks.isolated import envs
from tests.frameworks.matrix_table import SCENARIO_KEYS

KEY = "agno_openllmetry"
NA, NR, HELD = "arguments_not_recorded", "result_not_recorded", "write_outcome_unrecorded"
CONTENT_OFF = {
    "read_ok": ("DYNAMIC", [("lookup_customer", "replay", ("declared_read", NA))]),
    "write_commits": ("REVIEW", [("create_invoice", "review", (HELD, NR, NA))]),
    "write_raises": ("REVIEW", [("charge_card", "review", ("write_error", NA))]),
    "write_times_out": ("REVIEW", [("send_payment", "review", (HELD, "unrecognized_failure_evidence", "write_timeout", NA, "dispatch_attempt_failed"))]),
    "tool_error_to_model": ("REVIEW", [("refund_order", "review", (HELD, NR, NA))]),
    "parallel_one_fails": ("REVIEW", [("lookup_customer", "replay", ("declared_read", NA)), ("refund_order", "review", (HELD, NR, NA))]),
    "framework_retries": ("REVIEW", [("create_invoice", "review", ("write_error", NA))]),
    "requested_never_ran": ("REVIEW", [("billing.agent", "review", ("requested_call_unread", "effect_unknown", NA))]),  # DECISIONS 1010
    "approval_interrupt_resume": ("REVIEW", [("create_invoice", "review", (HELD, NR, NA))]),
    "mcp_is_error": ("REVIEW", [("charge_card", "review", (HELD, "write_error", NA, "dispatch_attempt_failed"))]),
}


@pytest.fixture(scope="module")
def content_off(tmp_path_factory) -> dict:
    """Every scenario run with content capture off: {scenario: spans}."""
    env = envs.prepare(KEY, "python")
    if not env.ok:
        pytest.skip(f"Agno under OpenLLMetry cannot run on this machine: {env.why}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRACELOOP_TRACE_CONTENT", "false")
        outcomes = envs.run(env, tmp_path_factory.mktemp("content_off"), list(SCENARIO_KEYS))  # named: never the row's cached outcomes
    spans = {}
    for name, outcome in outcomes.items():
        assert outcome.request is not None, outcome.error or outcome.cannot
        spans[name] = readable_spans_of(ExportTraceServiceRequest.FromString(outcome.request))
    return spans


def test_with_content_off_no_span_records_arguments_or_results(content_off):
    for name, spans in content_off.items():
        for span in spans:
            assert not {"traceloop.entity.input", "traceloop.entity.output"} & set(span.attributes), (name, span.name)


def test_with_content_off_every_scenario_plans_as_stated(content_off):
    planned = {}
    for name, spans in content_off.items():
        plan = plan_of_spans(spans, matrix._config(KEY))
        replay_class = plan.replay_class.name if plan.replay_class is not None else None
        planned[name] = (replay_class, sorted((d.step.tool, d.decision.name.lower(), tuple(d.reasons)) for d in plan.steps))
    assert planned == {name: (cls, sorted(steps)) for name, (cls, steps) in CONTENT_OFF.items()}
