"""The item page's trace: the spans a review item kept (``tracefence.v1.ReviewSpans``) drawn as a span tree with a
timeline, a waterfall of bars on a time axis, as SVG built here on the server (no script, nothing from elsewhere).

Rows are the spans in tree order (a parent before its children, siblings by start time; a span whose parent was not
kept is a root). Tool steps are coloured by their decision and say it in words beside the bar; the spans of steps that
are held (review, conflict) are marked (◆, a thicker outline, and their reason codes as text). Times are relative to the trace's first
kept span; each bar's ``<title>`` (shown on hover) gives its exact start and end (RFC 3339, nanoseconds) and its
duration. At most ``MAX_ROWS`` rows are drawn: the tool spans and their ancestors first, the count of the others
said under the drawing (a trace of 10,000 spans renders in milliseconds, bench/review_page.py).
"""

from __future__ import annotations

import datetime
import urllib.parse
from dataclasses import dataclass
from typing import Any, Sequence

from markupsafe import Markup, escape

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb

__all__ = ["MAX_ROWS", "StepTime", "Waterfall", "duration_text", "step_times", "trace_links", "waterfall"]

MAX_ROWS = 400
"""Most span rows drawn; past it the rest are counted (tool spans and their ancestors are drawn first)."""
ROW_PX, LABEL_PX, BAR_PX, AXIS_PX = 20, 340, 560, 28
TEXT_PX = 6.2  # about the width of a character of the 11 px labels
COLOURS = {"replay": "#1a6b1a", "skip": "#8a5a00", "review": "#c05000", "conflict": "#a40000"}
OTHER = "#8a94a6"
ERROR_SPAN = "#6b3b9a"


@dataclass(frozen=True)
class Waterfall:
    """What the template shows: ``svg`` (safe markup, ``""`` when no span was kept), the rows drawn, the spans kept
    but not drawn, and those the writer left out (past ``review_spans_max``); ``total_ns`` the trace's drawn span."""

    svg: Markup
    drawn: int
    not_drawn: int
    left_out: int
    total_ns: int


def duration_text(ns: int) -> str:
    """``ns`` nanoseconds in words a reviewer reads: ``0.25 ms``, ``12 ms``, ``1.25 s``, ``2 min 5 s``."""
    if ns <= 0:
        return "-" + duration_text(-ns) if ns else "0"
    if ns < 10_000_000:
        return f"{ns / 1e6:.2f} ms"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.0f} ms"
    if ns < 120_000_000_000:
        return f"{ns / 1e9:.2f} s"
    return f"{ns // 60_000_000_000} min {ns % 60_000_000_000 // 1_000_000_000} s"


def exact(ns: int) -> str:
    """Unix nanoseconds as RFC 3339 UTC with all nine digits: ``2026-12-07T17:14:18.123456789Z``."""
    seconds, rest = divmod(ns, 1_000_000_000)
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{rest:09d}Z"


def _tree_order(ids: Sequence[str], parents: Sequence[str]) -> list[tuple[int, int]]:
    """``(index, depth)`` of each span in tree order (spans given in start order, by id and parent id); iterative, on
    indexes (a chain of 10,000 spans is no recursion limit, and protobuf fields are read once)."""
    index = {span_id: i for i, span_id in enumerate(ids)}
    children: dict[int, list[int]] = {}
    roots = []
    for i, parent in enumerate(parents):
        j = index.get(parent) if parent else None
        if j is None or j == i:
            roots.append(i)
        else:
            children.setdefault(j, []).append(i)
    out: list[tuple[int, int]] = []
    seen = bytearray(len(ids))
    stack = [(i, 0) for i in reversed(roots)]
    while stack:
        i, depth = stack.pop()
        if seen[i]:
            continue
        seen[i] = 1
        out.append((i, depth))
        kids = children.get(i)
        if kids:
            stack.extend((k, depth + 1) for k in reversed(kids))
    out.extend((i, 0) for i in range(len(ids)) if not seen[i])  # a cycle of parents: drawn flat, never lost
    return out


