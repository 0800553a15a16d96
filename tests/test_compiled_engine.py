"""The compiled engine (Cython, built by setup.py at install) and the pure-Python one give the same bytes.

Each engine plans every case of ../shared/cases (when present) and tests/cases, every example the
command line is tested on, and the review page's sample, in a subprocess of its own: once as
installed (compiled, on a machine with a C compiler) and once with ``TRACEFENCE_PURE_PYTHON=1``. What
is compared is ``tracefence plan``'s output (its JSON lines and messages, with malformed spans
rejected and held for review) and, for the OTLP cases, the attributes of every span the span
processor hands on. See docs/decisions/performance.md, items 115-117.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from functools import lru_cache
from pathlib import Path

import pytest

import otel_tracefence
from otel_tracefence import compiled
from case_spans import INPUT_SUFFIXES, find_cases
from conftest import ROOT, SHARED_CASES

# Everything `tracefence plan` is run on by the tests: the cases and the committed examples.
FIXTURES = sorted(
    [path for _, path, _ in find_cases(SHARED_CASES, "shared") + find_cases(ROOT / "tests" / "cases", "tests")]
    + [path for path in (ROOT / "examples").iterdir() if path.suffix in INPUT_SUFFIXES]
    + [ROOT / "otel_tracefence" / "ui" / "static" / "sample.ndjson"]
)

_CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    sys.path.insert(0, sys.argv[1])  # tests/, for case_spans
    import otel_tracefence
    from otel_tracefence.pipeline.documents import plan_document
    from otel_tracefence.core.config import TraceFenceConfig
    from otel_tracefence.readers.errors import UnreadableInput

    out = {"engine": otel_tracefence.engine(), "plans": {}, "processor": {}}
    config = TraceFenceConfig()
    paths = [Path(p) for p in sys.argv[2:]]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for on_malformed in ("reject", "review"):
            try:
                outcome = plan_document(text, "auto", config, on_malformed=on_malformed)
                got = {"json": outcome.json_lines(), "messages": outcome.messages, "rejected": outcome.rejected}
            except UnreadableInput as exc:
                got = {"unreadable": str(exc)}
            out["plans"][f"{path}|{on_malformed}"] = got

    from case_spans import feed, is_otlp_case, readable_spans
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from otel_tracefence.sdk import TraceFenceSpanProcessor

    for path in paths:
        if not is_otlp_case(path):
            continue
        exporter = InMemorySpanExporter()
        processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=None)
        feed(processor, readable_spans(path))
        processor.shutdown()
        out["processor"][str(path)] = [
            [format(span.context.span_id, "016x"), sorted((k, repr(v)) for k, v in (span.attributes or {}).items())]
            for span in exporter.get_finished_spans()
        ]
    print(json.dumps(out, sort_keys=True))
    """
)


def _environ(pure: bool) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("OTEL_TRACEFENCE_", compiled.PURE_PYTHON_ENV))}
    if pure:
        env[compiled.PURE_PYTHON_ENV] = "1"
    return env


