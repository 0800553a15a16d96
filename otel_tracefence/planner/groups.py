"""The groups the decision rules look at, built once per trace in linear time (hashing, no pairwise scan)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from otel_tracefence.model import EFFECT_UNKNOWN, WRITE, ToolStep


class Group(list):
    """Steps sharing something, in trace order (a plain list: one object per group, for big traces)."""

    __slots__ = ()

    @property
    def members(self) -> list[ToolStep]:
        return self

    def window(self, start: int, stop: int | None, cap: int) -> list[ToolStep]:
        """``self[start:stop]``, but no more than ``cap + 2`` of them: enough to name ``cap`` others and see there are more."""
        end = len(self) if stop is None else stop
        return self[start : min(end, start + cap + 2)]


def _add(table: dict, key, step: ToolStep) -> Group:
    group = table.get(key)
    if group is None:
        group = table[key] = Group()
    group.append(step)
    return group


@dataclass(slots=True)
class TraceGroups:
    """Per trace: steps by (tool, idempotency key), by call id, and repeated writes and reads by (tool, arguments)."""

    by_key: dict[tuple[str, str], Group] = field(default_factory=dict)
    by_call_id: dict[str, Group] = field(default_factory=dict)
    writes_by_content: dict[tuple[str, str], Group] = field(default_factory=dict)
    reads_by_content: dict[tuple[str, str], Group] = field(default_factory=dict)
    conflicting_keys: set[tuple[str, str]] = field(default_factory=set)
    uncomparable_keys: set[tuple[str, str]] = field(default_factory=set)
    position: dict[int, int] = field(default_factory=dict)  # id(step) -> index within its content group
    max_related: int = 50
    flow: Any = None  # planner.dataflow.DataFlow: links between steps through id-like tokens (None: no link)

    @classmethod
    def build(cls, ordered: Sequence[ToolStep], max_related: int = 50) -> "TraceGroups":
        groups = cls(max_related=max_related)
        # Call ids are counted first (a dict of str to int, which the garbage collector does not
        # track), and grouped only when repeated: most are unique, and a Group per step made
        # planning a million steps mostly cyclic-GC work.
        call_ids: dict[str, int] = {}
        for step in ordered:
            if not step.call_id_from_span and not step.requested_only:
                call_ids[step.call_id] = call_ids.get(step.call_id, 0) + 1
        for step in ordered:
            if step.idempotency_key is not None:
                _add(groups.by_key, (step.tool, step.idempotency_key), step)
            if call_ids.get(step.call_id, 0) > 1 and not step.call_id_from_span and not step.requested_only:
                _add(groups.by_call_id, step.call_id, step)
            if step.arguments_sha256 is not None and step.effect is not EFFECT_UNKNOWN:
                table = groups.writes_by_content if step.effect is WRITE else groups.reads_by_content
                group = _add(table, (step.tool, step.arguments_sha256), step)
                groups.position[id(step)] = len(group) - 1
        for key, group in groups.by_key.items():
            if len(group) < 2:
                continue
            hashes = {s.arguments_sha256 for s in group.members if s.arguments_sha256 is not None}
            if len(hashes) > 1:
                groups.conflicting_keys.add(key)
            elif any(s.arguments_sha256 is None for s in group.members):
                groups.uncomparable_keys.add(key)
        return groups

    def content_group(self, step: ToolStep) -> Group | None:
        if step.arguments_sha256 is None:
            return None
        table = self.writes_by_content if step.effect is WRITE else self.reads_by_content
        return table.get((step.tool, step.arguments_sha256))
