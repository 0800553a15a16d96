"""pydantic-ai run streamed, under its native instrumentation (``InstrumentationSettings``, content included): the
matrix's scenarios through ``Agent.run_stream`` (its text streamed to the end), ``Agent.run_stream_events`` (every
event consumed, or the consumer stopping once the model's turn asking for the write streamed) and ``Agent.iter`` (the
run's nodes walked, each model request streamed; or the caller stopping before the node that runs the calls).

The model is pydantic-ai's ``FunctionModel`` with a ``stream_function``: each scripted turn streams as a provider's
does, one ``DeltaToolCall`` per call (name, JSON arguments, call id), or the text. Each run's expected plan is the
plan the rules give (one trace per run).
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, ModelRetry, Tool  # noqa: E402
from pydantic_ai.exceptions import UsageLimitExceeded  # noqa: E402
from pydantic_ai.models.function import DeltaToolCall, FunctionModel  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.usage import UsageLimits  # noqa: E402

from tests.frameworks import conformance as matrix  # noqa: E402
from tests.frameworks.isolated.matrix_tools import (  # noqa: E402
    CHARGE,
    REFUND,
    STATE,
    charge_card,
    create_invoice,
    declare,
    lookup_customer,
    ran,
    read_call,
    write_call,
)
from tests.frameworks.matrix_table import COMMITTED, READ_OK  # noqa: E402
from tests.frameworks.streaming import expected, plans, run_in_process  # noqa: E402

KEY = "pydantic_ai"
REFUSED = ("refund_order", "review", ("write_error",))
CHARGED = ("charge_card", "review", ("write_error",))
UNRAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))
EXPECTED = {
    "stream_write_commits": expected("INJECTED", COMMITTED),
    "stream_write_raises": expected("REVIEW", CHARGED),
    "stream_tool_error_to_model": expected("REVIEW", REFUSED),
    "stream_parallel_one_fails": expected("REVIEW", READ_OK, REFUSED),
    "stream_requested_never_ran": expected("REVIEW", UNRAN),
    "stream_events_write_commits": expected("INJECTED", COMMITTED),
    "stream_events_parallel_one_fails": expected("REVIEW", READ_OK, REFUSED),
    "stream_events_write_raises": expected("REVIEW", CHARGED),
    "stream_events_abandoned_after_request": expected("REVIEW", UNRAN),
    # Agent.iter: the run's graph walked node by node, each model request's events streamed (node.stream)
    "stream_iter_write_commits": expected("INJECTED", COMMITTED),
    "stream_iter_parallel_one_fails": expected("REVIEW", READ_OK, REFUSED),
    # the caller stops iterating at the node that would run the requested calls
    "stream_iter_abandoned_after_request": expected("REVIEW", UNRAN),
}


def refund_retry(order: str, amount_cents: int) -> str:
    """Refund an order: the refund API refuses (ModelRetry: the error goes back to the model)."""
    declare("write")
    ran("refund_order")
    raise ModelRetry("refund refused: order already refunded")


def _turns(scenario: str) -> list:
    name = scenario.removeprefix("stream_events_").removeprefix("stream_iter_").removeprefix("stream_")
    return {
        "write_commits": [[write_call()]],
        "write_raises": [[("call_c1", "charge_card", CHARGE)]],
        "tool_error_to_model": [[("call_f1", "refund_order", REFUND)]],
        "parallel_one_fails": [[read_call(), ("call_f1", "refund_order", REFUND)]],
        "requested_never_ran": [[write_call()]],
        "abandoned_after_request": [[write_call()]],
    }[name]


def _agent(scenario: str) -> Agent:
    script = list(_turns(scenario))

    async def stream(messages, info):
        if not script:
            yield "done"
            return
        yield {i: DeltaToolCall(name=name, json_args=json.dumps(args), tool_call_id=cid) for i, (cid, name, args) in enumerate(script.pop(0))}

    tools = [Tool(lookup_customer), Tool(create_invoice), Tool(charge_card), Tool(refund_retry, name="refund_order", max_retries=3)]
    agent = Agent(FunctionModel(stream_function=stream), tools=tools)
    agent.instrument = InstrumentationSettings(tracer_provider=matrix._provider(), include_content=True)
    return agent


async def _run(scenario: str) -> None:
    agent = _agent(scenario)
    limits = UsageLimits(tool_calls_limit=0) if scenario == "stream_requested_never_ran" else None
    if scenario.startswith("stream_iter_"):
        return await _iterate(agent, abandon=scenario.endswith("abandoned_after_request"))
    if not scenario.startswith("stream_events_"):
        async with agent.run_stream("bill customer a", usage_limits=limits) as result:
            async for _text in result.stream_text():
                pass
        return
    async with agent.run_stream_events("bill customer a") as events:
        async for event in events:
            if scenario.endswith("abandoned_after_request") and event.event_kind == "part_end":
                break  # the consumer stops reading once the model's turn asking for the write streamed


async def _iterate(agent: Agent, abandon: bool) -> None:
    async with agent.iter("bill customer a") as run:
        async for node in run:
            if Agent.is_model_request_node(node):
                async with node.stream(run.ctx) as events:
                    async for _event in events:
                        pass
            elif Agent.is_call_tools_node(node) and abandon and node.model_response.tool_calls:
                break  # the caller stops before the node that runs the requested calls


@pytest.fixture(scope="module")
def streamed() -> dict:
    """Each scenario's spans: {scenario: spans}; {(scenario, "ran"): the tools' run counts}."""
    return run_in_process(KEY, EXPECTED, _run_to_its_end, STATE, setup=False)


def _run_to_its_end(scenario: str) -> None:
    """One scenario's run; the limits and errors a scenario provokes end it, as they end the agent's run."""
    try:
        asyncio.run(_run(scenario))
    except (RuntimeError, UsageLimitExceeded):
        pass


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_a_streamed_run_plans_as_the_rules_say(streamed, scenario):
    assert plans(streamed[scenario], KEY) == EXPECTED[scenario]


def test_the_abandoned_and_limited_runs_never_ran_the_write(streamed):
    unran = ("stream_requested_never_ran", "stream_events_abandoned_after_request", "stream_iter_abandoned_after_request")
    assert [streamed[s, "ran"] for s in unran] == [{}, {}, {}]
