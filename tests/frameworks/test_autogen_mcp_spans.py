"""AutoGen's MCP tool spans record nothing of how the call ended (the finding behind the matrix's
``autogen``-``mcp_is_error`` cell, issue 24 kind A).

autogen-ext's ``McpWorkbench.call_tool`` (0.7) opens autogen-core's ``execute_tool`` span and catches, inside it,
both an ``isError`` answer and any exception: the span ends UNSET, with no result and no error, whether the MCP
tool committed or failed. Here the AutoGen runner calls one MCP server's committing tool (``mcp_commits``, a run
outside the matrix) and its failing one (``mcp_is_error``): the two tool spans are the same but for the tool's
name and call id, so both plan as committed (static). When an AutoGen version records the outcome (an ERROR
status on ``isError``, or the result), this test fails: the matrix cell can then be decided on what it records.
"""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from framework_helpers import plan_of_spans
from tests.frameworks import conformance as matrix
from tests.frameworks.isolated import envs


def _tool_span(spans):
    (tool,) = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    return tool


def test_a_committed_and_a_failed_mcp_call_leave_the_same_span_and_both_read_as_committed(tmp_path):
    env = envs.prepare("autogen", "python")
    if not env.ok:
        pytest.skip(f"AutoGen cannot run on this machine: {env.why}")
    outcomes = envs.run(env, tmp_path / "out", ["mcp_commits", "mcp_is_error"])
    spans = {name: readable_spans_of(ExportTraceServiceRequest.FromString(o.request)) for name, o in outcomes.items()}
    committed, failed = _tool_span(spans["mcp_commits"]), _tool_span(spans["mcp_is_error"])

    def record(span):
        attributes = {k: v for k, v in span.attributes.items() if k not in ("gen_ai.tool.name", "gen_ai.tool.call.id")}
        return span.name.split(" ")[0], span.status.status_code.name, span.status.description, [e.name for e in span.events], attributes

    assert record(committed) == record(failed) == ("execute_tool", "UNSET", None, [], {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "autogen"})
    for name, tool in (("mcp_commits", "capture_payment"), ("mcp_is_error", "charge_card")):
        plan = plan_of_spans(spans[name], matrix._config("autogen"))
        assert (plan.replay_class.name, [(d.step.tool, d.decision.name, tuple(d.reasons)) for d in plan.steps]) == (
            "STATIC",
            [(tool, "SKIP", ("write_committed", "result_not_recorded", "arguments_not_recorded"))],
        ), name
