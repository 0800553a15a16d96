"""The OpenAI Agents SDK under Logfire beyond the matrix's row: the SDK's content switch off, and Logfire's scrubbing.

The row (tests/frameworks/isolated/openai_agents_logfire) runs with content on and no value Logfire scrubs. Here the
same runner, in the same environment, runs its extra scenarios (DECISIONS 990):

* ``content_off_<scenario>``: ``OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false``. Logfire still writes the
  ``Function`` span's ``input`` and ``output`` keys, each the text ``null`` with ``{"type": "null"}`` in
  ``logfire.json_schema`` (Logfire's record of Python ``None``): a reader of Logfire's convention must take that as not
  recorded, never as the result text ``null``. Under the other two instrumentations the same runs hold every write
  as ``write_outcome_unrecorded`` (those producers record results by default) and keep a raised one ``write_error``;
  the expected plans below are theirs, Logfire's spans read as a tool convention (DECISIONS 991-992).
* ``scrubbed_write``: a write whose arguments (``auth_token``, a customer id ``auth0|a``), result (``session s_9
  ...``), idempotency key (``session-17``) and even tool name (``open_session``) hold words Logfire's default scrubbing
  patterns match: each value becomes ``[Scrubbed due to '<word>']`` and ``logfire.scrubbed`` names its path. The
  product reads the ``tracefence.idempotency_key`` label as the key ``[Scrubbed due to 'session']`` today.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from framework_helpers import plan_of_spans
from tests.frameworks import conformance as matrix
from tests.frameworks.isolated import envs

KEY = "openai_agents_logfire"
NA, NR, HELD = "arguments_not_recorded", "result_not_recorded", "write_outcome_unrecorded"
CONTENT_OFF = {
    "read_ok": ("DYNAMIC", [("lookup_customer", "replay", ("declared_read", NA))]),
    "write_commits": ("REVIEW", [("create_invoice", "review", (HELD, NR, NA))]),
    "write_raises": ("REVIEW", [("charge_card", "review", ("write_error", NA))]),
    "write_times_out": ("REVIEW", [("send_payment", "review", (HELD, NR, NA))]),
    "tool_error_to_model": ("REVIEW", [("refund_order", "review", ("write_error", NA))]),
}
SCRUBBED = "[Scrubbed due to '{}']"


def _run(tmp_path_factory, scenarios: list[str]) -> dict:
    env = envs.prepare(KEY, "python")
    if not env.ok:
        pytest.skip(f"the OpenAI Agents SDK under Logfire cannot run on this machine: {env.why}")
    outcomes = envs.run(env, tmp_path_factory.mktemp("logfire_settings"), scenarios)
    spans = {}
    for name, outcome in outcomes.items():
        assert outcome.request is not None, outcome.error or outcome.cannot
        spans[name] = readable_spans_of(ExportTraceServiceRequest.FromString(outcome.request))
    return spans


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The extra scenarios, one runner run: {scenario: spans}."""
    return _run(tmp_path_factory, [f"content_off_{s}" for s in CONTENT_OFF] + ["scrubbed_write"])


def _function_spans(spans: list) -> list:
    return [s for s in spans if s.attributes.get("logfire.msg_template") == "Function: {name}"]


def test_with_content_off_the_function_spans_record_none_as_the_text_null(runs):
    for name in CONTENT_OFF:
        (span,) = _function_spans(runs[f"content_off_{name}"])
        schema = json.loads(span.attributes["logfire.json_schema"])["properties"]
        assert (span.attributes["input"], span.attributes["output"]) == ("null", "null"), name
        assert (schema["input"], schema["output"]) == ({"type": "null"}, {"type": "null"}), name


@pytest.mark.parametrize("scenario", sorted(CONTENT_OFF))
def test_with_content_off_each_scenario_plans_as_the_other_rows_do(runs, scenario):
    plan = plan_of_spans(runs[f"content_off_{scenario}"], matrix._config(KEY))
    replay_class = plan.replay_class.name if plan.replay_class is not None else None
    got = (replay_class, sorted((d.step.tool, d.decision.name.lower(), tuple(d.reasons)) for d in plan.steps))
    want_class, want_steps = CONTENT_OFF[scenario]
    assert got == (want_class, sorted(want_steps))


def test_logfire_scrubs_the_write_s_arguments_result_key_and_name_and_says_where(runs):
    (span,) = _function_spans(runs["scrubbed_write"])
    assert span.attributes["input"] == json.dumps({"customer": SCRUBBED.format("auth"), "auth_token": SCRUBBED.format("auth")}, separators=(",", ":"))
    assert [span.attributes[k] for k in ("output", "name", "tracefence.idempotency_key")] == [SCRUBBED.format("session")] * 3
    assert span.attributes["tracefence.effect"] == "write"
    paths = [note["path"] for note in json.loads(span.attributes["logfire.scrubbed"])]
    assert ["attributes", "output"] in paths and ["attributes", "tracefence.idempotency_key"] in paths
    assert ["attributes", "input", "auth_token"] in paths and ["attributes", "name"] in paths


def test_a_scrubbed_idempotency_key_is_no_key(runs):
    """The label holds Logfire's mark where the key was: no key, the label malformed (DECISIONS 986)."""
    plan = plan_of_spans(runs["scrubbed_write"], matrix._config(KEY))
    (decision,) = plan.steps
    assert (decision.step.idempotency_key, decision.decision.name) == (None, "REVIEW")
    assert "malformed_idempotency_key" in decision.reasons
