"""The readable table of ``tracefence plan --format table``."""

from __future__ import annotations

import unicodedata
from typing import Any, Sequence

from otel_tracefence.core.model import TracePlan
from otel_tracefence.core.reason_text import legend_lines


def cell(value: object) -> str:
    """Text safe for a terminal: control and format characters (from traces or notes) are escaped; empty is ``-``."""
    text = str(value)
    if not text:
        return "-"
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)

def related(decision: Any) -> str:
    """A decision's related calls as one cell: its trace's related call ids, then the calls of earlier traces as
    ``<trace id>/<call id>`` (the write index, docs/DECISIONS.md 593); ``decision`` is a plan's
    ``StepDecision`` or the proto's (both spell the fields alike)."""
    return ",".join([*decision.related_call_ids, *(f"{r.trace_id}/{r.call_id}" for r in decision.related_traces)])


COLUMNS = ("trace", "class", "call_id", "tool", "effect", "status", "decision", "reasons", "related")


def render(plans: Sequence[TracePlan]) -> str:
    """One row per step (a trace with no tool step gets one row), columns padded to fit, then (after a blank
    line and ``reasons``) each reason code of the rows in words, with what to check (core/reason_text.py)."""
    rows = [COLUMNS]
    for plan in plans:
        cls = plan.replay_class.value if plan.replay_class else "-"
        trace = plan.trace_id or "-"
        if plan.partial:
            cls += " (partial)"
        if not plan.steps:
            rows.append((trace, cls, "-", "-", "-", "-", "-", "no tool step", "-"))
        for d in plan.steps:
            s = d.step
            rows.append(
                (trace, cls, s.call_id, s.tool or "-", s.effect.value, s.status.value, d.decision.value, ",".join(d.reasons) or "-", related(d) or "-")
            )
    rows = [tuple(cell(value) for value in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    text = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
    key = legend_lines(code for plan in plans for d in plan.steps for code in d.reasons)
    return text + "\n\nreasons\n" + "\n".join(cell(line) for line in key) if key else text
