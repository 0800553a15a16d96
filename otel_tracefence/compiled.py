"""Which engine runs: the normalizer and planner compiled by Cython, or the same modules as pure Python.

``setup.py`` compiles the modules :data:`ENGINE_SOURCES` names with Cython 3 in pure-Python mode when
Cython and a C compiler are present; the ``.py`` files stay beside the extension modules and are the
fallback. There is one source: the extension modules are those ``.py`` files, compiled.

Python imports an extension module before a ``.py`` file of the same name. :class:`SourceFirstFileFinder`,
registered when the package is imported as the finder of the package's own directories (in
``sys.path_importer_cache``, nothing in ``sys.meta_path`` or ``sys.path_hooks``: no other import of the
process goes through it), changes that in two cases:

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
import importlib.machinery
import json
import logging
import os
import sys
from pathlib import Path
from typing import Iterable

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
    "otel_tracefence/service/span_annotation.py",
    "otel_tracefence/service/wire_span.py",
)

#: The environment variable that forces the pure-Python engine (read at package import).
PURE_PYTHON_ENV = "TRACEFENCE_PURE_PYTHON"

#: Written by ``setup.py`` beside the extension modules: ``{"otel_tracefence/x.py": "<sha256 hex>"}``.
BUILD_RECORD = "_compiled_sources.json"

_PACKAGE = "otel_tracefence"
#: The distribution's name (pyproject.toml): where :func:`installed_version` reads the version.
DISTRIBUTION = "otel-tracefence"
_ROOT = Path(__file__).resolve().parent.parent
_log = logging.getLogger("otel_tracefence")
_SOURCE_LOADERS = (
    (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
    (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
)
#: Python's own order for a directory's modules (``importlib._bootstrap_external._get_supported_file_loaders``).
_ALL_LOADERS = ((importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES), *_SOURCE_LOADERS)


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


class SourceFirstFileFinder(importlib.machinery.FileFinder):
    """The standard finder of one directory of the package (extension modules, then ``.py``, then ``.pyc``,
    as Python's own), except that a module of the package whose extension module must not be used loads from
    its ``.py`` file: every one (``pure``), or one whose extension module was not built from the source on disk
    (by :data:`BUILD_RECORD`). Registered in ``sys.path_importer_cache`` for the package's own directories
    only (:func:`install_finder`): no other import of the process goes through it."""

    def __init__(self, path: str, policy: "_Policy") -> None:
        super().__init__(path, *_ALL_LOADERS)
        self.policy = policy

    def find_spec(self, fullname: str, target=None):  # noqa: ANN001 - the FileFinder protocol
        spec = super().find_spec(fullname, target)
        if spec is None or not fullname.startswith(_PACKAGE + "."):
            return spec
        if isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            source = importlib.machinery.FileFinder(self.path, *_SOURCE_LOADERS).find_spec(fullname, target)
            # Any module of the package, not only those ENGINE_SOURCES names now: one dropped from the
            # list may have left an old extension module beside its source.
            if source is not None and source.origin is not None and (self.policy.pure or self.policy.stale(fullname, Path(source.origin))):
                spec = source
        for location in spec.submodule_search_locations or ():  # a subpackage: its directory is the package's too
            _register(location, self.policy)
        return spec


class _Policy:
    """Which extension modules of the package are not loaded: all (``pure``), or those built from another source."""

    def __init__(self, pure: bool) -> None:
        self.pure = pure
        self._stale_warned: set[str] = set()
        self._record: dict[str, str] | None = None

    def stale(self, fullname: str, source: Path) -> bool:
        """True when the extension module beside ``source`` was not built from it (warned once per module)."""
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


def _register(location: str, policy: _Policy) -> None:
    """Make :class:`SourceFirstFileFinder` the finder of the package directory ``location`` (the exact string of a
    ``__path__``, as ``PathFinder`` looks it up), unless it already is."""
    if not isinstance(sys.path_importer_cache.get(location), SourceFirstFileFinder):
        sys.path_importer_cache[location] = SourceFirstFileFinder(location, policy)


def _has_extension_modules(directories: Iterable[str]) -> bool:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return any(name.endswith(suffixes) for directory in directories for _, _, names in os.walk(directory) for name in names)


def install_finder(package_path: Iterable[str] | None = None, environ: os._Environ | dict = os.environ) -> SourceFirstFileFinder | None:
    """Register :class:`SourceFirstFileFinder` for the package's directories (``package_path``: the package's
    ``__path__``; its subpackages' directories are registered as they are found) and return the top one's; or,
    when the engine is not forced to pure Python and the package holds no extension module (an install without
    a compiler), register nothing and return None. Never touches ``sys.meta_path`` nor ``sys.path_hooks``."""
    paths = list(sys.modules[_PACKAGE].__path__ if package_path is None else package_path)
    if not paths:
        return None
    existing = sys.path_importer_cache.get(paths[0])
    if isinstance(existing, SourceFirstFileFinder):  # once
        return existing
    pure = env_flag(PURE_PYTHON_ENV, environ)
    if not (pure or _has_extension_modules(paths)):
        return None
    policy = _Policy(pure)
    for location in paths:
        _register(location, policy)
    return sys.path_importer_cache[paths[0]]


def installed_version() -> str:
    """The installed distribution's version (``otel-tracefence``, its metadata), or ``unknown`` when it is not installed."""
    import importlib.metadata

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def engine() -> str:
    """Which engine this process runs: ``"compiled"`` when every engine module is a Cython extension
    module, ``"python"`` when none is, ``"partial"`` otherwise (a module that failed to compile, or was
    built from another source). Imports the engine modules (pure, no I/O) to find out."""
    loaded = [importlib.import_module(module_name(path)) for path in engine_files()]
    compiled = [isinstance(module.__spec__.loader, importlib.machinery.ExtensionFileLoader) for module in loaded]
    if compiled and all(compiled):
        return "compiled"
    return "partial" if any(compiled) else "python"
