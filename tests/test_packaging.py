"""The package as a library in an agent's process (issue 28, part 6): what installing and importing it brings.

The core install (no extra) is what the span processor, the zero-code exporter and the CLI's plan, tools and
review commands need; ``[serve]``, ``[ui]`` and ``[postgres]`` bring the rest (docs/DECISIONS.md 650-653).
Importing the package and running the processor imports none of the serve or ui dependencies; the version is
written once (pyproject.toml) and read from the installed metadata.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys

import pytest

import otel_tracefence
from conftest import ROOT

# The top-level modules only an extra installs (pyproject.toml, [project.optional-dependencies]).
SERVE_AND_UI_MODULES = ("uvicorn", "starlette", "jinja2", "multipart", "python_multipart", "grpc_health", "grpc_status", "h11", "anyio", "psycopg", "psycopg_pool")

_PROCESSOR_CHILD = """
import json, sys
import otel_tracefence
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_tracefence.sdk import TraceFenceSpanProcessor, TraceFenceSpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(exporter)))  # the default review store
tracer = provider.get_tracer("agent")
with tracer.start_as_current_span("invoke_agent"):
    with tracer.start_as_current_span("execute_tool get_weather", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "c1"}):
        pass
provider.shutdown()
spans = exporter.get_finished_spans()
print(json.dumps({
    "loaded": sorted(name for name in sys.modules if name.split(".")[0] in set(sys.argv[1:])),
    "classes": [span.attributes.get("tracefence.replay.class") for span in spans if span.parent is None],
    "spans": len(spans),
}))
"""


def _distribution_requirements() -> list[str]:
    return importlib.metadata.requires("otel-tracefence") or []


def test_the_processor_imports_no_serve_or_ui_dependency(tmp_path):
    """An agent that imports the package and runs the processor (a real SDK pipeline, its default review store)
    loads none of uvicorn, Starlette, Jinja2, python-multipart, the gRPC health and status packages or psycopg."""
    proc = subprocess.run([sys.executable, "-c", _PROCESSOR_CHILD, *SERVE_AND_UI_MODULES], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["loaded"] == []
    assert got["spans"] == 2 and got["classes"] == ["review"]  # it did plan: an unlabelled tool is held


def test_the_core_install_requires_no_serve_or_ui_dependency():
    core = [req for req in _distribution_requirements() if "extra ==" not in req]
    names = {re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower() for req in core}
    assert "opentelemetry-sdk" in names and "protobuf" in names
    assert not names & {"uvicorn", "starlette", "jinja2", "python-multipart", "grpcio-health-checking", "grpcio-status", "psycopg", "psycopg-pool"}


def test_the_extras_bring_serve_ui_and_postgres():
    metadata = importlib.metadata.metadata("otel-tracefence")
    assert {"serve", "ui", "postgres", "test"} <= set(metadata.get_all("Provides-Extra") or [])
    by_extra: dict[str, set[str]] = {}
    for req in _distribution_requirements():
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if extra:
            by_extra.setdefault(extra.group(1), set()).add(re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower())
    assert {"starlette", "uvicorn", "grpcio-health-checking", "grpcio-status"} <= by_extra["serve"]
    assert {"starlette", "uvicorn", "jinja2", "python-multipart"} <= by_extra["ui"]
    assert {"psycopg", "psycopg-pool"} <= by_extra["postgres"]
    assert "otel-tracefence" in by_extra["test"]  # the test extra brings every other extra (make setup, .ci/run)


def test_the_license_is_an_spdx_expression():
    metadata = importlib.metadata.metadata("otel-tracefence")
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])


def test_the_version_is_written_once_and_read_from_the_metadata():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert otel_tracefence.__version__ == importlib.metadata.version("otel-tracefence") == declared
    proc = subprocess.run([sys.executable, "-m", "otel_tracefence", "--version"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"tracefence {declared} (")


def test_the_package_ships_its_type_hints():
    assert (ROOT / "otel_tracefence" / "py.typed").is_file()
    tomllib = pytest.importorskip("tomllib")
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["otel_tracefence"]
