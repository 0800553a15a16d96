"""LangGraph run streamed (``graph.stream`` / ``astream``, ``stream_mode=["messages", "updates"]``), under both of the
matrix's LangChain instrumentations (OpenInference: row ``langgraph``; OpenLLMetry: row ``langgraph_openllmetry``).

The LangGraph runner's extra scenarios ``stream_*`` (tests/frameworks/isolated/langgraph/runner.py, which the OpenLLMetry
row loads): the model streams each turn as one ``AIMessageChunk`` with ``tool_call_chunks`` (a provider's streamed
tool calls), the run has no enclosing span (as users run it), and the consumer reads every event, or stops reading
once the model's turn asking for the write streamed (``stream_abandoned_after_request``), or is cancelled while the
write runs (``stream_async_cancelled_during_write``); ``stream_events_*`` consume ``astream_events(version="v2")``. Each run's expected plan is the rules' (one trace per run).
"""

from __future__ import annotations

import pytest

from tests.frameworks.matrix_table import COMMITTED, READ_OK
from tests.frameworks.streaming import expected, plans, run_streams, traces

U = "arguments_unwrapped"  # OpenLLMetry's LangChain spans wrap a call's arguments ({"inputs": ...})
UNRAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))


def _expected(wrapped: bool) -> dict:
    u = (U,) if wrapped else ()
    parallel = expected("REVIEW", (*READ_OK[:2], (*READ_OK[2], *u)), ("refund_order", "review", ("write_error", *u, "error_in_result")))
    return {
        "stream_write_commits": expected("INJECTED", (*COMMITTED[:2], (*COMMITTED[2], *u))),
        "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error", *u))),
        "stream_tool_error_to_model": expected("REVIEW", ("refund_order", "review", ("write_error", *u))),
        "stream_parallel_one_fails": parallel,
        "stream_async_parallel_one_fails": parallel,
        "stream_requested_never_ran": expected("REVIEW", UNRAN),  # recursion_limit=1: the tools node never runs
        "stream_abandoned_after_request": expected("REVIEW", UNRAN),
        # the cancelled tool's span ends ERROR (CancelledError): the write's outcome is unknown
        "stream_async_cancelled_during_write": expected("REVIEW", ("send_payment", "review", ("write_status_unknown", *u))),
        # astream_events(version="v2"): every event consumed, or the consumer stopping at the model's tool calls
        "stream_events_write_commits": expected("INJECTED", (*COMMITTED[:2], (*COMMITTED[2], *u))),
        "stream_events_parallel_one_fails": parallel,
        "stream_events_abandoned_after_request": expected("REVIEW", UNRAN),
        # in one thread, an abandoned stream then the next run: two traces (the abandoned run's context is not left current)
        "stream_abandoned_then_run": traces(("REVIEW", [UNRAN]), ("INJECTED", [(*COMMITTED[:2], (*COMMITTED[2], *u))])),
    }


EXPECTED = {"langgraph": _expected(wrapped=False), "langgraph_openllmetry": _expected(wrapped=True)}
CASES = [(key, scenario) for key, table in EXPECTED.items() for scenario in table]


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> dict:
    """Each row's streamed runs, run by its runner in its own environment: {(row, scenario): spans}."""
    return run_streams(EXPECTED, "python", tmp_path_factory)


@pytest.mark.parametrize(("key", "scenario"), CASES)
def test_a_streamed_run_plans_as_the_rules_say(streamed, key, scenario):
    assert plans(streamed[key, scenario], key) == EXPECTED[key][scenario]