def _rows_drawn(ordered: list[tuple[int, int]], parents: Sequence[str], ids: Sequence[str], steps: Sequence[bool]) -> list[tuple[int, int]]:
    """At most ``MAX_ROWS`` rows, in tree order: tool spans and their ancestors first, then the earliest others."""
    if len(ordered) <= MAX_ROWS:
        return ordered
    index = {span_id: i for i, span_id in enumerate(ids)}
    keep: set[int] = set()
    for i, _ in ordered:
        if steps[i] and len(keep) < MAX_ROWS:
            at: int | None = i
            while at is not None and at not in keep and len(keep) < MAX_ROWS:
                keep.add(at)
                at = index.get(parents[at])
    for i, _ in ordered:
        if len(keep) >= MAX_ROWS:
            break
        keep.add(i)
    return [(i, d) for i, d in ordered if i in keep]


def _ticks(total_ns: int) -> list[int]:
    """Axis ticks (ns from the start): a 1-2-5 step giving at most 8 intervals."""
    if total_ns <= 0:
        return [0]
    step = 1
    while total_ns / step > 8:
        for factor in (2, 5, 10):
            if total_ns / (step * factor) <= 8 or factor == 10:
                step *= factor
                break
    return list(range(0, total_ns + 1, step))


def waterfall(kept: pb.ReviewSpans | None, plan: pb.TracePlan) -> Waterfall:
    """The waterfall of ``kept`` (``None``: an item stored before spans were kept: nothing drawn) with ``plan``'s
    decisions and reasons on the spans of its steps."""
    if kept is None or not kept.spans:
        return Waterfall(Markup(""), 0, 0, kept.spans_left_out if kept is not None else 0, 0)
    decisions = {d.step.call_id: d for d in plan.steps}
    spans = kept.spans
    ids = [s.span_id for s in spans]
    parents = [s.parent_span_id for s in spans]
    ordered = _tree_order(ids, parents)
    rows = _rows_drawn(ordered, parents, ids, [bool(s.call_id) for s in spans] if len(spans) > MAX_ROWS else [])
    t0 = min(s.start_time_unix_nano for s in spans)
    t1 = max(max(s.end_time_unix_nano, s.start_time_unix_nano) for s in spans)
    total = max(t1 - t0, 1)
    scale = BAR_PX / total
    height = AXIS_PX + ROW_PX * len(rows) + 4
    width = LABEL_PX + BAR_PX + 40  # room for the last tick's label
    parts = [
        f'<svg class="waterfall" id="waterfall" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-labelledby="waterfall-title"><title id="waterfall-title">The trace\'s spans on a time axis, {len(rows)} drawn</title>'
    ]
    for tick in _ticks(total):
        x = LABEL_PX + tick * scale
        parts.append(f'<line class="tick" x1="{x:.1f}" y1="{AXIS_PX - 6}" x2="{x:.1f}" y2="{height}" stroke="#e3e6ea"/>')
        parts.append(f'<text class="tick-label" x="{x:.1f}" y="{AXIS_PX - 10}" font-size="11" text-anchor="middle">{duration_text(tick)}</text>')
    for row, (i, depth) in enumerate(rows):
        span = spans[i]
        parts.append(_row(span, depth, AXIS_PX + row * ROW_PX, t0, scale, decisions.get(span.call_id) if span.call_id else None))
    parts.append("</svg>")
    return Waterfall(Markup("".join(parts)), len(rows), len(ordered) - len(rows), kept.spans_left_out, total)


HELD = ("review", "conflict")  # the decisions whose reasons the page explains under "Why, and what to check"


def _hover(span: Any, start: int, length: int | None, word: str, decision: Any) -> str:
    """A row's ``<title>``: the span, its exact times and its step's decision and reasons."""
    when = f"start {exact(span.start_time_unix_nano)} (+{duration_text(start)})" + (
        f", end {exact(span.end_time_unix_nano)}, took {duration_text(length)}" if length is not None else ", never ended"
    )
    hover = f"{span.name} [{span.kind or 'span'}, status {span.status or 'unset'}] span {span.span_id}: {when}"
    if decision is not None:
        hover += f"; call {span.call_id}: {word}" + (f" ({', '.join(decision.reasons)})" if decision.reasons else "")
    return hover


