"""What every Python framework runner under ``tests/frameworks/isolated/<framework>/runner.py`` shares.

This module runs INSIDE the framework's own environment (made by ``envs.py``), where otel-tracefence
is not installed: it needs only ``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-common``
(every framework environment's requirements name both). It collects each scenario's spans in memory
and writes them as one serialized OTLP ``ExportTraceServiceRequest`` (protobuf bytes, no JSON mapping
involved). The tools the runners wrap are ``matrix_tools``'s, the module the in-process matrix uses too.

The runner protocol (``python runner.py OUT_DIR [SCENARIO ...]``): for each scenario, exactly one of
``OUT_DIR/<scenario>.otlp.pb`` (the spans), ``<scenario>.cannot`` (UTF-8: why the framework cannot
make it) or ``<scenario>.error`` (UTF-8: the traceback) is written.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Callable

from matrix_tools import STATE, CannotProduce  # linked beside this module (envs._shared_modules)
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SCENARIO_KEYS = [
    "read_ok",
    "write_commits",
    "write_raises",
    "write_times_out",
    "tool_error_to_model",
    "parallel_one_fails",
    "framework_retries",
    "requested_never_ran",
    "approval_interrupt_resume",
    "mcp_is_error",
]

# -- Collection and the protocol ---------------------------------------------------------------------------------

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(PROVIDER)  # frameworks that trace through the global provider use this one


def session(name: str = "billing session"):
    """A plain parent span: two runs of one agent session (interrupted, then resumed) make one trace."""
    return PROVIDER.get_tracer("conformance").start_as_current_span(name)


def main(run: Callable[[str], None], argv: list[str] | None = None) -> int:
    """Run ``run(scenario)`` for each scenario named in ``argv`` (default: all), writing the protocol's
    files to ``argv[0]``. ``run`` raises :class:`CannotProduce` for a scenario its framework cannot make;
    any other exception it lets out is the framework's (a raised write ends the run): the spans made so
    far are the scenario's. Returns the process exit code (0: every file written)."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    for scenario in args[1:] or SCENARIO_KEYS:
        STATE.clear()
        EXPORTER.clear()
        try:
            run(scenario)
        except CannotProduce as exc:
            (out / f"{scenario}.cannot").write_text(str(exc) or scenario, encoding="utf-8")
            continue
        except Exception:  # noqa: BLE001 - the framework's own failure ends the run; its spans are the cell
            STATE["raised"] = traceback.format_exc()
        try:
            PROVIDER.force_flush()
            spans = EXPORTER.get_finished_spans()
            (out / f"{scenario}.otlp.pb").write_bytes(encode_spans(spans).SerializeToString())
        except Exception:  # noqa: BLE001
            (out / f"{scenario}.error").write_text(traceback.format_exc(), encoding="utf-8")
    return 0
