"""Trace-affine sharding for ``tracefence serve --workers N``: which worker process decides a trace, and a
request's spans regrouped per worker.

A trace is decided whole, so every span of a trace must reach the same process. The worker of a trace is
``int.from_bytes(trace_id[8:16], "big") % N``: the last 8 of the 16 trace-id bytes, which W3C Trace Context
(level 2, "random" trace-id flag) asks to be random, and which every OpenTelemetry SDK fills at random. The rule
depends on the id's bytes only, so it is the same in every process, on every run and on every machine (Python's
``hash()`` is salted per process and would not be).
"""

from __future__ import annotations

from typing import Any, Sequence

from otel_tracefence.service.otlp_bytes import LazyRequest, SpanHead
from otel_tracefence.service.otlp_spans import OtlpItem, lazy_request, to_request, traces_by_span_id


_ZERO_TRACE = bytes(16)


def worker_of(trace_id: bytes, workers: int) -> int:
    """The worker (``0 .. workers-1``) that decides the trace ``trace_id`` (16 bytes as OTLP carries them).

    A trace id of another length (refused by every worker for its id) still gets a worker, by the same rule
    on the bytes it has."""
    return int.from_bytes(trace_id[8:16], "big") % workers


def readable_trace(trace_id: bytes) -> bool:
    """Whether a span's trace id can be read (16 bytes, not all zero: OTLP): a span whose trace id cannot is
    refused outright and stands in no trace (``otlp_spans.stand_in``), so no worker needs it."""
    return len(trace_id) == 16 and trace_id != _ZERO_TRACE


def split_request(request: Any, workers: int, trace_ids: Sequence[bytes] | None = None) -> tuple[list[tuple[Any, int] | None], bool]:
    """``request``'s spans with a readable trace id (and those without one whose parent it holds, with their
    parent's trace), regrouped per worker: ``(parts, whole)``.

    ``request``: a :data:`~otel_tracefence.service.otlp_bytes.LazyRequest` (spans as bytes, as the Export path
    decodes it), or a full ``ExportTraceServiceRequest`` or its encoding (read as one). ``parts[w]`` is
    ``(request_w, spans_w)`` for worker ``w`` (a ``LazyRequest``), or ``None`` when no span goes there. Every
    span keeps its resource and scope (with their schema URLs): a part holds one ``ResourceSpans`` /
    ``ScopeSpans`` per original one that has spans for that worker, in the original order. ``whole``: every
    span went to one worker and none was left out, and that part *is* the lazy request itself (not copied).
    Only each span's trace id is read (``SpanHead``), or taken from ``trace_ids`` (every span's, in order, as
    ``otlp_spans.read_request`` read them: the router then parses no head again); the parts are built by protobuf
    (``add``, ``extend``). Raises ``google.protobuf.message.DecodeError`` for a span whose bytes do not decode.
    """
    request = lazy_request(request)
    read_head = SpanHead.FromString
    known = iter(trace_ids) if trace_ids is not None else None
    grouped: list[list[list[list[bytes]]]] = []  # per ResourceSpans, per ScopeSpans, per worker: its spans
    counts = [0] * workers
    total = 0
    orphans: list[tuple[bytes, list[list[bytes]]]] = []  # spans whose trace id cannot be read, and their scope's lists
    for resource_spans in request.resource_spans:
        per_scope = []
        for scope_spans in resource_spans.scope_spans:
            by_worker: list[list[bytes]] = [[] for _ in range(workers)]
            for span in scope_spans.spans:
                total += 1
                trace_id = read_head(span).trace_id if known is None else next(known)
                if readable_trace(trace_id):
                    by_worker[worker_of(trace_id, workers)].append(span)
                else:
                    orphans.append((span, by_worker))
            per_scope.append(by_worker)
        grouped.append(per_scope)
    if orphans:
        _to_parents(request, orphans, workers)
    for per_scope in grouped:
        for by_worker in per_scope:
            for w, spans in enumerate(by_worker):
                counts[w] += len(spans)
    used = [w for w in range(workers) if counts[w]]
    if len(used) == 1 and counts[used[0]] == total:
        parts: list[tuple[Any, int] | None] = [None] * workers
        parts[used[0]] = (request, total)
        return parts, True
    built = [LazyRequest() if counts[w] else None for w in range(workers)]
    for resource_spans, per_scope in zip(request.resource_spans, grouped):
        made_resource: dict[int, Any] = {}
        for scope_spans, by_worker in zip(resource_spans.scope_spans, per_scope):
            for w, spans in enumerate(by_worker):
                if not spans:
                    continue
                part_resource = made_resource.get(w)
                if part_resource is None:
                    part_resource = made_resource[w] = built[w].resource_spans.add(  # type: ignore[union-attr]
                        resource=resource_spans.resource, schema_url=resource_spans.schema_url
                    )
                part_resource.scope_spans.add(scope=scope_spans.scope, schema_url=scope_spans.schema_url).spans.extend(spans)
    return [(part, counts[w]) if part is not None else None for w, part in enumerate(built)], False


def _to_parents(request: Any, orphans: list[tuple[bytes, list[list[bytes]]]], workers: int) -> None:
    """Send each span whose trace id cannot be read to the worker of its parent's trace, when the request
    holds its parent (appended to its scope's list for that worker): that worker refuses it and stands it in
    that trace (``otlp_spans.under_parent``, docs/DECISIONS.md 207). The others are left out here: the router sends
    each to every worker (``RouterIntake.put``, 389)."""
    trace_of = traces_by_span_id(span for resource_spans in request.resource_spans for scope_spans in resource_spans.scope_spans for span in scope_spans.spans)
    for span, by_worker in orphans:
        parent_trace = trace_of.get(SpanHead.FromString(span).parent_span_id)
        if parent_trace is not None:
            by_worker[worker_of(parent_trace, workers)].append(span)


def split_items(items: list[OtlpItem], workers: int) -> list[tuple[Any, int] | None]:
    """Already-read spans (an OTLP/JSON body's, as :class:`~otel_tracefence.service.export.TraceExport` accepted
    them) regrouped per worker, as :func:`split_request` does: one ``LazyRequest`` per worker that gets spans."""
    grouped: list[list[OtlpItem]] = [[] for _ in range(workers)]
    for item in items:
        grouped[worker_of(SpanHead.FromString(item.span).trace_id, workers)].append(item)
    return [to_request(group) if group else None for group in grouped]


__all__ = ["readable_trace", "split_items", "split_request", "worker_of"]
