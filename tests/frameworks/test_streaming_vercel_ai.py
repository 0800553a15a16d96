"""The Vercel AI SDK run streamed: AI SDK 5's ``streamText`` and AI SDK 6 / 7's ``ToolLoopAgent.stream``, each
``fullStream`` consumed to its end, or the consumer stopping once the model's tool call streamed.

The rows' runners' extra scenarios ``stream_*`` (tests/frameworks/isolated/vercel_ai_5/runner.mjs and
vercel_ai_common.mjs, which the AI SDK 6 and 7 rows share): the scripted model streams (``doStream``) one ``tool-call``
part per call, and the run has no enclosing span (as users run it). Each run's expected plan is the rules' (one trace
per run). An abandoned stream: the SDK still runs the requested write (its tool span has the result), but the run's
root span (``ai.streamText`` / ``invoke_agent``) and its step spans never end, so the trace has no root and is held
(``trace_root_missing``): which calls the abandoned run made is not known.
"""

from __future__ import annotations

import pytest

from tests.frameworks.matrix_table import COMMITTED, READ_OK
from tests.frameworks.streaming import expected, plans, run_streams

COMMON = {
    "stream_write_commits": expected("INJECTED", COMMITTED),
    # no tool error leaves the SDK: the thrown error is a tool-error part handed to the model; the tool span ends ERROR
    "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error",))),
    "stream_parallel_one_fails": expected("REVIEW", READ_OK, ("refund_order", "review", ("write_error",))),
    # AI SDK 5: a tool without execute (handed to the application); 6, 7: needsApproval, never answered
    "stream_requested_never_ran": expected("REVIEW", ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))),
    "stream_abandoned_after_request": expected("REVIEW", ("create_invoice", "review", ("trace_root_missing",))),
}
# the tool returns { error }, which toModelOutput hands the model as an error-text part (AI SDK 6 on)
HANDED = {"stream_tool_error_to_model": expected("REVIEW", ("refund_order", "review", ("write_error", "error_in_result")))}
EXPECTED = {"vercel_ai_5": COMMON, "vercel_ai_6": {**COMMON, **HANDED}, "vercel_ai_7": {**COMMON, **HANDED}}
CASES = [(key, scenario) for key, table in EXPECTED.items() for scenario in table]


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> dict:
    """Each row's streamed runs, run by its runner in its own environment: {(row, scenario): spans}."""
    return run_streams(EXPECTED, "node", tmp_path_factory)


@pytest.mark.parametrize(("key", "scenario"), CASES)
def test_a_streamed_run_plans_as_the_rules_say(streamed, key, scenario):
    assert plans(streamed[key, scenario], key) == EXPECTED[key][scenario]


@pytest.mark.parametrize("key", list(EXPECTED))
def test_an_abandoned_stream_still_ran_the_write(streamed, key):
    """The consumer stopped reading at the tool call; the SDK ran it anyway, its span OK (UNSET) with the result."""
    (tool,) = [s for s in streamed[key, "stream_abandoned_after_request"] if s.name in ("ai.toolCall", "execute_tool create_invoice")]
    result = tool.attributes.get("ai.toolCall.result", tool.attributes.get("gen_ai.tool.call.result"))
    assert (tool.status.status_code.name, result) == ("UNSET", '"invoice inv_8812"')
