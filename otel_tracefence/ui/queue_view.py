"""The queue page's rows and search: the tools, reasons, held steps and age of each item, and the search box
(``q``: a trace id prefix, a tool, an idempotency key or a reason, any letter case)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable, NamedTuple

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.reasons import NOTES

HELD = (pb.DECISION_REVIEW, pb.DECISION_CONFLICT)
SEARCH_SCAN_LIMIT = 5000  # items a search reads at most (the store has no text index); the page says when it stopped


class Row(NamedTuple):
    item: pb.ReviewItem
    tools: tuple[str, ...]
    reasons: tuple[str, ...]  # the codes that hold the held steps (not the notes)
    held: int
    age: str


class Found(NamedTuple):
    items: list[pb.ReviewItem]
    scanned: int
    stopped: bool  # the scan limit was reached before the queue's end


def age_text(seconds: float) -> str:
    """``42 s``, ``5 min``, ``3 h``, ``2 d``: how long an item has waited, in its largest whole unit."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{max(0, int(seconds))} s"


def row(item: pb.ReviewItem, now_ns: int | None = None) -> Row:
    now_ns = time.time_ns() if now_ns is None else now_ns
    held = [d for d in item.plan.steps if d.decision in HELD]
    tools = tuple(dict.fromkeys(d.step.tool for d in item.plan.steps if d.step.tool))
    reasons = tuple(dict.fromkeys(code for d in held for code in d.reasons if code not in NOTES))
    age = age_text((now_ns - item.created_time.ToNanoseconds()) / 1e9) if item.HasField("created_time") else "-"
    return Row(item, tools, reasons, len(held), age)


def matches(item: pb.ReviewItem, q: str) -> bool:
    """``q`` (any letter case) is a prefix of the trace id, or a tool, idempotency key or reason of a step
    (a part of it for tools and reasons: ``invoice`` finds ``invoice.create``)."""
    q = q.strip().lower()
    if not q or item.trace_id.lower().startswith(q):
        return True
    for d in item.plan.steps:
        s = d.step
        if q in s.tool.lower() or (s.HasField("idempotency_key") and s.idempotency_key.lower() == q):
            return True
        if any(q in code for code in d.reasons):
            return True
    return False


def search(list_page: Callable[..., tuple[list[pb.ReviewItem], str]], q: str, want: int, limit: int = SEARCH_SCAN_LIMIT, **filters: Any) -> Found:
    """The first ``want`` items (in the store's order) that :func:`matches` ``q``, reading the store page by page
    with ``filters`` (``store.list``'s), at most ``limit`` items."""
    found: list[pb.ReviewItem] = []
    scanned, token = 0, ""
    while True:
        page, token = list_page(page_size=min(200, limit - scanned), page_token=token, **filters)
        scanned += len(page)
        found.extend(i for i in page if matches(i, q))
        if len(found) >= want or not token:
            return Found(found[:want], scanned, False)
        if scanned >= limit:
            return Found(found[:want], scanned, True)


def counts(rows: list[Row]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The shown rows counted per replay class and per reason of a held step, most first."""
    classes = Counter(pb.ReplayClass.Name(r.item.plan.replay_class).removeprefix("REPLAY_CLASS_").lower() for r in rows)
    reasons = Counter(code for r in rows for code in r.reasons)
    return classes.most_common(), reasons.most_common()
