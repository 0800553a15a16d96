"""LangGraph under LangSmith's OpenTelemetry export: the LangGraph row's scenarios (``../langgraph/runner.py``, loaded
from its file, OpenInference left off) traced by langsmith's own tracer with ``LANGSMITH_TRACING_MODE=otel``.

LangSmith turns each finished run into an OpenTelemetry span on the global tracer provider (``runner_common``'s),
from its client's background thread (langsmith/_internal/otel/_otel_exporter.py): a run's span exists only once
the client flushes, so every scenario ends with ``Client.flush()``, and no tool body can reach its span to label
it: the tools' effects are the operator's tool rules (``framework.py``). ``LANGSMITH_ENDPOINT`` names a closed
local port; in otel mode nothing is sent there.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

os.environ.update(
    LANGSMITH_TRACING="true", LANGSMITH_TRACING_MODE="otel", LANGSMITH_API_KEY="scripted", LANGSMITH_ENDPOINT="http://127.0.0.1:9",
)

from langsmith.run_trees import get_cached_client  # noqa: E402 - after the environment it reads
from runner_common import main  # noqa: E402

_spec = importlib.util.spec_from_file_location("langgraph_scenarios", Path(__file__).parents[1] / "langgraph" / "runner.py")
scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenarios)


def run(scenario: str) -> None:
    try:
        scenarios.run(scenario)
    finally:
        get_cached_client().flush()  # the runs' spans are made here


if __name__ == "__main__":
    raise SystemExit(main(run))
