"""The agent-shaped tool span every benchmark uses: 8 attributes, GenAI conventions plus tracefence labels."""

from __future__ import annotations

import json


def tool_attributes(trace_index: int, turn: int) -> dict[str, str]:
    """Attributes of the ``turn``-th tool span (0, 1: reads; 2: a write with an idempotency key) of trace ``trace_index``."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": f"tool_{turn}",
        "gen_ai.tool.call.id": f"call_{trace_index}_{turn}",
        "gen_ai.tool.call.arguments": json.dumps({"customer": f"c{trace_index}", "amount_cents": 100 * turn, "note": "x" * 20}),
        "gen_ai.tool.call.result": json.dumps({"ok": True, "id": f"r{trace_index}"}),
        "tracefence.effect": "read" if turn < 2 else "write",
        "tracefence.idempotency_key": f"k-{trace_index}-{turn}",
        "gen_ai.agent.name": "billing",
    }


def run_agent_traces(provider, traces: int) -> None:
    """``traces`` agent-shaped traces of 10 spans through ``provider`` (an SDK ``TracerProvider``): an
    ``invoke_agent`` root, 4 chat spans, 3 tool spans (:func:`tool_attributes`), 2 plain spans."""
    tracer = provider.get_tracer("bench.agent")
    for t in range(traces):
        with tracer.start_as_current_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for turn in range(3):
                with tracer.start_as_current_span("chat model", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}):
                    pass
                with tracer.start_as_current_span(f"execute_tool tool_{turn}", attributes=tool_attributes(t, turn)):
                    pass
            with tracer.start_as_current_span("chat model", attributes={"gen_ai.operation.name": "chat"}):
                pass
            with tracer.start_as_current_span("validate output"):
                pass
            with tracer.start_as_current_span("render answer"):
                pass
