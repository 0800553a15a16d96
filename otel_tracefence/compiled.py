"""Which engine runs: the normalizer and planner compiled by Cython, or the same modules as pure Python.

``setup.py`` compiles the modules :data:`ENGINE_SOURCES` names with Cython 3 in pure-Python mode when
Cython and a C compiler are present; the ``.py`` files stay beside the extension modules and are the
fallback. There is one source: the extension modules are those ``.py`` files, compiled.

Python imports an extension module before a ``.py`` file of the same name. :class:`SourceOnlyFinder`,
installed at the front of ``sys.meta_path`` when the package is imported, changes that in two cases:

* ``TRACEFENCE_PURE_PYTHON`` is set to ``1`` / ``true`` / ``yes`` / ``on`` (read once, when
  ``otel_tracefence`` is first imported): every module of the package loads from its ``.py`` file;
* an extension module (of any module of the package) was built from a source that has changed since
  (an edited checkout with an editable install), or is not in the build record: that module loads
  from its ``.py`` file and a warning says to rebuild. Which
  source each extension module was built from is recorded by ``setup.py`` in :data:`BUILD_RECORD`
  (SHA-256 of each ``.py`` file); an extension module with no record is not trusted either.

This module is imported before anything else of the package and uses the standard library only
(``setup.py`` reads :data:`ENGINE_SOURCES` from it without importing the package).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import logging
import os
import sys
from pathlib import Path

#: The engine's modules, as globs relative to the directory that holds the package: the normalizer,
#: the planner and the helpers they call per span (measured: bench/README.md, "Compiled engine"), and
#: the service's view builders (bench/README.md, "Fifth round (issue 10): the service's views").
ENGINE_SOURCES = (
    "otel_tracefence/normalize/*.py",
    "otel_tracefence/planner/*.py",
    "otel_tracefence/core/canonical.py",
    "otel_tracefence/core/model.py",
    "otel_tracefence/pipeline/plan.py",
    "otel_tracefence/service/otlp_spans.py",
    "otel_tracefence/service/wire_span.py",
)

#: The environment variable that forces the pure-Python engine (read at package import).
PURE_PYTHON_ENV = "TRACEFENCE_PURE_PYTHON"

#: Written by ``setup.py`` beside the extension modules: ``{"otel_tracefence/x.py": "<sha256 hex>"}``.
BUILD_RECORD = "_compiled_sources.json"

_PACKAGE = "otel_tracefence"
_ROOT = Path(__file__).resolve().parent.parent
_log = logging.getLogger("otel_tracefence")
_SOURCE_LOADERS = (
    (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
    (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
)


def engine_files(root: Path = _ROOT) -> list[Path]:
    """The engine's ``.py`` files under ``root`` (the directory holding the package), sorted."""
    return sorted({path for pattern in ENGINE_SOURCES for path in root.glob(pattern)})


def module_name(path: Path, root: Path = _ROOT, package_init: bool = False) -> str:
    """``otel_tracefence/planner/rules.py`` -> ``otel_tracefence.planner.rules``; a package's ``__init__.py``
    -> the package's name (``otel_tracefence.planner``), or with ``package_init`` the name its extension
    module is built under (``otel_tracefence.planner.__init__``)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and not package_init else parts)


def source_digest(path: Path) -> str:
    """SHA-256 (hex) of a source file's bytes: what :data:`BUILD_RECORD` holds for it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def env_flag(name: str, environ: os._Environ | dict = os.environ) -> bool:
    """True when the environment variable ``name`` is ``1``, ``true``, ``yes`` or ``on`` (any case)."""
    return environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


class SourceOnlyFinder(importlib.abc.MetaPathFinder):
    """Loads modules of the package from their ``.py`` files: all of them (``pure=True``), or those whose
    extension module was not built from the source on disk (by :data:`BUILD_RECORD`)."""

    def __init__(self, pure: bool) -> None:
        self.pure = pure
        self._stale_warned: set[str] = set()
        self._record: dict[str, str] | None = None

    def find_spec(self, fullname: str, path, target=None):  # noqa: ANN001 - the MetaPathFinder protocol
        if not path or not fullname.startswith(_PACKAGE + "."):
            return None
        spec = self._source_spec(fullname, path)
        if self.pure or spec is None:
            return spec
        # Any module of the package, not only those ENGINE_SOURCES names now: one dropped from the
        # list may have left an old extension module beside its source.
        return spec if self._compiled_and_stale(fullname, Path(spec.origin)) else None

    @staticmethod
    def _source_spec(fullname: str, path) -> importlib.machinery.ModuleSpec | None:  # noqa: ANN001
        for entry in path:
            spec = importlib.machinery.FileFinder(entry, *_SOURCE_LOADERS).find_spec(fullname)
            if spec is not None and spec.origin is not None:
                return spec
        return None

    def _compiled_and_stale(self, fullname: str, source: Path) -> bool:
        """True when an extension module sits beside ``source`` and was not built from it (warned once)."""
        stem = source.with_suffix("")
        if not any(stem.with_name(stem.name + suffix).exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES):
            return False
        try:
            key = source.resolve().relative_to(_ROOT).as_posix()
        except ValueError:
            key = None
        if self._record is None:
            try:
                self._record = json.loads((_ROOT / _PACKAGE / BUILD_RECORD).read_text())
            except (OSError, ValueError):
                self._record = {}
        if key is not None and self._record.get(key) == source_digest(source):
            return False
        if fullname not in self._stale_warned:
            self._stale_warned.add(fullname)
            _log.warning(
                "%s: the compiled module was built from another version of %s; using the .py file "
                "(reinstall to recompile: make setup, or pip install -e .)", fullname, source.name,
            )
        return True


def install_finder(environ: os._Environ | dict = os.environ) -> SourceOnlyFinder:
    """Put a :class:`SourceOnlyFinder` at the front of ``sys.meta_path`` (once) and return it."""
    for finder in sys.meta_path:
        if isinstance(finder, SourceOnlyFinder):
            return finder
    finder = SourceOnlyFinder(pure=env_flag(PURE_PYTHON_ENV, environ))
    sys.meta_path.insert(0, finder)
    return finder


def engine() -> str:
    """Which engine this process runs: ``"compiled"`` when every engine module is a Cython extension
    module, ``"python"`` when none is, ``"partial"`` otherwise (a module that failed to compile, or was
    built from another source). Imports the engine modules (pure, no I/O) to find out."""
    loaded = [importlib.import_module(module_name(path)) for path in engine_files()]
    compiled = [isinstance(module.__spec__.loader, importlib.machinery.ExtensionFileLoader) for module in loaded]
    if compiled and all(compiled):
        return "compiled"
    return "partial" if any(compiled) else "python"
