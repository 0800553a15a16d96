"""What the item page says beside the plan table: each reason in words (the one table of
:mod:`otel_tracefence.core.reason_text`), and a conflict's two calls side by side."""

from __future__ import annotations

from typing import Any, NamedTuple

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.reason_text import Explanation, legend


class FieldRow(NamedTuple):
    field: str
    left: str
    right: str
    differs: bool


class CallPair(NamedTuple):
    left: str  # call ids
    right: str
    reasons: tuple[str, ...]
    rows: tuple[FieldRow, ...]


def reason_key(plan: pb.TracePlan) -> list[tuple[str, Explanation, tuple[str, ...]]]:
    """Each distinct reason of the plan's steps, in step order, with its explanation and the calls it is on."""
    on: dict[str, list[str]] = {}
    for d in plan.steps:
        for code in d.reasons:
            on.setdefault(code, []).append(d.step.call_id)
    return [(code, e, tuple(on[code])) for code, e in legend(on)]


def _arguments(s: Any) -> str:
    """What may be shown of a call's arguments: the stored canonical JSON, else the SHA-256, else why there is none."""
    if s.arguments_json:
        return s.arguments_json
    if s.arguments_sha256:
        return f"sha256 {s.arguments_sha256}"
    return f"unavailable: {s.arguments_unavailable or 'not recorded'}"


def _fields(s: Any) -> list[tuple[str, str]]:
    return [
        ("call id", s.call_id),
        ("tool", s.tool or "-"),
        ("idempotency key", s.idempotency_key if s.HasField("idempotency_key") else "-"),
        ("status", pb.ToolStatus.Name(s.status).removeprefix("TOOL_STATUS_").lower()),
        ("attempts", str(s.attempts)),
        ("span id", s.span_id or "-"),
        ("arguments", _arguments(s)),
    ]


def conflict_pairs(plan: pb.TracePlan) -> list[CallPair]:
    """Each conflict step beside each related call of this trace, once per pair, the differing fields marked."""
    by_call = {d.step.call_id: d for d in plan.steps}
    pairs: list[CallPair] = []
    seen: set[frozenset[str]] = set()
    for d in plan.steps:
        if d.decision != pb.DECISION_CONFLICT:
            continue
        for other_id in d.related_call_ids:
            other = by_call.get(other_id)
            key = frozenset((d.step.call_id, other_id))
            if other is None or key in seen or other_id == d.step.call_id:
                continue
            seen.add(key)
            rows = tuple(
                FieldRow(name, a, b, name != "call id" and a != b) for (name, a), (_, b) in zip(_fields(d.step), _fields(other.step))
            )
            pairs.append(CallPair(d.step.call_id, other_id, tuple(dict.fromkeys([*d.reasons, *other.reasons])), rows))
    return pairs
