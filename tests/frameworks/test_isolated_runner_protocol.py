"""The isolated frameworks' runner protocol (tests/frameworks/isolated/): a runner's files come back as
each scenario's outcome, and the spans it wrote are the spans the matrix plans.

A probe runner (``isolated/_probe/runner.py``, no ``framework.py``, so not in the matrix, plain OpenTelemetry SDK spans in the GenAI conventions)
runs under this interpreter in place of a framework's environment, so the protocol is checked without
installing anything; the frameworks' own environments are made by the matrix test.
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from case_spans import readable_spans_of
from framework_helpers import plan_of_spans
from tests.frameworks.isolated import envs

def _probe_env(tmp_path: Path) -> envs.Env:
    """An "environment" whose python is this interpreter (it has the SDK and the OTLP encoder)."""
    import sys

    folder = tmp_path / "env"
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return envs.Env("_probe", "python", folder)


def test_each_scenario_comes_back_as_spans_a_refusal_or_an_error(tmp_path):
    """An exception the framework lets out ends the run: the spans made so far are the cell's (the
    probe's raised write is planned ``review``); a scenario the runner left no file for is an error."""
    outcomes = envs.run(_probe_env(tmp_path), tmp_path / "out")
    assert outcomes["approval_interrupt_resume"].cannot == "the probe has no approval"
    raised = plan_of_spans(readable_spans_of(ExportTraceServiceRequest.FromString(outcomes["write_raises"].request)))
    assert [(d.step.tool, d.decision.name, tuple(d.reasons)) for d in raised.steps] == [("create_invoice", "REVIEW", ("write_error",))]
    assert outcomes["mcp_is_error"].error == "no file for the scenario; the runner exited 0: "
    spans = readable_spans_of(ExportTraceServiceRequest.FromString(outcomes["write_commits"].request))
    assert sorted(s.name for s in spans) == ["execute_tool create_invoice", "invoke_agent billing"]
    plan = plan_of_spans(spans)
    assert (plan.replay_class.name, [(d.step.tool, d.decision.name, tuple(d.reasons)) for d in plan.steps]) == (
        "INJECTED",
        [("create_invoice", "SKIP", ("write_committed",))],
    )


def test_a_framework_version_is_read_from_its_pins(tmp_path, monkeypatch):
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "requirements.txt").write_text("# pins\nOpenInference_Instrumentation-LangChain==0.1.80  # its tracer\nlanggraph[extra] == 1.2.22\n")
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "package.json").write_text('{"dependencies": {"ai": "5.0.10", "@openai/agents": "=0.20.0"}}')
    monkeypatch.setattr(envs, "HERE", tmp_path)
    assert envs.pinned_version("py", "python", "openinference-instrumentation-langchain") == "0.1.80"
    assert envs.pinned_version("py", "python", "langgraph") == "1.2.22"
    assert envs.pinned_version("py", "python", "langchain-core") == "not pinned"
    assert envs.pinned_version("js", "node", "ai") == "5.0.10"
    assert envs.pinned_version("js", "node", "@openai/agents") == "0.20.0"
    assert envs.pinned_version("js", "node", None) == ""


def test_a_python_framework_s_no_deps_pins_install_after_its_pins_without_dependencies(tmp_path, monkeypatch):
    """``requirements.nodeps.txt`` (DECISIONS 985): installed with ``--no-deps`` after ``requirements.txt``, part of the
    environment's digest, and read for the framework's version."""
    import subprocess
    import sys

    (tmp_path / "fw").mkdir()
    (tmp_path / "fw" / "requirements.txt").write_text("crewai-core==1.15.30\n")
    monkeypatch.setattr(envs, "HERE", tmp_path)
    plain = envs._digest("fw", "python")
    (tmp_path / "fw" / "requirements.nodeps.txt").write_text("# without their dependencies\ncrewai==1.15.30\n")
    assert envs._digest("fw", "python") != plain
    assert envs.pinned_version("fw", "python", "crewai") == "1.15.30"
    assert envs.pinned_version("fw", "python", "crewai-core") == "1.15.30"
    commands = []

    def run(command, **kwargs):
        commands.append([str(part) for part in command])
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(envs.subprocess, "run", run)
    folder = tmp_path / "env"
    envs._fill("python", "fw", folder)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    assert commands == [
        [sys.executable, "-m", "venv", str(folder)],
        [*pip, "-r", str(tmp_path / "fw" / "requirements.txt")],
        [*pip, "--no-deps", "-r", str(tmp_path / "fw" / "requirements.nodeps.txt")],
    ]
