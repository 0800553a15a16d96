"""LlamaIndex's FunctionAgent run streamed (``streaming=True``: the model's answer through ``astream_chat_with_tools``;
the handler's ``stream_events()`` consumed to the end, or the run cancelled with ``cancel_run()`` once the model's
tool calls streamed), under OpenInference's LlamaIndex instrumentation: the matrix's scenarios as a chat UI runs them.

The scripted mock LLM is the matrix's (tests/frameworks/test_framework_llama_index.py). Each run's expected plan is the
plan the rules give: one trace per run.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("openinference.instrumentation.llama_index")

from llama_index.core.agent.workflow import AgentStream, FunctionAgent  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402

from tests.frameworks.isolated.matrix_tools import CHARGE, PLAIN_TOOLS, REFUND, STATE, read_call, write_call  # noqa: E402
from tests.frameworks.matrix_table import COMMITTED, READ_OK, U, oi  # noqa: E402
from tests.frameworks.streaming import expected, plans, run_in_process  # noqa: E402
from tests.frameworks.test_framework_llama_index import OneSpanPerTurnLLM, script  # noqa: E402

KEY = "llama_index"
UNRAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))
EXPECTED = {
    "stream_write_commits": expected("INJECTED", oi(COMMITTED)),
    "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error", U))),  # handed to the model (is_error)
    "stream_parallel_one_fails": expected("REVIEW", oi(READ_OK), ("refund_order", "review", ("write_error", U))),
    "stream_requested_never_ran": expected("REVIEW", UNRAN),  # max_iterations=1: stopped after the model's turn
    "stream_cancelled_after_request": expected("REVIEW", UNRAN),
}
TURNS = {
    "stream_write_commits": [[write_call()]],
    "stream_write_raises": [[("call_c1", "charge_card", CHARGE)]],
    "stream_parallel_one_fails": [[read_call(), ("call_f1", "refund_order", REFUND)]],
    "stream_requested_never_ran": [[write_call()]],
    "stream_cancelled_after_request": [[write_call()]],
}


async def _run(scenario: str) -> None:
    llm = OneSpanPerTurnLLM(response_generator=script(*TURNS[scenario]), is_chat_model=True)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(f) for f in PLAIN_TOOLS], llm=llm, streaming=True)
    limits = {"max_iterations": 1} if scenario == "stream_requested_never_ran" else {}
    handler = agent.run("bill customer a", **limits)
    async for event in handler.stream_events():
        if scenario == "stream_cancelled_after_request" and isinstance(event, AgentStream) and event.tool_calls:
            await handler.cancel_run()  # the consumer cancels once the model's tool calls streamed
            break
    try:
        await handler
    except Exception as exc:  # noqa: BLE001 - max_iterations raises; a cancelled run raises its cancellation
        STATE["raised"] = type(exc).__name__
    await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def streamed() -> dict:
    """Each scenario's spans: {scenario: spans}; {(scenario, "ran"): the tools' run counts}."""
    return run_in_process(KEY, EXPECTED, lambda scenario: asyncio.run(_run(scenario)), STATE)


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_a_streamed_run_plans_as_the_rules_say(streamed, scenario):
    assert plans(streamed[scenario], KEY) == EXPECTED[scenario]


def test_the_cancelled_run_never_ran_the_write(streamed):
    assert streamed["stream_cancelled_after_request", "ran"].get("create_invoice") is None
