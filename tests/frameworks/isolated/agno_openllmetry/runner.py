"""Agno under OpenLLMetry's Agno instrumentation (opentelemetry-instrumentation-agno): the agno row's scenarios
(``../agno/runner.py``, loaded from its file: the same scripted model, tools, hooks and MCP server) with OpenLLMetry's
instrumentor on instead of OpenInference's.

OpenLLMetry (opentelemetry/instrumentation/agno/__init__.py, _tool_wrappers.py) wraps ``Agent.run`` / ``Agent.arun``
(``<agent>.agent`` spans), ``Team.run`` / ``arun`` and ``FunctionCall.execute`` / ``aexecute`` (``<tool>.tool``
spans, ``traceloop.span.kind`` ``tool``, ``gen_ai.tool.name``, ``traceloop.entity.input`` the arguments as JSON,
``traceloop.entity.output`` ``str()`` of Agno's ``FunctionExecutionResult``). It makes no model span (that is a
provider instrumentation's, and the scripted model has none), and does not wrap ``continue_run``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("agno_scenarios", Path(__file__).parents[1] / "agno" / "runner.py")
scenarios = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = scenarios  # its dataclass (the scripted model) looks its module up
_spec.loader.exec_module(scenarios)

from opentelemetry.instrumentation.agno import AgnoInstrumentor  # noqa: E402
from runner_common import PROVIDER, main  # noqa: E402

AgnoInstrumentor().instrument(tracer_provider=PROVIDER)

if __name__ == "__main__":
    raise SystemExit(main(scenarios.run))
