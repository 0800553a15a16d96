"""Strands Agents run streamed (``Agent.stream_async``, every event consumed, or the consumer stopping once the model's
turn asking for the write streamed), under its native tracer: the matrix's scenarios as a streaming UI runs them.

The scripted model (tests/frameworks/test_framework_strands.py) streams as Strands' providers do; each run's expected
plan is the plan the rules give (one trace per run).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("strands")

from strands import Agent, tool  # noqa: E402
from strands.hooks import BeforeToolCallEvent, HookProvider  # noqa: E402

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
from tests.frameworks.test_framework_strands import ScriptedModel  # noqa: E402

KEY = "strands"
REFUSED = ("refund_order", "review", ("write_error",))
UNRAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))
EXPECTED = {
    "stream_write_commits": expected("INJECTED", COMMITTED),
    "stream_write_raises": expected("REVIEW", ("charge_card", "review", ("write_error",))),
    "stream_tool_error_to_model": expected("REVIEW", REFUSED),
    "stream_parallel_one_fails": expected("REVIEW", READ_OK, REFUSED),
    "stream_requested_never_ran": expected("REVIEW", UNRAN),  # a BeforeToolCallEvent interrupt, never answered
    "stream_abandoned_after_request": expected("REVIEW", UNRAN),
}


def refund_error(order: str, amount_cents: int) -> dict:
    """Refund an order: the refund API refuses (a ToolResult with status error, handed to the model)."""
    declare("write")
    ran("refund_order")
    return {"status": "error", "content": [{"text": "refund refused: order already refunded"}]}


class Approval(HookProvider):
    """Asks a human before create_invoice (Strands' interrupt); the run stops there, unanswered."""

    def register_hooks(self, registry, **kwargs):
        registry.add_callback(BeforeToolCallEvent, self.approve)

    def approve(self, event):
        if event.tool_use["name"] == "create_invoice" and event.interrupt("approve_invoice", reason="APPROVAL") != "yes":
            event.cancel_tool = "approval was not granted"


TURNS = {
    "stream_write_commits": [[write_call()], "done"],
    "stream_write_raises": [[("call_c1", "charge_card", CHARGE)], "done"],
    "stream_tool_error_to_model": [[("call_f1", "refund_order", REFUND)], "done"],
    "stream_parallel_one_fails": [[read_call(), ("call_f1", "refund_order", REFUND)], "done"],
    "stream_requested_never_ran": [[write_call()], "done"],
    "stream_abandoned_after_request": [[write_call()], "done"],
}


async def _run(scenario: str) -> None:
    tools = [tool(lookup_customer), tool(create_invoice), tool(charge_card), tool(refund_error, name="refund_order")]
    hooks = [Approval()] if scenario == "stream_requested_never_ran" else []
    agent = Agent(model=ScriptedModel(TURNS[scenario]), tools=tools, hooks=hooks, callback_handler=None)
    stream = agent.stream_async("bill customer a")
    async for event in stream:
        if scenario == "stream_abandoned_after_request" and "toolUse" in str(event.get("message", {}).get("content", "")):
            break  # the consumer stops reading once the model's message asking for the write streamed
    await stream.aclose()


@pytest.fixture(scope="module")
def streamed() -> dict:
    """Each scenario's spans: {scenario: spans}; {(scenario, "ran"): the tools' run counts}."""
    return run_in_process(KEY, EXPECTED, lambda scenario: asyncio.run(_run(scenario)), STATE, tracing=matrix._strands_tracing)


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_a_streamed_run_plans_as_the_rules_say(streamed, scenario):
    assert plans(streamed[scenario], KEY) == EXPECTED[scenario]


def test_the_abandoned_and_interrupted_runs_never_ran_the_write(streamed):
    assert [streamed[s, "ran"] for s in ("stream_requested_never_ran", "stream_abandoned_after_request")] == [{}, {}]
