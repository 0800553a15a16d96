"""A trace decided partial with no root span: its steps that are not reads cannot be judged (docs/DECISIONS.md 301).

A root is a span that names no parent. A trace none of whose spans is one is a fragment of a trace: the part with
its root (a forgotten trace's first spans, an earlier attempt of the same call) was not seen, so a write or a call
of unknown effect in it may repeat, or be repeated by, a call in that part.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from otel_tracefence.core import reasons
from otel_tracefence.core.model import READ, MalformedField, ToolStep
from otel_tracefence.normalize.span_view import SpanView

FIELD = "parent_span_id"


def missing_root(spans: Sequence[SpanView]) -> bool:
    """True when ``spans`` (one trace) hold a span and none is a root: every span names a parent span id. A span that
    could not be read (``unreadable``) is no root: its parent is not known."""
    return bool(spans) and all(span.parent_span_id or span.unreadable is not None for span in spans)


def parent_cycle(spans: Sequence[SpanView]) -> SpanView | None:
    """A span of ``spans`` (one trace) on a cycle of parent span ids (``A`` names ``B`` its parent, ``B`` names
    ``A``; a span naming itself is one too), or ``None`` when the parents form trees. Linear in the spans: each span
    is walked up from once. Such a trace's ancestry cannot be read: it is decided partial (docs/DECISIONS.md 506)."""
    by_id = {span.span_id: span for span in spans}
    done: set = set()
    for span in spans:
        path: set = set()
        node = span
        while node is not None and node.span_id not in done:
            if node.span_id in path:
                return node
            path.add(node.span_id)
            node = by_id.get(node.parent_span_id) if node.parent_span_id else None
        done |= path
    return None


def hold_rootless(steps: Sequence[ToolStep], spans: Sequence[SpanView]) -> list[ToolStep]:
    """``steps`` with every step whose effect is not a read held: a :class:`MalformedField` at ``parent_span_id``
    with the reason ``trace_root_missing``, its message naming the span above the step whose parent is not in the
    trace. Call it only for a trace of ``spans`` decided partial that :func:`missing_root` finds rootless (the
    caller's rule: ``pipeline.plan_spans``). Reads are kept as they are: replaying one repeats nothing; so are steps
    held as malformed already (a stand-in for a span that could not be read): their reason says more."""
    by_id = {span.span_id: span for span in spans}
    fallback = min(spans, key=lambda s: (s.sequence, s.span_id))
    return [step if step.effect is READ or step.malformed else _held(step, by_id, fallback) for step in steps]


def _held(step: ToolStep, by_id: dict[str, SpanView], fallback: SpanView) -> ToolStep:
    top = _top(by_id.get(step.span_id, fallback), by_id)
    where = "closes a parent cycle" if top.parent_span_id in by_id else "is not in the trace"  # a cycle: DECISIONS 506
    why = MalformedField(
        FIELD,
        f"no span of the trace is its root: span {top.span_id} names the parent {top.parent_span_id or '(unknown)'}, which {where}; "
        "the part of the trace not seen may hold an earlier attempt of this call, so it cannot be judged",
        reasons.TRACE_ROOT_MISSING,
    )
    return replace(step, malformed=step.malformed + (why,))


def _top(span: SpanView, by_id: dict[str, SpanView]) -> SpanView:
    """The highest span above ``span`` (itself included) in ``by_id``: the one whose parent is not there (or that
    closes a parent cycle)."""
    seen = {span.span_id}
    while span.parent_span_id in by_id and span.parent_span_id not in seen:
        span = by_id[span.parent_span_id]
        seen.add(span.span_id)
    return span
