"""The tables ``tracefence review list`` and ``review show`` print: one row per item, an item's fields, its
steps and reasons, and its history (oldest first). Enum values are shown as the words of the span attributes
(``REPLAY_CLASS_REVIEW`` as ``review``; ``-`` for an unspecified value)."""

from __future__ import annotations

from typing import Sequence

from google.protobuf.timestamp_pb2 import Timestamp

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.cli.table import cell, related
from otel_tracefence.core.reason_text import legend_lines
from otel_tracefence.review.events import ReviewEvent
from otel_tracefence.review.verdicts import verdict_from_proto


def _enum(enum_type: object, value: int, prefix: str) -> str:
    name = enum_type.Name(value)  # type: ignore[attr-defined]
    return "-" if name.endswith("_UNSPECIFIED") else name.removeprefix(prefix).lower()


def _time(ts: object, present: bool) -> str:
    return ts.ToJsonString() if present else "-"  # type: ignore[attr-defined]


def _grid(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


LIST_COLUMNS = ("trace", "state", "class", "service", "held", "updated", "resolved_by")


def render_list(items: Sequence[pb.ReviewItem]) -> str:
    """One row per item; ``held`` is the steps decided review or conflict, of all steps."""
    rows = [LIST_COLUMNS]
    for item in items:
        held = sum(1 for d in item.plan.steps if d.decision in (pb.DECISION_REVIEW, pb.DECISION_CONFLICT))
        cls = _enum(pb.ReplayClass, item.plan.replay_class, "REPLAY_CLASS_") + (" (partial)" if item.plan.partial else "")
        rows.append(
            (
                cell(item.trace_id),
                _enum(pb.ReviewState, item.state, "REVIEW_STATE_"),
                cls,
                cell(item.service_name),
                f"{held}/{len(item.plan.steps)}",
                _time(item.updated_time, item.HasField("updated_time")),
                cell(item.resolved_by),
            )
        )
    return _grid(rows)


STEP_COLUMNS = ("call_id", "tool", "effect", "status", "decision", "reasons", "related")


def render_item(item: pb.ReviewItem, history: Sequence[ReviewEvent] | None = None) -> str:
    """The item's fields, one per line, then one row per step of its plan, then (when ``history`` is
    given) one row per event of its history, oldest first."""
    plan = item.plan
    fields = [
        ("trace", cell(item.trace_id)),
        ("state", _enum(pb.ReviewState, item.state, "REVIEW_STATE_")),
        ("class", _enum(pb.ReplayClass, plan.replay_class, "REPLAY_CLASS_") + (" (partial)" if plan.partial else "")),
        ("service", cell(item.service_name)),
        ("created", _time(item.created_time, item.HasField("created_time"))),
        ("updated", _time(item.updated_time, item.HasField("updated_time"))),
        ("resolved_by", cell(item.resolved_by)),
        ("resolved", _time(item.resolved_time, item.HasField("resolved_time"))),
        ("note", cell(item.resolution_note)),
    ]
    if item.verdict:
        fields.append(("verdict", f"{verdict_from_proto(item.verdict)} by {cell(item.verdict_by)}: {cell(item.verdict_evidence)}"))
    if item.duplicate_effect_found:
        fields.append(("duplicate", "duplicate_effect_found: a verdict found the effect twice"))
    for link in item.later_traces:  # the later traces whose decisions name this one's calls (retries across traces)
        fields.append(("later trace", f"{cell(link.trace_id)} {cell(link.call_id)} ({cell(link.reason)})"))
    width = max(len(name) for name, _ in fields)
    head = "\n".join(f"{name.ljust(width)}  {value}" for name, value in fields)
    rows = [STEP_COLUMNS]
    for d in plan.steps:
        s = d.step
        rows.append(
            (
                cell(s.call_id),
                cell(s.tool),
                _enum(pb.Effect, s.effect, "EFFECT_"),
                _enum(pb.ToolStatus, s.status, "TOOL_STATUS_"),
                _enum(pb.Decision, d.decision, "DECISION_"),
                cell(",".join(d.reasons)),
                cell(related(d)),
            )
        )
    text = head + "\n\n" + _grid(rows)
    key = legend_lines(code for d in plan.steps for code in d.reasons)
    if key:
        text += "\n\nreasons\n" + "\n".join(cell(line) for line in key)
    if history is not None:
        text += "\n\n" + render_history(history)
    return text


HISTORY_COLUMNS = ("time", "event", "actor", "state", "class", "verdict", "note")


def render_history(events: Sequence[ReviewEvent]) -> str:
    """``history`` and one row per event, oldest first (``history: none`` for none)."""
    if not events:
        return "history: none"
    rows = [HISTORY_COLUMNS]
    for e in events:
        ts = Timestamp()
        ts.FromNanoseconds(e.time_ns)
        rows.append(
            (
                ts.ToJsonString(),
                e.kind,
                cell(e.actor),
                _enum(pb.ReviewState, e.state, "REVIEW_STATE_"),
                _enum(pb.ReplayClass, e.replay_class, "REPLAY_CLASS_"),
                cell(e.verdict),
                cell("; ".join(t for t in (e.note, e.evidence) if t)),
            )
        )
    return "history\n" + _grid(rows)
