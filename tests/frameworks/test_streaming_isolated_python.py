"""Google ADK, Semantic Kernel and DSPy run streamed, each in its own environment (the rows ``google_adk``,
``semantic_kernel``, ``dspy``), through their runners' extra scenarios ``stream_*``.

* Google ADK: ``RunConfig(streaming_mode=StreamingMode.SSE)`` (the model called with ``stream=True``, its text in a
  partial response first), every event of ``run_async`` consumed, with no enclosing span; and
  ``stream_abandoned_after_request``: the consumer closes the event stream at the event holding the model's
  function call (the tool never runs).
* Semantic Kernel: ``ChatCompletionAgent.invoke_stream`` (SK's streaming chat path, its
  ``trace_streaming_chat_completion`` spans; the function calls in one streamed chunk), every chunk consumed, with no
  enclosing span. SK's streamed chat span records only ``gen_ai.response.finish_reason`` (no output messages), as
  its non-streamed one: a call an approval filter denied is held by that finish reason.
* DSPy: ``dspy.streamify`` over ReAct (the program run in a worker thread, its output streamed), consumed to the end,
  under OpenInference's DSPy instrumentation.

Each run's expected plan is the rules' (one trace per run).
"""

from __future__ import annotations

import pytest

from tests.frameworks.matrix_table import COMMITTED, READ_OK, U, oi
from tests.frameworks.streaming import expected, plans, run_streams


def sk(step: tuple) -> tuple:
    return (f"billing-{step[0]}", *step[1:])


EXPECTED = {
    "google_adk": {
        "stream_write_commits": expected("INJECTED", COMMITTED),
        "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error",))),
        "stream_tool_error_to_model": expected("REVIEW", ("refund_order", "review", ("write_error",))),
        "stream_parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", ("write_error",))),
        # require_confirmation never answered: ADK's gate answers the call with its confirmation text
        "stream_requested_never_ran": expected("REVIEW", ("create_invoice", "review", ("effect_unknown", "error_in_result", "approval_pending"))),
        "stream_abandoned_after_request": expected("REVIEW", ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))),
    },
    "semantic_kernel": {
        "stream_write_commits": expected("INJECTED", sk(COMMITTED)),
        "stream_tool_error_to_model": expected("REVIEW", ("billing-refund_order", "review", ("write_error",))),
        "stream_parallel_one_fails": expected("REVIEW", sk(READ_OK), ("billing-refund_order", "review", ("write_error",))),
        # an auto function invocation filter denies the write: no execute_tool span; the chat span's finish reason holds
        "stream_requested_never_ran": expected("REVIEW", ("chat scripted-model", "review", ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))),
    },
    "dspy": {
        "stream_write_commits": expected("INJECTED", oi(COMMITTED), ("finish", "replay", ("declared_read", U))),
        "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error", U)), ("finish", "replay", ("declared_read", U))),
        # a call to a tool the agent lacks: the adapters cannot parse the turn, the run ends before any tool ran
        "stream_requested_never_ran": expected("REVIEW", ("delete_customer", "review", ("effect_unknown", "requested_not_recorded"))),
    },
}
CASES = [(key, scenario) for key, table in EXPECTED.items() for scenario in table]


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> dict:
    """Each row's streamed runs, run by its runner in its own environment: {(row, scenario): spans}."""
    return run_streams(EXPECTED, "python", tmp_path_factory)


@pytest.mark.parametrize(("key", "scenario"), CASES)
def test_a_streamed_run_plans_as_the_rules_say(streamed, key, scenario):
    assert plans(streamed[key, scenario], key) == EXPECTED[key][scenario]
