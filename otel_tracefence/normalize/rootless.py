"""A trace decided partial with no root span: its steps that are not reads cannot be judged (docs/DECISIONS.md 301).

A root is a span that names no parent. A trace none of whose spans is one is a fragment of a trace: the part with
its root (a forgotten trace's first spans, an earlier attempt of the same call) was not seen, so a write or a call
of unknown effect in it may repeat, or be repeated by, a call in that part.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.model import READ, MalformedField, ToolStep
from otel_tracefence.normalize.span_view import SpanView

FIELD = "parent_span_id"


def missing_root(spans: Sequence[SpanView]) -> bool:
    """True when ``spans`` (one trace) hold a span and none is a root: every span names a parent span id. A span that
    could not be read (``unreadable``) is no root: its parent is not known."""
    return bool(spans) and all(span.parent_span_id or span.unreadable is not None for span in spans)


def absent_parent(spans: Sequence[SpanView]) -> SpanView | None:
    """The first span of ``spans`` (one trace) that names a parent span id no span of them has, the parent not marked
    remote (a span context propagated from another process: the processor's local root, a caller's span), or
    ``None``. Such a parent was never seen: still open when the trace was decided (a framework that never ends a
    suspended run's spans), lost, or late, so the trace is decided partial at every door, as a file showing such a
    span is (docs/DECISIONS.md 205, 980). Linear in the spans."""
    ids = {span.span_id for span in spans}
    for span in spans:
        parent = span.parent_span_id
        if parent and parent not in ids and not span.parent_is_remote:
            return span
    return None


def parent_cycle(spans: Sequence[SpanView]) -> SpanView | None:
    """A span of ``spans`` (one trace) on a cycle of parent span ids (``A`` names ``B`` its parent, ``B`` names
    ``A``; a span naming itself is one too), or ``None`` when the parents form trees. Several spans under one span
    id each add their parent, so the answer never depends on the order of ``spans``; of the spans on the cycle, the
    one with the least span id (then sequence) is returned. Linear in the spans (an iterative depth-first walk).
    Such a trace's ancestry cannot be read: it is decided partial (docs/DECISIONS.md 506)."""
    if _trees(spans):  # the common trace, proved in one cheap pass
        return None
    parents: dict = {}
    for span in spans:
        ids = parents.setdefault(span.span_id, set())
        if span.parent_span_id:
            ids.add(span.parent_span_id)
    state: dict = {}  # span id -> 1 on the walk's path, 2 done
    for start in sorted(parents):
        if start in state:
            continue
        state[start] = 1
        path = [start]
        todo = [iter(sorted(parents[start]))]
        while todo:
            parent = next(todo[-1], None)
            if parent is None:
                state[path.pop()] = 2
                todo.pop()
            elif parent not in parents or state.get(parent) == 2:
                continue
            elif state.get(parent) == 1:
                cycle = set(path[path.index(parent):])
                return min((s for s in spans if s.span_id in cycle), key=lambda s: (s.span_id, s.sequence))
            else:
                state[parent] = 1
                path.append(parent)
                todo.append(iter(sorted(parents[parent])))
    return None


@cython.ccall
def _trees(spans: Sequence[SpanView]) -> bool:
    """True when the parents of ``spans`` provably form trees: every span id has one parent at most, and the walk up
    from each span leaves the trace without meeting its own path (each span id walked once). False says nothing:
    :func:`parent_cycle`'s walk decides (several parents under one id, or a cycle)."""
    parent_of: dict = {}
    for span in spans:
        parent = span.parent_span_id or None
        if parent_of.setdefault(span.span_id, parent) != parent:
            return False
    done: set = set()
    for start in parent_of:
        path: set = set()
        node = start
        while node in parent_of and node not in done:
            if node in path:
                return False
            path.add(node)
            node = parent_of[node]
        done |= path
    return True


def hold_rootless(steps: Sequence[ToolStep], spans: Sequence[SpanView]) -> list[ToolStep]:
    """``steps`` with every step whose effect is not a read held: a :class:`MalformedField` at ``parent_span_id``
    with the reason ``trace_root_missing``, its message naming the span above the step whose parent is not in the
    trace. Call it only for a trace of ``spans`` decided partial that :func:`missing_root` finds rootless (the
    caller's rule: ``pipeline.plan_spans``). Reads are kept as they are: replaying one repeats nothing; so are steps
    held as malformed already (a stand-in for a span that could not be read): their reason says more."""
    by_id: dict[str, SpanView] = {}
    for span in sorted(spans, key=_content_order, reverse=True):  # of several spans under one id, the least wins
        by_id[span.span_id] = span
    fallback = min(spans, key=_content_order)
    return [step if step.effect is READ or step.malformed else _held(step, by_id, fallback) for step in steps]


def _content_order(span: SpanView) -> tuple:
    """An order of spans by what they hold, never by where they came in the input: the message a held step carries
    must not depend on the order a trace's spans arrived in (several spans may share one span id)."""
    return (span.span_id, span.parent_span_id or "", span.start_time_unix_nano, span.name)


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
