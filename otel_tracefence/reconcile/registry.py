"""Which reconciler answers for which tool: the config's ``reconcilers`` map and the entry-point group
``tracefence.reconcilers``, loaded into callables.

A reference is ``"module:function"`` (``module`` a dotted import path, ``function`` a dotted attribute path in it),
as Python packaging writes entry-point object references. The config names tools exactly (no globs: a check that
answers for the wrong tool would resolve items on another system's word); its entry wins over an entry point of the
same name. Two installed entry points naming one tool are refused: which one answers would depend on install order.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from otel_tracefence.reconcile import ReconcileRequest, ReconcileResult

ENTRY_POINT_GROUP = "tracefence.reconcilers"

Check = Callable[[ReconcileRequest], ReconcileResult]


class ReconcilerLoadError(ValueError):
    """A reconciler reference that cannot be loaded: not ``module:function``, a module that does not import, an
    attribute it does not have, something that is not callable, or a tool two entry points claim. The message names
    the tool, the reference and what went wrong, for every reference that failed (one per line)."""


@dataclass(frozen=True)
class Reconciler:
    """A loaded reconciler: the ``tool`` it answers for, its ``name`` (the reference, ``module:function``: the actor
    of the verdicts it gives), where it was registered (``config`` or ``entry point``) and the ``check`` itself."""

    tool: str
    name: str
    source: str
    check: Check


def load_reference(reference: str) -> Check:
    """The callable ``reference`` (``"module:function"``) names. Raises :class:`ReconcilerLoadError` saying why not."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name.strip() or not attribute.strip():
        raise ReconcilerLoadError(f"{reference!r} is not a 'module:function' reference")
    try:
        target: object = importlib.import_module(module_name.strip())
    except Exception as exc:  # noqa: BLE001 - any import failure is the operator's to read, named
        raise ReconcilerLoadError(f"{reference!r}: module {module_name.strip()!r} does not import ({type(exc).__name__}: {exc})") from None
    for part in attribute.strip().split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ReconcilerLoadError(f"{reference!r}: {module_name.strip()!r} has no attribute {attribute.strip()!r}") from None
    if not callable(target):
        raise ReconcilerLoadError(f"{reference!r} is a {type(target).__name__}, not a function")
    return target


def _entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def load_reconcilers(
    configured: Mapping[str, str], *, entry_points: Callable[[], Iterable[importlib.metadata.EntryPoint]] | None = _entry_points
) -> dict[str, Reconciler]:
    """Tool name -> :class:`Reconciler`: the installed entry points of ``tracefence.reconcilers`` (``entry_points``;
    ``None``: none), then ``configured`` (the config's ``reconcilers``) over them. Raises
    :class:`ReconcilerLoadError` naming every reference that cannot be loaded: a reconciler that does not load is a
    mistake to fix before any item is checked, not a check that quietly never runs."""
    references: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    claimed: dict[str, list[str]] = {}
    for point in entry_points() if entry_points is not None else ():
        claimed.setdefault(point.name, []).append(point.value)
    for tool, values in claimed.items():
        if len(set(values)) > 1 and tool not in configured:
            problems.append(f"tool {tool!r}: entry points of {ENTRY_POINT_GROUP} disagree ({', '.join(sorted(set(values)))}); name one in the config's reconcilers")
        else:
            references[tool] = (values[0], "entry point")
    for tool, reference in configured.items():
        references[tool] = (reference, "config")
    loaded: dict[str, Reconciler] = {}
    for tool, (reference, source) in sorted(references.items()):
        try:
            loaded[tool] = Reconciler(tool, reference, source, load_reference(reference))
        except ReconcilerLoadError as exc:
            problems.append(f"tool {tool!r} ({source}): {exc}")
    if problems:
        raise ReconcilerLoadError("reconcilers that cannot be loaded:\n  " + "\n  ".join(problems))
    return loaded
