"""The groups the decision rules look at, built once per trace in linear time (hashing, no pairwise scan)."""

from __future__ import annotations

from typing import Any, Sequence

import cython

from otel_tracefence.core.reprs import fields_repr

from otel_tracefence.core import reasons
from otel_tracefence.core.model import EFFECT_UNKNOWN, WRITE, ToolStep

# Why a step's arguments have no canonical hash although they were recorded: two such writes of one tool cannot be
# told apart, so they may be one call made twice (docs/DECISIONS.md 501). Arguments not recorded at all are not here:
# a producer that records none would hold every tool used twice.
UNCOMPARED_ARGUMENTS = frozenset({reasons.ARGUMENTS_TOO_LARGE, reasons.ARGUMENTS_TOO_DEEP, reasons.ARGUMENTS_NOT_I_JSON, reasons.ARGUMENTS_HIDDEN})


class Group(list):
    """Steps sharing something, in trace order (a plain list: one object per group, for big traces)."""

    __slots__ = ()

    def window(self, start: int, stop: int | None, cap: int) -> list[ToolStep]:
        """``self[start:stop]``, but no more than ``cap + 2`` of them: enough to name ``cap`` others and see there are more."""
        end = len(self) if stop is None else stop
        return self[start : min(end, start + cap + 2)]


_NO_KEY = object()
"""The key of a step that is in no group of a table."""


@cython.cfunc
@cython.locals(first=dict, groups=dict, i=cython.Py_ssize_t)
def _repeated(keys: list, steps: Sequence[ToolStep]) -> dict:
    """``{key: Group}`` of the keys given for more than one step (``keys[i]`` is ``steps[i]``'s key,
    :data:`_NO_KEY` for none), each group in the order of ``steps``. One dict operation per key: a key is
    noted with the index of its first step, and a group is made at its second (most keys are unique, and a
    group per step made planning a million steps mostly allocation and cyclic-GC work)."""
    first = {}
    groups = {}
    for i in range(len(keys)):
        key = keys[i]
        if key is _NO_KEY:
            continue
        earlier = first.setdefault(key, i)
        if earlier != i:
            group = groups.get(key)
            if group is None:
                groups[key] = Group((steps[earlier], steps[i]))
            else:
                group.append(steps[i])
    return groups


@cython.cfunc
def _count_result(results: dict, step: ToolStep) -> cython.void:
    """Count ``step`` (a tool step, not requested-only) in ``results[step.producer]`` (``[with a recorded result,
    readable without one]``; a malformed step without one is in neither)."""
    counts = results.get(step.producer)
    if counts is None:
        counts = results[step.producer] = [0, 0]
    if step.result_recorded:
        counts[0] += 1
    elif not step.malformed:
        counts[1] += 1


@cython.cfunc
def _classify_keys(by_key: dict, conflicting: set, uncomparable: set) -> cython.void:
    """Add to ``conflicting`` each (tool, idempotency key) of ``by_key`` whose steps were called with different
    arguments (two or more hashes), and to ``uncomparable`` each other one with a step whose arguments have no hash."""
    for key, group in by_key.items():
        hashes = {s.arguments_sha256 for s in group if s.arguments_sha256 is not None}
        if len(hashes) > 1:
            conflicting.add(key)
        elif any(s.arguments_sha256 is None for s in group):
            uncomparable.add(key)


@cython.dataclasses.dataclass(repr=False)
@cython.cclass
class TraceGroups:
    """Per trace, only what more than one step shares: steps by (tool, idempotency key), by call id, and
    repeated calls by (tool, canonical arguments).

    ``repeats`` maps ``id(step)`` to ``(group, position)``: the steps with the step's tool and canonical
    arguments in trace order (writes with writes, reads with reads) and the step's index in it, for every
    step whose group holds another. A step of unknown effect with arguments is in no group, but is mapped
    to the reads with its tool and arguments, at position 0, when there are several (as the rules have
    always seen it). A step not in ``repeats`` repeats nothing and is repeated by nothing.

    An extension type in the compiled engine (built in C, not by the ``__init__`` ``dataclasses`` writes):
    docs/DECISIONS.md, 172.
    """

    # Every field given (no default_factory: Cython's __init__ imports ``dataclasses`` for each on every call).
    by_key: dict  # (tool, idempotency key) -> Group, 2 or more steps
    by_call_id: dict  # call id -> Group, 2 or more steps
    repeats: dict  # id(step) -> (Group, position)
    conflicting_keys: set
    uncomparable_keys: set
    max_related: int = 50
    flow: Any = None  # planner.dataflow.DataFlow: links between steps through id-like tokens (None: no link)
    # producer -> [tool steps with a recorded result, readable tool steps without one] (requested-only and malformed
    # steps aside): whether a producer records results in this trace (write_outcome_unrecorded, docs/DECISIONS.md 401)
    results_by_producer: Any = None
    # id(step) -> the Group of its tool's writes (2 or more) whose arguments were recorded but could not be compared
    # (UNCOMPARED_ARGUMENTS), for each such write; None when no tool has two (docs/DECISIONS.md 501)
    uncompared_writes: Any = None

    @classmethod
    def build(cls, ordered: Sequence[ToolStep], max_related: int = 50) -> "TraceGroups":
        """The groups of a trace's steps, given in trace order."""
        key_of = []
        call_id_of = []
        content_of = []
        unknown = []  # steps of unknown effect with arguments
        uncompared = []  # writes whose recorded arguments have no hash (UNCOMPARED_ARGUMENTS)
        results: dict = {}
        for step in ordered:
            if not step.requested_only:
                _count_result(results, step)
            key_of.append((step.tool, step.idempotency_key) if step.idempotency_key is not None else _NO_KEY)
            call_id_of.append(step.call_id if not step.call_id_from_span and not step.requested_only else _NO_KEY)
            if step.arguments_sha256 is None:
                content_of.append(_NO_KEY)
                if step.effect is WRITE and step.arguments_unavailable in UNCOMPARED_ARGUMENTS:
                    uncompared.append(step)
            elif step.effect is EFFECT_UNKNOWN:
                content_of.append(_NO_KEY)
                unknown.append(step)
            else:
                content_of.append((step.effect is WRITE, step.tool, step.arguments_sha256))
        groups = cls(_repeated(key_of, ordered), _repeated(call_id_of, ordered), {}, set(), set(), max_related)
        groups.results_by_producer = results
        if len(uncompared) > 1:  # most traces: none, no table built
            by_tool = _repeated([step.tool for step in uncompared], uncompared)
            if by_tool:
                groups.uncompared_writes = {id(step): group for group in by_tool.values() for step in group}
        repeats = groups.repeats
        by_content = _repeated(content_of, ordered)
        for group in by_content.values():
            for position, step in enumerate(group):
                repeats[id(step)] = (group, position)
        for step in unknown:
            group = by_content.get((False, step.tool, step.arguments_sha256))
            if group is not None:
                repeats[id(step)] = (group, 0)
        _classify_keys(groups.by_key, groups.conflicting_keys, groups.uncomparable_keys)
        return groups

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)
