"""The OpenAI Agents SDK for JavaScript and Mastra run streamed, each in its own Node environment (rows
``openai_agents_js``, ``mastra``, ``mastra_1``), through their runners' extra scenarios ``stream_*``.

* OpenAI Agents JS (under OpenInference's bridge): ``runner.run(agent, input, { stream: true })``, its events consumed
  to the end (the scripted model's ``getStreamedResponse`` yields the turn's ``response_done``); or the consumer stops
  reading at the ``tool_called`` event (``stream_abandoned_after_request``: the tool never runs).
* Mastra (0.24 and 1.x, its OtelExporter): ``agent.stream``, the ``fullStream`` consumed to the end; or the consumer
  stops reading at the ``tool-call`` chunk: Mastra still runs the write and finishes the run in the background (its
  spans end), so the write is committed on evidence. ``stream_requested_never_ran`` is the matrix's run (Mastra's
  approval works on streams only).

The runs sit in the rows' session span, as the matrix's do. Each run's expected plan is the rules' (one trace per run).
"""

from __future__ import annotations

import pytest

from tests.frameworks.matrix_table import COMMITTED, READ_OK
from tests.frameworks.streaming import expected, plans, run_streams

UFE = "unrecognized_failure_evidence"
UNRAN = ("create_invoice", "review", ("write_status_unknown", "requested_not_recorded"))
EXPECTED = {
    "openai_agents_js": {
        "stream_write_commits": expected("INJECTED", COMMITTED),
        "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error",))),
        "stream_tool_error_to_model": expected("REVIEW", ("refund_order", "review", ("write_error",))),
        "stream_parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", ("write_error",))),
        "stream_requested_never_ran": expected("REVIEW", UNRAN),  # needsApproval, never approved
        "stream_abandoned_after_request": expected("REVIEW", UNRAN),
    },
    "mastra": {
        "stream_write_commits": expected("INJECTED", COMMITTED),
        "stream_write_raises": expected("REVIEW", ("charge_card", "review", (UFE, "write_error"))),
        "stream_parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", (UFE, "write_error"))),
        "stream_requested_never_ran": expected("REVIEW", ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))),
        "stream_abandoned_after_request": expected("INJECTED", COMMITTED),
    },
    "mastra_1": {
        "stream_write_commits": expected("INJECTED", COMMITTED),
        "stream_write_raises": expected("REVIEW", ("charge_card", "review", (UFE, "write_error"))),
        "stream_parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", (UFE, "write_error"))),
        "stream_requested_never_ran": expected("REVIEW", UNRAN),
        "stream_abandoned_after_request": expected("INJECTED", COMMITTED),
    },
}
CASES = [(key, scenario) for key, table in EXPECTED.items() for scenario in table]


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> dict:
    """Each row's streamed runs, run by its runner in its own environment: {(row, scenario): spans}."""
    return run_streams(EXPECTED, "node", tmp_path_factory)


@pytest.mark.parametrize(("key", "scenario"), CASES)
def test_a_streamed_run_plans_as_the_rules_say(streamed, key, scenario):
    assert plans(streamed[key, scenario], key) == EXPECTED[key][scenario]
