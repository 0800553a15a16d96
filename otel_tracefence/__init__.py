"""otel-tracefence: tells, for every agent trace, whether it is safe to replay or retry.

Importing the package registers the finder of its own directories that picks the engine
(:mod:`otel_tracefence.compiled`): the Cython-compiled normalizer and planner when they were built, the
same modules as pure Python when ``TRACEFENCE_PURE_PYTHON=1`` or when no compiler was present at install.
:func:`engine` says which. No import of the host process other than the package's own goes through it.

``otel_tracefence.__version__`` is the installed distribution's version, read from its metadata when first
asked for (pyproject.toml is the one place it is written).
"""

from otel_tracefence.compiled import engine, install_finder, installed_version

install_finder()

__all__ = ["__version__", "engine"]


def __getattr__(name: str) -> str:
    if name == "__version__":  # read when asked (importlib.metadata is slow to import), then kept
        globals()["__version__"] = version = installed_version()
        return version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
