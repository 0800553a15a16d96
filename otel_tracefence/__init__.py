"""otel-tracefence: tells, for every agent trace, whether it is safe to replay or retry.

Importing the package installs the import hook that picks the engine (:mod:`otel_tracefence.compiled`):
the Cython-compiled normalizer and planner when they were built, the same modules as pure Python when
``TRACEFENCE_PURE_PYTHON=1`` or when no compiler was present at install. :func:`engine` says which.
"""

from otel_tracefence.compiled import engine, install_finder

install_finder()

__all__ = ["engine"]
