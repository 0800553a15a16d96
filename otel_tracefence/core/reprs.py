"""``repr`` for the engine's dataclasses, the same text in both engines and in every thread.

Cython 3's generated ``__repr__`` for a ``cython.dataclasses.dataclass`` guards against recursion with a
``threading.local`` whose ``running`` set exists only in the thread that imported the module: in any
other thread (the service's intake, a thread pool) ``repr`` raises ``AttributeError``. The engine's
dataclasses are therefore declared with ``repr=False`` and call :func:`fields_repr`, which writes what
:mod:`dataclasses` writes (``Name(field=value, ...)``, fields in order) and works in any thread.
"""

from __future__ import annotations

from typing import Any


def fields_repr(obj: Any) -> str:
    """``TypeName(field=repr(value), ...)`` over ``obj.__dataclass_fields__`` in order (standard library and
    Cython dataclasses both have it). The engine's dataclasses hold no cycles, so no recursion guard."""
    parts = [f"{name}={getattr(obj, name)!r}" for name in obj.__dataclass_fields__]
    return f"{type(obj).__qualname__}({', '.join(parts)})"
