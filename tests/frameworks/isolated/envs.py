"""The isolated frameworks' environments: made once, cached, and used to run each framework's runner.

A Python framework gets a virtual environment made with this interpreter's ``venv`` and filled by
``pip install -r requirements.txt``, then, where the framework's folder has one, ``pip install --no-deps -r
requirements.nodeps.txt`` (distributions installed without their declared dependencies: a framework whose own
dependencies pull in heavy packages it never imports on the path the runner takes; requirements.txt then names what
it does import); a Node.js framework a folder with its ``package.json`` (and
``package-lock.json`` when committed) filled by ``npm ci`` / ``npm install``. Each environment lives
under ``.framework-envs/`` at the checkout's root (``TRACEFENCE_FRAMEWORK_ENVS`` names another folder),
named for the framework and a digest of its pins and interpreter, so an edit to the pins makes a new
one and an unchanged one is reused. A framework whose environment cannot be made (no network, no npm,
a wheel missing for this platform) is reported with the installer's last lines: its cells skip,
saying so. Nothing here is imported by the package: these are test dependencies only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.frameworks.isolated import HERE

ROOT = HERE.parents[2]
ENVS = Path(os.environ.get("TRACEFENCE_FRAMEWORK_ENVS") or ROOT / ".framework-envs")
INSTALL_TIMEOUT_S = float(os.environ.get("TRACEFENCE_FRAMEWORK_INSTALL_TIMEOUT", "1200"))
RUN_TIMEOUT_S = float(os.environ.get("TRACEFENCE_FRAMEWORK_RUN_TIMEOUT", "600"))
PINS = {"python": "requirements.txt", "node": "package.json"}
NO_DEPS = "requirements.nodeps.txt"  # a Python framework's pins installed with ``pip install --no-deps``


@dataclass
class Env:
    """One framework's environment: ``folder`` made and filled (``why`` is None), or why not."""

    key: str
    kind: str  # "python" or "node"
    folder: Path
    why: str | None = None
    outcomes: dict = field(default_factory=dict)  # scenario -> Outcome, once run

    @property
    def ok(self) -> bool:
        return self.why is None


@dataclass(frozen=True)
class Outcome:
    """What a runner wrote for one scenario: the spans (serialized ``ExportTraceServiceRequest``),
    or why the framework cannot make it, or the runner's error."""

    request: bytes | None = None
    cannot: str | None = None
    error: str | None = None


def _pins(key: str, kind: str) -> Path:
    return HERE / key / PINS[kind]


def _digest(key: str, kind: str) -> str:
    h = hashlib.sha256()
    for name in (PINS[kind], NO_DEPS, "package-lock.json"):
        path = HERE / key / name
        if path.is_file():
            h.update(name.encode() + b"\0" + path.read_bytes())
    h.update(sys.version.encode() if kind == "python" else _node_version().encode())
    return h.hexdigest()[:12]


def _node_version() -> str:
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "no node"


def _tail(text: str, lines: int = 12) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def _fill(kind: str, key: str, folder: Path) -> None:
    """Make and fill ``folder`` (raises :class:`RuntimeError` naming what failed)."""
    if kind == "python":
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True, timeout=300)
        pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        command = [*pip, "-r", str(_pins(key, kind))]
        if (HERE / key / NO_DEPS).is_file():
            _install(command, folder)
            command = [*pip, "--no-deps", "-r", str(HERE / key / NO_DEPS)]
    else:
        if shutil.which("npm") is None or shutil.which("node") is None:
            raise RuntimeError("npm or node is not on PATH")
        folder.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            if (HERE / key / name).is_file():
                shutil.copy(HERE / key / name, folder / name)
        verb = "ci" if (folder / "package-lock.json").is_file() else "install"
        command = ["npm", verb, "--no-audit", "--no-fund", "--loglevel=error"]
    _install(command, folder)


def _install(command: list[str], folder: Path) -> None:
    """Run one installer command in ``folder`` (raises :class:`RuntimeError` with its last lines when it fails)."""
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])}... exited {done.returncode}: {_tail(done.stderr or done.stdout)}")


_MADE: dict[str, Env] = {}


def prepare(key: str, kind: str) -> Env:
    """The framework's environment, made now if no ready one is cached (at most ``INSTALL_TIMEOUT_S``
    seconds of installing). Never raises: an environment that cannot be made says why."""
    if key in _MADE:
        return _MADE[key]
    folder = ENVS / f"{key}-{_digest(key, kind)}"
    env = Env(key, kind, folder)
    if not (folder / ".ready").is_file():
        # a venv's scripts name their folder, so it is made where it lives; ``.ready`` marks it complete
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            _fill(kind, key, folder)
            (folder / ".ready").write_text("ready\n")
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            env.why = f"its environment could not be made: {exc}"
    _MADE[key] = env
    return env


