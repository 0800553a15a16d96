"""AutoGen's MCP tool spans record nothing of how the call ended (the finding behind the matrix's
``autogen``-``mcp_is_error`` cell, issue 24 kind A), and the path that opens them says so (docs/DECISIONS.md 780).

autogen-ext's ``McpWorkbench.call_tool`` (0.7) opens autogen-core's ``execute_tool`` span and catches, inside it,
both an ``isError`` answer and any exception: the span ends UNSET, with no result and no error, whether the MCP
tool committed or failed. autogen-core's ``BaseTool.run_json`` (a FunctionTool) opens the same span with
``gen_ai.tool.description`` and ends it ERROR on an exception: only there is UNSET evidence of commit
(``status_paths.STATUS_EVIDENCE_PATHS``). Here the AutoGen runner calls one MCP server's committing tool
(``mcp_commits``, a run outside the matrix) and its failing one (``mcp_is_error``), and a FunctionTool write
(``write_commits``): the two MCP spans are the same but for the tool's name and call id, and both are held
(``write_outcome_unrecorded``); the FunctionTool span carries the description and commits. When an AutoGen version
records the outcome (an ERROR status on ``isError``, or the result), the first assertion fails: the rule can then
read what it records.
"""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from framework_helpers import plan_of_spans
from tests.frameworks import conformance as matrix
from tests.frameworks.isolated import envs

K = "arguments_not_recorded"


def _tool_span(spans):
    (tool,) = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    return tool


def _steps(spans):
    plan = plan_of_spans(spans, matrix._config("autogen"))
    return plan.replay_class.name, [(d.step.tool, d.decision.name, tuple(d.reasons)) for d in plan.steps]


def test_autogen_mcp_spans_are_one_span_for_a_committed_and_a_failed_call_and_both_are_held(tmp_path):
    env = envs.prepare("autogen", "python")
    if not env.ok:
        pytest.skip(f"AutoGen cannot run on this machine: {env.why}")
    outcomes = envs.run(env, tmp_path / "out", ["mcp_commits", "mcp_is_error", "write_commits"])
    spans = {name: readable_spans_of(ExportTraceServiceRequest.FromString(o.request)) for name, o in outcomes.items()}
    committed, failed = _tool_span(spans["mcp_commits"]), _tool_span(spans["mcp_is_error"])

    def record(span):
        attributes = {k: v for k, v in span.attributes.items() if k not in ("gen_ai.tool.name", "gen_ai.tool.call.id")}
        return span.name.split(" ")[0], span.status.status_code.name, span.status.description, [e.name for e in span.events], attributes

    assert record(committed) == record(failed) == ("execute_tool", "UNSET", None, [], {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "autogen"})
    for name, tool in (("mcp_commits", "capture_payment"), ("mcp_is_error", "charge_card")):
        assert _steps(spans[name]) == ("REVIEW", [(tool, "REVIEW", ("write_outcome_unrecorded", "result_not_recorded", K))]), name

    function_tool = _tool_span(spans["write_commits"])
    assert (function_tool.status.status_code.name, "gen_ai.tool.description" in function_tool.attributes) == ("UNSET", True)
    assert _steps(spans["write_commits"]) == ("STATIC", [("create_invoice", "SKIP", ("write_committed", "result_not_recorded", K))])
