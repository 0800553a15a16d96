"""``tracefence --help`` starts as fast as Python (issue 28, part 5; docs/decisions/operations.md 890): the command list
is built without importing any command, so the engine, pydantic, gRPC and the review store are not imported; a
command's module is imported when it is chosen. The rule is pinned on the modules imported, in a fresh interpreter,
not on a timing (docs/performance.md has the time)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli_helpers import run
from conftest import ROOT

_CHILD = """
import json, runpy, sys
sys.argv = ["tracefence", *sys.argv[1:]]
try:
    runpy.run_module("otel_tracefence", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

#: What the command list must not import: the settings' models, gRPC and protobuf, the OpenTelemetry SDK, the engine
#: (the normalizer, planner, pipeline) and the review store.
HEAVY = ("pydantic", "pydantic_settings", "pydantic_core", "grpc", "google.protobuf", "opentelemetry", "yaml", "tqdm", "shtab",
         "otel_tracefence.review", "otel_tracefence.normalize", "otel_tracefence.planner", "otel_tracefence.pipeline",
         "otel_tracefence.core.config", "otel_tracefence.core.model")  # fmt: skip


def _imported(*args: str) -> tuple[object, list[str]]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    report = json.loads(proc.stderr.splitlines()[-1])
    return report["code"], report["modules"]


def _heavy(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY)]


@pytest.mark.parametrize("args", [("--help",), (), ("nosuchcommand",)])
def test_the_command_list_imports_no_command(args):
    code, modules = _imported(*args)
    assert code == (0 if args == ("--help",) else 2)
    assert _heavy(modules) == []
    assert [name for name in modules if name.startswith("otel_tracefence.cli.")] == []


def test_a_command_imports_what_it_needs_when_chosen():
    code, modules = _imported("plan", "--help")
    assert code == 0
    assert "otel_tracefence.cli.plan" in modules and "otel_tracefence.pipeline.documents" in modules
    assert [name for name in modules if name.startswith("otel_tracefence.cli.") and name != "otel_tracefence.cli.plan"] == ["otel_tracefence.cli.inputs", "otel_tracefence.cli.plan_common", "otel_tracefence.cli.table"]
    assert not any(name.startswith(("otel_tracefence.service", "otel_tracefence.ui", "grpc_health", "starlette", "uvicorn")) for name in modules)


def test_the_command_list_says_what_each_command_says_of_itself():
    from otel_tracefence.cli import COMMANDS, build_parser

    subparsers = build_parser()._subparsers._group_actions[0]
    assert [(action.dest, action.help) for action in subparsers._choices_actions] == [(name, help_line) for name, (_, help_line) in COMMANDS.items()]
    lazy = run("--help")
    assert lazy.returncode == 0
    for name, (_, help_line) in COMMANDS.items():
        assert name in lazy.stdout and help_line.split()[0] in lazy.stdout


def test_a_command_chosen_gets_its_own_options_and_the_global_ones():
    proc = run("serve", "--help")
    assert proc.returncode == 0
    assert "--upstream-protocol" in proc.stdout and "--config CONFIG" in proc.stdout and "--log-level" in proc.stdout
    proc = run("review", "list", "--help")
    assert proc.returncode == 0 and "--state" in proc.stdout and "--config CONFIG" in proc.stdout
    proc = run("plan", str(ROOT / "examples" / "reads_only.csv"), "--nosuchflag")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines()[-1] == "tracefence: error: unrecognized arguments: --nosuchflag"


def test_ctrl_c_while_a_command_loads_is_one_line_and_130():
    child = """
import sys
class Interrupt:  # Ctrl-C arriving while the chosen command's module is imported
    def find_spec(self, name, path=None, target=None):
        if name == "otel_tracefence.cli.plan":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
from otel_tracefence.cli import main
sys.exit(main(["plan", "x.json"]))
"""
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "tracefence plan: interrupted\n")
