"""Compile the engine (the normalizer, the planner and their per-span helpers) with Cython at install time.

Everything else about the project is in pyproject.toml. The modules that
``otel_tracefence/compiled.py`` names in ``ENGINE_SOURCES`` are compiled from their own ``.py`` files
(Cython 3, pure-Python mode: one source, no ``.pyx``). Compiling is optional: when Cython is missing
(``--no-build-isolation`` without it), there is no C compiler, or a module fails to compile, the
install goes on, warns, and those modules run as pure Python. ``TRACEFENCE_PURE_PYTHON_BUILD=1``
skips compiling altogether. The extension modules' sources are recorded with their SHA-256 in
``otel_tracefence/_compiled_sources.json``, so that an extension module built from an older source is
never loaded (see ``otel_tracefence/compiled.py``).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
_compiled = runpy.run_path(str(ROOT / "otel_tracefence" / "compiled.py"))  # stdlib only; not the package

# Cython's directives for the engine. annotation_typing=False: type hints stay hints, so that a module
# behaves exactly as its pure-Python self (Cython 3 would otherwise turn `x: float` into a C double
# and reject a non-dict passed where `dict` is annotated); C types come only from `cython.*` declarations.
DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,
    "binding": True,
    "embedsignature": False,
}

# Appended to the interpreter's own flags (later ones win): no debug info, -O2.
UNIX_FLAGS = ["-O2", "-g0"]


def _warn(message: str) -> None:
    print(f"otel-tracefence: {message}", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """``build_ext`` that cythonizes the engine, compiles in parallel, and never fails the install."""

    def finalize_options(self) -> None:
        # Cythonize before setuptools finalizes: it prepares each Extension object it will build.
        self.extensions = self.distribution.ext_modules = _cythonized(self.distribution.ext_modules or [])
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        self.built: list[Extension] = []
        super().run()
        self._write_record()

    def build_extension(self, ext: Extension) -> None:
        if self.compiler.compiler_type == "unix":  # gcc, clang: half the compile time of -g -O3, same speed (DECISIONS 115)
            ext.extra_compile_args = [*ext.extra_compile_args, *UNIX_FLAGS]
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - no compiler, missing headers: that module stays pure Python
            _warn(f"{ext.name} is not compiled ({exc}); it runs as pure Python")
            return
        self.built.append(ext)

    def copy_extensions_to_source(self) -> None:
        self.extensions = [ext for ext in self.extensions if ext in self.built]  # only what compiled
        super().copy_extensions_to_source()

    def _write_record(self) -> None:
        """``{"otel_tracefence/x.py": sha256}`` of each compiled module's source, beside the extension modules."""
        record = {}
        for ext in self.built:
            source = (ROOT / (ext.name.replace(".", "/") + ".py")).relative_to(ROOT).as_posix()
            if source in _TRANSLATED:  # the source as Cython read it, not as it is now: an edit meanwhile is not trusted
                record[source] = _TRANSLATED[source]
        text = json.dumps(record, indent=1, sort_keys=True) + "\n"
        targets = {Path(self.build_lib) / "otel_tracefence"}
        if self.inplace or getattr(self, "editable_mode", False):
            targets.add(ROOT / "otel_tracefence")
        for target in targets:
            target.mkdir(parents=True, exist_ok=True)
            (target / _compiled["BUILD_RECORD"]).write_text(text)


_TRANSLATED: dict[str, str] = {}  # each engine source (relative path) -> its SHA-256 when handed to Cython


def _cythonized(extensions: list[Extension]) -> list[Extension]:
    """The engine's extensions with their ``.py`` sources translated to C, or none (warned) when that fails."""
    if _compiled["env_flag"]("TRACEFENCE_PURE_PYTHON_BUILD"):
        _warn("TRACEFENCE_PURE_PYTHON_BUILD is set: the engine is not compiled (pure Python)")
        return []
    try:
        from Cython.Build import cythonize

        for ext in extensions:  # before Cython reads them (see OptionalBuildExt._write_record)
            source = ext.sources[0]
            _TRANSLATED[Path(source).as_posix()] = _compiled["source_digest"](ROOT / source)
        return cythonize(
            extensions,
            compiler_directives=DIRECTIVES,
            nthreads=os.cpu_count() or 1,
            build_dir=str(ROOT / "build" / "cython"),
            quiet=True,
        )
    except Exception as exc:  # noqa: BLE001 - Cython missing, or a module it cannot translate
        _warn(f"the engine is not compiled ({exc!r}); it runs as pure Python")
        return []


def engine_extensions() -> list[Extension]:
    return [
        Extension(_compiled["module_name"](path, ROOT, package_init=True), [str(path.relative_to(ROOT))])
        for path in _compiled["engine_files"](ROOT)
    ]


setup(ext_modules=engine_extensions(), cmdclass={"build_ext": OptionalBuildExt})
