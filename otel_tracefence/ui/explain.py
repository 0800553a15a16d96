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


def _field_shown(field: Any) -> str:
    """An argument field as the page may show it: its kept value, else its SHA-256 (the value was not kept)."""
    return field.value_json if field.HasField("value_json") else f"sha256 {field.sha256}"


def _argument_rows(left: Any, right: Any) -> tuple[FieldRow, ...]:
    """The two calls' arguments field by field (``ReviewStepTimes``; ``None``: not kept), compared by the SHA-256
    of each field's original value, so two calls compare even when their values were not kept; a field one call
    lacks differs. ``()`` when either call's fields are not known."""
    if left is None or right is None or left.fields_unavailable or right.fields_unavailable:
        return ()
    a = {f.name: f for f in left.fields}
    b = {f.name: f for f in right.fields}
    rows = []
    for name in sorted(a.keys() | b.keys()):
        fa, fb = a.get(name), b.get(name)
        rows.append(
            FieldRow(
                f"arguments.{name}", _field_shown(fa) if fa else "(absent)", _field_shown(fb) if fb else "(absent)",
                fa is None or fb is None or fa.sha256 != fb.sha256,
            )  # fmt: skip
        )
    return tuple(rows)


def conflict_pairs(plan: pb.TracePlan, kept: pb.ReviewSpans | None = None) -> list[CallPair]:
    """Each conflict step beside each related call of this trace, once per pair, the differing fields marked; with
    the spans the item kept (``kept``), its arguments field by field too (:func:`_argument_rows`)."""
    fields = {s.call_id: s for s in kept.steps} if kept is not None else {}
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
            rows += _argument_rows(fields.get(d.step.call_id), fields.get(other_id))
            pairs.append(CallPair(d.step.call_id, other_id, tuple(dict.fromkeys([*d.reasons, *other.reasons])), rows))
    return pairs