def _label_place(x: float, bar: float, text_px: float) -> tuple[float, str]:
    """Where a bar's label goes: after the bar when it fits, else inside its end (white), else before it."""
    if x + bar + 4 + text_px <= LABEL_PX + BAR_PX + 40:
        return x + bar + 4, ""
    if bar >= text_px + 8 or x - 4 - text_px < LABEL_PX:
        return x + bar - 4, ' text-anchor="end" fill="#fff"'
    return x - 4, ' text-anchor="end"'


def _row(span: Any, depth: int, y: int, t0: int, scale: float, decision: Any) -> str:
    start = span.start_time_unix_nano - t0
    ended = span.end_time_unix_nano >= span.start_time_unix_nano and span.end_time_unix_nano != 0
    length = span.end_time_unix_nano - span.start_time_unix_nano if ended else None
    x = LABEL_PX + start * scale
    bar = max((length or 0) * scale, 2.0)
    word = pb.Decision.Name(decision.decision).removeprefix("DECISION_").lower() if decision is not None else ""
    colour = COLOURS.get(word, OTHER) if word else (ERROR_SPAN if span.status == "error" else OTHER)
    marked = word in HELD
    label = span.name + (f" · {word}" if word else " · error" if span.status == "error" else "")
    classes = "span" + (f" step decision-{word}" if word else "") + (" marked" if marked else "")
    step = f' data-call-id="{escape(span.call_id)}" data-decision="{word}"' if word else ""
    out = [f'<g class="{classes}" id="span-{escape(span.span_id)}" data-span-id="{escape(span.span_id)}"{step}><title>{escape(_hover(span, start, length, word, decision))}</title>']
    if marked:
        out.append(f'<rect class="mark" x="0" y="{y}" width="{LABEL_PX + BAR_PX + 10}" height="{ROW_PX}" fill="#fff4e0"/>')
    room = 44 - min(depth, 20)
    text = label if len(label) <= room else label[: room - 2] + "…"
    weight, outline = (' font-weight="bold"', ' stroke="#000" stroke-width="2"') if marked else ("", "")
    out.append(f'<text x="{6 + min(depth, 20) * 10}" y="{y + 14}" font-size="12"{weight}>{"◆ " if marked else ""}{escape(text)}</text>')
    out.append(f'<rect class="bar" x="{x:.1f}" y="{y + 4}" width="{bar:.1f}" height="{ROW_PX - 8}" fill="{colour}"{outline}/>')
    after = (duration_text(length) if length is not None else "not ended") + (" · " + ", ".join(decision.reasons) if marked else "")
    label_x, anchor = _label_place(x, bar, len(after) * TEXT_PX)
    out.append(f'<text class="bar-label" x="{label_x:.1f}" y="{y + 14}" font-size="11"{anchor}>{escape(after)}</text></g>')
    return "".join(out)


@dataclass(frozen=True)
class StepTime:
    """A step's times as the page shows them: from the trace's start, how long, and the exact instants (hover)."""

    call_id: str
    span_id: str
    at: str
    took: str
    exact: str


def step_times(kept: pb.ReviewSpans | None) -> list[StepTime]:
    """Each kept step's start (relative to the first kept span, else to the first step) and duration."""
    if kept is None or not kept.steps:
        return []
    starts = [s.start_time_unix_nano for s in kept.spans] or [s.start_time_unix_nano for s in kept.steps]
    t0 = min(starts)
    out = []
    for s in kept.steps:
        ended = s.end_time_unix_nano >= s.start_time_unix_nano and s.end_time_unix_nano != 0
        took = duration_text(s.end_time_unix_nano - s.start_time_unix_nano) if ended else "not ended"
        hover = f"start {exact(s.start_time_unix_nano)}" + (f", end {exact(s.end_time_unix_nano)}" if ended else ", never ended")
        out.append(StepTime(s.call_id, s.span_id, "+" + duration_text(s.start_time_unix_nano - t0), took, hover))
    return out


def trace_links(links: Sequence[tuple[str, str]], trace_id: str) -> list[tuple[str, str]]:
    """``(label, address)`` for each ``(label, template)``: ``{trace_id}`` replaced by the trace id, URL-quoted."""
    quoted = urllib.parse.quote(trace_id, safe="")
    return [(label, template.replace("{trace_id}", quoted)) for label, template in links if template]