def prepare_all(frameworks: list, workers: int = 3) -> dict[str, Env]:
    """Every isolated framework's environment, made side by side (``workers`` at a time)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        envs = list(pool.map(lambda f: prepare(f.key, f.isolated), frameworks))
    return {e.key: e for e in envs}


def run(env: Env, out: Path, scenarios: list[str] | None = None) -> dict[str, Outcome]:
    """Run the framework's runner once for every scenario of the matrix (or only ``scenarios``, named on its
    command line, uncached: a runner's extra scenarios outside the matrix), writing into ``out``; each
    scenario's :class:`Outcome` (a scenario the runner left no file for is an error naming the runner's exit)."""
    if env.outcomes and scenarios is None:
        return env.outcomes
    from tests.frameworks.matrix_table import SCENARIO_KEYS

    out.mkdir(parents=True, exist_ok=True)
    source = HERE / env.key
    environ = dict(os.environ)
    for name in [n for n in environ if n.startswith("OTEL_")]:
        del environ[name]  # the runner's tracing is its own (an in-memory exporter), whatever the test run sets
    if env.kind == "python":
        environ["PYTHONPATH"] = str(_shared_modules(out))
        command = [str(env.folder / "bin" / "python"), str(source / "runner.py"), str(out), *(scenarios or [])]
        cwd = source
    else:
        # a Node MCP client that starts the billing MCP server runs it with this interpreter (the test's: mcp 2.x)
        environ["TRACEFENCE_MCP_PYTHON"] = sys.executable
        environ["TRACEFENCE_MCP_SERVER"] = str(HERE / "mcp_billing_server.py")
        # the runner and every module the Node runners share (runner_common.mjs, vercel_ai_common.mjs, ...)
        for name in ["runner.mjs", *sorted(p.name for p in HERE.glob("*.mjs"))]:
            shutil.copy(source / name if (source / name).is_file() else HERE / name, env.folder / name)
        command = ["node", str(env.folder / "runner.mjs"), str(out), *(scenarios or [])]
        cwd = env.folder
    try:
        done = subprocess.run(command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        exit_text = f"the runner exited {done.returncode}: {_tail(done.stderr)}"
    except subprocess.TimeoutExpired:
        exit_text = f"the runner did not finish in {RUN_TIMEOUT_S:.0f} s"
    outcomes = {}
    for scenario in scenarios or SCENARIO_KEYS:
        pb, cannot, error = (out / f"{scenario}{suffix}" for suffix in (".otlp.pb", ".cannot", ".error"))
        if pb.is_file():
            outcomes[scenario] = Outcome(request=pb.read_bytes())
        elif cannot.is_file():
            outcomes[scenario] = Outcome(cannot=cannot.read_text(encoding="utf-8"))
        elif error.is_file():
            outcomes[scenario] = Outcome(error=_tail(error.read_text(encoding="utf-8"), 6))
        else:
            outcomes[scenario] = Outcome(error=f"no file for the scenario; {exit_text}")
    if scenarios is None:
        env.outcomes = outcomes
    return outcomes


def _shared_modules(out: Path) -> Path:
    """A folder holding links to the modules the runners share (``runner_common.py``, ...), for the runner's
    ``PYTHONPATH``: only those, so a framework's folder (``isolated/langgraph``) never joins the namespace of
    the framework's own package of that name."""
    lib = out / "_shared"
    lib.mkdir(parents=True, exist_ok=True)
    for module in HERE.glob("*.py"):
        if module.name not in ("__init__.py", "envs.py") and not (lib / module.name).exists():
            (lib / module.name).symlink_to(module)
    return lib


def pinned_version(key: str, kind: str, dist: str | None) -> str:
    """``dist``'s version as the framework's pins give it (``name==X`` in requirements.txt or
    requirements.nodeps.txt, an exact dependency in package.json), or ``"not pinned"``."""
    if dist is None:
        return ""
    path = _pins(key, kind)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if kind == "python" and (HERE / key / NO_DEPS).is_file():
        text += "\n" + (HERE / key / NO_DEPS).read_text(encoding="utf-8")
    if kind == "python":
        want = re.sub(r"[-_.]+", "-", dist).lower()
        for line in text.splitlines():
            match = re.match(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*==\s*([^\s;#]+)", line)
            if match and re.sub(r"[-_.]+", "-", match.group(1)).lower() == want:
                return match.group(3)
        return "not pinned"
    deps = json.loads(text or "{}").get("dependencies", {})
    return str(deps.get(dist, "not pinned")).lstrip("=")
