"""The OpenAI Agents SDK for JavaScript hands the model its own timeout text on a tool span that ends OK
(``timeoutMs`` with ``timeoutBehavior: "error_as_result"``, the default; @openai/agents-core src/tool.ts,
defaultFunctionToolTimeoutErrorMessage): the text is a framework error template, so the write's outcome is
unknown (docs/DECISIONS.md 570). Its default error text is the Python SDK's and is read by that row."""

from __future__ import annotations

import json

from otlp_json_helpers import json_span

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.result_errors import error_template
from otel_tracefence.pipeline.documents import plan_text

TRACE = "5a" * 16
ROOT = "b0" * 8


def plan_of_tool_output(output: str) -> tuple[str, list]:
    """(class, [(tool, decision, reasons)]) of one OpenInference TOOL span, OK, labelled a write, with ``output``."""
    root = json_span(TRACE, ROOT, "Agent workflow", **{"openinference.span.kind": "CHAIN"})
    tool = json_span(
        TRACE, "b1" * 8, "send_payment", ROOT,
        **{"openinference.span.kind": "TOOL", "tool.name": "send_payment", "input.value": '{"customer":"a","amount_cents":700}',
           "output.value": output, "tracefence.effect": "write"},
    )  # fmt: skip
    tool["status"] = {"code": 1}  # OK, as OpenInference ends it
    document = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [root, tool]}]}]})
    (trace,), _ = plan_text(document, "otlp-json", TraceFenceConfig())
    return trace.replay_class.value, [(d.step.tool, d.decision.value, d.reasons) for d in trace.steps]


def test_the_js_sdks_timeout_text_holds_the_write():
    assert plan_of_tool_output("Tool 'send_payment' timed out after 200ms.") == (
        "review", [("send_payment", "review", ("write_error", "error_template_in_result"))]
    )


def test_the_js_templates_are_named_for_their_sdk():
    assert error_template("Tool 'send_payment' timed out after 200ms.") == "openai-agents (JS)"
    assert error_template("Tool 'send_payment' timed out after 1.5 seconds.") == "openai-agents (Python)"
    assert error_template("An error occurred while running the tool. Please try again.") == "openai-agents (Python)"


def test_a_result_that_only_mentions_milliseconds_commits():
    assert plan_of_tool_output("payment pay_1 settled after 200ms.") == ("injected", [("send_payment", "skip", ("write_committed",))])
