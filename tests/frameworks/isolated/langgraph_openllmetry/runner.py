"""LangGraph under OpenLLMetry's LangChain instrumentation (``opentelemetry-instrumentation-langchain``): the LangGraph
row's scenarios (``../langgraph/runner.py``, loaded from its file, OpenInference left off) traced by traceloop's
callback handler instead.

OpenLLMetry's handler attaches each run's span as the OpenTelemetry context when the run starts
(``TraceloopCallbackHandler._safe_attach_context``, ``run_inline``), and langchain-core copies the context for the tool
body after ``on_tool_start``: inside a tool, ``trace.get_current_span()`` is its ``execute_tool <name>`` span. The
LangGraph runner's span lookup (OpenInference's ``get_current_span``) is replaced by that, so each body labels its own
span with ``declare`` as a user of this instrumentation would; no operator tool rule is needed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from opentelemetry import trace
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from runner_common import PROVIDER, main

_spec = importlib.util.spec_from_file_location("langgraph_scenarios", Path(__file__).parents[1] / "langgraph" / "runner.py")
scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenarios)


def _tool_span():
    """The tool's span as OpenLLMetry makes it current (None outside a tool span: the body then labels nothing)."""
    span = trace.get_current_span()
    return span if span.is_recording() and getattr(span, "name", "").startswith("execute_tool ") else None


scenarios.get_current_span = _tool_span


if __name__ == "__main__":
    LangchainInstrumentor().instrument(tracer_provider=PROVIDER)
    raise SystemExit(main(scenarios.run))