@lru_cache(maxsize=2)
def _run_engine(pure: bool) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(ROOT / "tests"), *map(str, FIXTURES)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=_environ(pure),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def run_child(code: str, pure: bool) -> dict:
    """The JSON that ``code`` prints, run by this interpreter in a fresh process with the compiled engine or,
    with ``pure``, the pure-Python one (``TRACEFENCE_PURE_PYTHON=1``)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_environ(pure))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _engine_in_subprocess(pure: bool) -> str:
    code = "import otel_tracefence; print(otel_tracefence.engine())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, env=_environ(pure))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _c_compiler() -> str | None:
    """The C compiler setuptools would call (sysconfig's CC, as setuptools reads it), when it is on PATH."""
    command = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    return shutil.which(command[0]) if command else None


def _compiled_engine_or_skip() -> None:
    if _engine_in_subprocess(pure=False) != "compiled" and _c_compiler() is None:
        pytest.skip("no C compiler at install: the engine was not compiled, so there is no second engine to compare")


def test_the_fixtures_are_here():
    assert len(FIXTURES) >= 8
    if (ROOT.parent / "shared").is_dir():
        assert any(path.is_relative_to(SHARED_CASES) for path in FIXTURES)


def test_install_compiled_the_engine_when_a_compiler_is_present():
    """`make setup` (pip install -e) on a machine with a C compiler leaves every engine module compiled."""
    if _c_compiler() is None:
        pytest.skip("no C compiler on PATH: the install keeps the pure-Python engine")
    assert _engine_in_subprocess(pure=False) == "compiled", (
        "a C compiler is present but the engine is not (fully) compiled: reinstall with `make setup` "
        "(or `pip install -e .`) and read its warnings"
    )


def test_the_switch_forces_pure_python():
    assert _engine_in_subprocess(pure=True) == "python"


def test_compiled_and_pure_engines_give_identical_plans():
    _compiled_engine_or_skip()
    compiled_run, pure_run = _run_engine(pure=False), _run_engine(pure=True)
    assert (compiled_run["engine"], pure_run["engine"]) == ("compiled", "python")
    assert sorted(compiled_run["plans"]) == sorted(pure_run["plans"]) and len(compiled_run["plans"]) == 2 * len(FIXTURES)
    for key, got in compiled_run["plans"].items():
        assert got == pure_run["plans"][key], key
    # The plans are real plans, not two empty outputs alike.
    assert sum(got.get("json", "").count("\n") for got in compiled_run["plans"].values()) >= len(FIXTURES)


def test_compiled_and_pure_processors_annotate_alike():
    _compiled_engine_or_skip()
    compiled_run, pure_run = _run_engine(pure=False), _run_engine(pure=True)
    assert compiled_run["processor"] and sorted(compiled_run["processor"]) == sorted(pure_run["processor"])
    for path, spans in compiled_run["processor"].items():
        assert spans == pure_run["processor"][path], path
    annotated = [attrs for spans in compiled_run["processor"].values() for _, attrs in spans]
    assert any(key == "tracefence.replay.class" for attrs in annotated for key, _ in attrs)


def _finder(pure: bool, directory: Path) -> compiled.SourceFirstFileFinder:
    return compiled.SourceFirstFileFinder(str(directory), compiled._Policy(pure))


def test_pure_finder_loads_every_module_from_its_source():
    from otel_tracefence import planner

    finder = _finder(True, Path(planner.__path__[0]))
    spec = finder.find_spec("otel_tracefence.planner.rules")
    assert type(spec.loader) is importlib.machinery.SourceFileLoader
    assert spec.origin == str(Path(planner.__file__).with_name("rules.py"))
    package = _finder(True, Path(otel_tracefence.__path__[0])).find_spec("otel_tracefence.normalize")
    assert package.origin.endswith("normalize/__init__.py") and package.submodule_search_locations
    assert finder.find_spec("otel_tracefence.planner.no_such_module") is None


def test_an_extension_built_from_another_source_is_not_loaded():
    """An edited checkout with an editable install: the extension module is stale, the .py file is used."""
    _compiled_engine_or_skip()
    from otel_tracefence import planner

    finder = _finder(False, Path(planner.__path__[0]))
    assert type(finder.find_spec("otel_tracefence.planner.rules").loader) is importlib.machinery.ExtensionFileLoader  # as built
    top = _finder(False, Path(otel_tracefence.__path__[0]))
    assert type(top.find_spec("otel_tracefence.cli").loader) is importlib.machinery.SourceFileLoader  # no extension module beside it
    finder.policy._record = {"otel_tracefence/planner/rules.py": "0" * 64}  # as if the source changed since the build
    spec = finder.find_spec("otel_tracefence.planner.rules")
    assert type(spec.loader) is importlib.machinery.SourceFileLoader
    finder.policy._record = {}  # no record of the build at all: not trusted either
    assert type(finder.find_spec("otel_tracefence.planner.rules").loader) is importlib.machinery.SourceFileLoader


_SCOPE_CHILD = """
import json, sys
before = (list(sys.meta_path), list(sys.path_hooks))
import otel_tracefence, otel_tracefence.planner.rules, otel_tracefence.normalize.step, otel_tracefence.sdk
import email.mime.text  # a module of the host process, imported after the package
from otel_tracefence.compiled import SourceFirstFileFinder
ours = sorted(key for key, finder in sys.path_importer_cache.items() if isinstance(finder, SourceFirstFileFinder))
print(json.dumps({
    "engine": otel_tracefence.engine(),
    "meta_path_unchanged": list(sys.meta_path) == before[0],
    "path_hooks_unchanged": list(sys.path_hooks) == before[1],
    "ours": ours,
    "package_root": otel_tracefence.__path__[0],
    "email_loader": type(sys.modules["email.mime.text"].__spec__.loader).__name__,
    "rules_loader": type(sys.modules["otel_tracefence.planner.rules"].__spec__.loader).__name__,
}))
"""


@pytest.mark.parametrize("pure", [False, True], ids=["as-installed", "pure-python"])
def test_the_finder_is_scoped_to_the_package_directories(pure):
    """Importing the package adds nothing to sys.meta_path or sys.path_hooks (no hook ahead of, or behind, the
    standard finders): the package's own directories get their finder, and no other import goes through it."""
    got = run_child(_SCOPE_CHILD, pure=pure)
    assert got["meta_path_unchanged"] and got["path_hooks_unchanged"]
    assert got["email_loader"] == "SourceFileLoader"
    assert got["ours"] and all(key == got["package_root"] or key.startswith(got["package_root"] + os.sep) for key in got["ours"])
    if pure:
        assert (got["engine"], got["rules_loader"]) == ("python", "SourceFileLoader")
        assert got["package_root"] in got["ours"] and os.path.join(got["package_root"], "planner") in got["ours"]
    elif got["engine"] == "compiled":
        assert got["rules_loader"] == "ExtensionFileLoader"


def test_without_extension_modules_and_not_forced_no_finder_is_registered(tmp_path):
    """An install without a compiler (no extension module in the package) with the switch off: nothing is registered."""
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "rules.py").write_text("")
    assert compiled.install_finder([str(tmp_path)], environ={}) is None
    assert str(tmp_path) not in sys.path_importer_cache
    finder = compiled.install_finder([str(tmp_path)], environ={compiled.PURE_PYTHON_ENV: "1"})
    try:
        assert isinstance(finder, compiled.SourceFirstFileFinder) and finder.policy.pure
        assert sys.path_importer_cache[str(tmp_path)] is finder
        assert compiled.install_finder([str(tmp_path)], environ={}) is finder  # once
    finally:
        sys.path_importer_cache.pop(str(tmp_path), None)


