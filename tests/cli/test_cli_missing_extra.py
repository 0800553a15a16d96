"""A command whose extra is not installed (issue 28, part 6): ``tracefence ui`` without ``[ui]`` and ``tracefence
serve`` without ``[serve]`` say which extra to install, in one line, exit 2, instead of a traceback. The missing
package is made unimportable in a real subprocess (``sys.modules[name] = None``, as Python does for a blocked module)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT
from otel_tracefence.cli import missing_extra

_CHILD = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # import raises ModuleNotFoundError, as when the package is not installed
from otel_tracefence.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _run_without(modules: str, *args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD, modules, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_ui_without_its_extra_names_it(tmp_path):
    proc = _run_without("uvicorn,starlette,jinja2", "ui", "--db", str(tmp_path / "review.db"), "--listen", "127.0.0.1:0", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == "tracefence ui: needs the [ui] extra (uvicorn is not installed): pip install 'otel-tracefence[ui]'"
    assert "Traceback" not in proc.stderr


def test_serve_without_its_extra_names_it(tmp_path):
    proc = _run_without("starlette,uvicorn,grpc_health,grpc_status", "serve", "--endpoint", "127.0.0.1:0", "--http-endpoint", "none", "--review-db", str(tmp_path / "r.db"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    last = proc.stderr.splitlines()[-1]
    assert last == "tracefence serve: needs the [serve] extra (grpc_health is not installed): pip install 'otel-tracefence[serve]'"
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "command, module, extra",
    [("ui", "starlette.routing", "ui"), ("serve", "starlette", "serve"), ("serve", "jinja2", "ui"), ("review", "psycopg", "postgres"), ("plan", "yaml", None)],
)
def test_the_extra_named_for_a_missing_module(command, module, extra):
    assert missing_extra(command, module) == extra


def test_plan_needs_no_extra(tmp_path):
    proc = _run_without("starlette,uvicorn,jinja2,grpc_health,grpc_status,psycopg", "plan", str(ROOT / "examples" / "pager_static.otlp.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '"replayClass":"static"' in proc.stdout.replace(" ", "")
