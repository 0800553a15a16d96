"""A trace's spans as a tree: the enclosing tool span, every span above some, spans given twice or under one id.

Each walk is bounded by the number of spans, so a malformed parent cycle (corrupt ids) cannot loop forever."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

import cython

from otel_tracefence.normalize.span_kinds import is_agent_boundary
from otel_tracefence.normalize.span_view import SpanView


@cython.ccall
def nearest_tool_ancestor(span: SpanView, by_id: dict[str, SpanView], tool_ids: set[str]) -> str | None:
    """The closest enclosing tool span, stopping at an agent or model span (a sub-agent's steps are its own)."""
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):  # bounded: a malformed parent cycle cannot loop forever
        parent = by_id.get(parent_id) if parent_id else None
        if parent is None:
            return None
        if parent.span_id in tool_ids:
            return parent.span_id
        if is_agent_boundary(parent.attributes):
            return None
        parent_id = parent.parent_span_id
    return None


@cython.ccall
def ancestors_of(span_ids: Iterable[str], by_id: dict[str, SpanView]) -> set[str]:
    """Every span above any of ``span_ids`` (linear: a walk stops where an earlier one passed)."""
    above: set[str] = set()
    for span_id in span_ids:
        parent_id = by_id[span_id].parent_span_id if span_id in by_id else None
        while parent_id and parent_id in by_id and parent_id not in above:
            above.add(parent_id)
            parent_id = by_id[parent_id].parent_span_id
    return above


@cython.ccall
def below_any(span: SpanView, by_id: dict[str, SpanView], span_ids: set[str]) -> bool:
    """True when one of ``span_ids`` is an ancestor of ``span``."""
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):  # bounded: a parent cycle cannot loop forever
        if not parent_id or parent_id not in by_id:
            return False
        if parent_id in span_ids:
            return True
        parent_id = by_id[parent_id].parent_span_id
    return False


def distinct_spans(spans: Sequence[SpanView]) -> tuple[Sequence[SpanView], dict[str, int]]:
    """The spans with each span id once, and the ids that name several different spans (how many spans
    carry the id, copies included).

    A span delivered twice (an OTLP client retrying an export that did arrive) is one span: the
    copy first in the source is kept. Two different spans under one id (corrupt or colliding ids)
    are both kept, whatever the order they came in: neither may hide the other's tool call.
    The count is of every span carrying the id, not of the different ones: whether two spans
    that differ only in attributes no convention reads are "different" depends on whether the
    view read those attributes (the service's light views do not), and the message must not.
    """
    by_id: dict[str, list[SpanView]] = {}
    for span in spans:
        by_id.setdefault(span.span_id, []).append(span)
    kept: list[SpanView] = []
    clashing: dict[str, int] = {}
    for span_id, group in by_id.items():
        if len(group) > 1:
            carrying = len(group)
            group.sort(key=lambda s: (s.sequence, s.start_time_unix_nano, repr(s)))  # by content: any input order
            group = [s for i, s in enumerate(group) if not any(same_span(s, earlier) for earlier in group[:i])]
            if len(group) > 1:
                clashing[span_id] = carrying
        kept.extend(group)
    return kept, clashing


def same_span(a: SpanView, b: SpanView) -> bool:
    """True for two views of one span (a redelivery): equal in everything but their place in the input."""
    return replace(a, sequence=0) == replace(b, sequence=0)
