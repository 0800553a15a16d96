"""The groups the decision rules look at, built once per trace in linear time (hashing, no pairwise scan)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from otel_tracefence.model import Effect, ToolStep


@dataclass(slots=True)
class Group:
    """Steps sharing something, in trace order, with each step's position."""

    members: list[ToolStep] = field(default_factory=list)

    def add(self, step: ToolStep) -> None:
        self.members.append(step)

    def __len__(self) -> int:
        return len(self.members)

    def window(self, start: int, stop: int | None, cap: int) -> list[ToolStep]:
        """``members[start:stop]``, but no more than ``cap + 2`` of them: enough to name ``cap`` others and see there are more."""
        end = len(self.members) if stop is None else stop
        return self.members[start : min(end, start + cap + 2)]


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

    @classmethod
    def build(cls, ordered: Sequence[ToolStep], max_related: int = 50) -> "TraceGroups":
        groups = cls(max_related=max_related)
        for step in ordered:
            if step.idempotency_key is not None:
                groups.by_key.setdefault((step.tool, step.idempotency_key), Group()).add(step)
            if not step.call_id_from_span and not step.requested_only:
                groups.by_call_id.setdefault(step.call_id, Group()).add(step)
            if step.arguments_sha256 is not None and step.effect is not Effect.UNKNOWN:
                table = groups.writes_by_content if step.effect is Effect.WRITE else groups.reads_by_content
                group = table.setdefault((step.tool, step.arguments_sha256), Group())
                groups.position[id(step)] = len(group)
                group.add(step)
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
        table = self.writes_by_content if step.effect is Effect.WRITE else self.reads_by_content
        return table.get((step.tool, step.arguments_sha256))