def test_the_build_record_names_every_compiled_module():
    _compiled_engine_or_skip()
    record = json.loads((ROOT / "otel_tracefence" / compiled.BUILD_RECORD).read_text())
    files = compiled.engine_files(ROOT)
    assert sorted(record) == sorted(path.relative_to(ROOT).as_posix() for path in files)
    assert all(record[path.relative_to(ROOT).as_posix()] == compiled.source_digest(path) for path in files)


def test_install_without_a_compiler_still_succeeds(tmp_path):
    """setup.py's build with a C compiler that fails (CC=false): a wheel of pure-Python modules, and warnings."""
    if shutil.which("false") is None:
        pytest.skip("no `false` command to stand in for a broken compiler")
    # A copy of the sources, so that no earlier build's output (build/lib.*) is packed instead; Cython's
    # C files come along (mtimes kept), so only the failing C compiler runs, not the translation again.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    unbuilt = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", compiled.BUILD_RECORD)
    shutil.copytree(ROOT / "otel_tracefence", source / "otel_tracefence", ignore=unbuilt)
    if (ROOT / "build" / "cython").is_dir():
        shutil.copytree(ROOT / "build" / "cython", source / "build" / "cython")
    env = {**_environ(pure=False), "CC": "false", "LDSHARED": "false"}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-v", "-w", str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (wheel,) = tmp_path.glob("otel_tracefence-*.whl")
    assert "running build_ext" in proc.stdout + proc.stderr
    names = zipfile.ZipFile(wheel).namelist()
    assert "otel_tracefence/planner/rules.py" in names
    assert not [name for name in names if name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
    assert "otel_tracefence.planner.rules is not compiled" in proc.stdout + proc.stderr
