"""What a review item keeps of its trace for the item page (issue 26): the spans, bounded, and each step's times and
argument fields, as a ``tracefence.v1.ReviewSpans``.

* **Spans**: at most ``config.review_spans_max`` (name, ids, kind, start and end, status, the step each records);
  the tool spans first (in trace order), then their ancestors, then the others by start time; the rest counted in
  ``spans_left_out``. A bound of 0 keeps none (all counted).
* **Steps**: every step a span of the trace records, with its span's start and end, whatever the span bound.
* **Argument fields**: for a step whose arguments are a JSON object, each top-level field's name and the SHA-256 of
  the field value's RFC 8785 canonical JSON, taken from the original value (as ``arguments_sha256`` is: redaction never
  makes two calls compare equal); the value itself only under ``store_raw_values``, redacted by ``config.redaction``
  as ``arguments_json`` is. The arguments are read again from the step's span (:func:`span_arguments`) and used only
  when their SHA-256 is the step's ``arguments_sha256``; else ``fields_unavailable`` is set (a requested call, a
  malformed or unavailable value, a convention read elsewhere): never a guess.

A field hash of a value with few possible values (a boolean, a small number) can be matched by trying them, as the
whole-argument hash can (DECISIONS 882).
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from typing import Any, Iterable, Sequence

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.canonical import canonicalize
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import TracePlan
from otel_tracefence.core.redact import redact_value
from otel_tracefence.normalize.values import span_arguments

__all__ = ["KEPT_TRACES_MAX", "SpanKeeper", "review_spans"]


def review_spans(plan: TracePlan, views: Iterable[Any], config: TraceFenceConfig) -> pb.ReviewSpans:
    """The ``ReviewSpans`` of ``plan``'s trace from its span views (``SpanView``: ids hex, times Unix ns). Bounded by
    ``config.review_spans_max`` spans; steps and fields as the module says. Never raises for a view it cannot
    read: such a span is left out and counted."""
    by_id: dict[str, Any] = {}
    for view in views:
        if view.unreadable is None and view.span_id and view.span_id not in by_id:
            by_id[view.span_id] = view
    call_of = {d.step.span_id: d.step.call_id for d in plan.steps if d.step.span_id and not d.step.requested_only}
    out = pb.ReviewSpans(trace_id=plan.trace_id)
    chosen = _chosen(by_id, call_of, config.review_spans_max)
    for view in sorted(chosen, key=lambda v: (v.start_time_unix_nano, v.sequence)):
        out.spans.append(
            pb.ReviewSpan(
                span_id=view.span_id, parent_span_id=view.parent_span_id or "", name=view.name[:200], kind=view.kind,
                start_time_unix_nano=view.start_time_unix_nano, end_time_unix_nano=view.end_time_unix_nano or 0,
                status=view.status_code, call_id=call_of.get(view.span_id, ""),
            )  # fmt: skip
        )
    out.spans_left_out = len(by_id) - len(chosen)
    for d in plan.steps:
        view = by_id.get(d.step.span_id) if d.step.span_id and not d.step.requested_only else None
        if view is not None:
            out.steps.append(_step_times(d.step, view, config))
    return out


def _chosen(by_id: dict[str, Any], call_of: dict[str, str], bound: int) -> list[Any]:
    """At most ``bound`` views: tool spans, then their ancestors, then the earliest others."""
    if len(by_id) <= bound:
        return list(by_id.values())
    chosen: dict[str, Any] = {}
    tools = sorted((by_id[s] for s in call_of if s in by_id), key=lambda v: (v.start_time_unix_nano, v.sequence))
    for view in tools[:bound]:
        chosen[view.span_id] = view
    for view in tools:
        parent = view.parent_span_id
        while parent and parent in by_id and parent not in chosen and len(chosen) < bound:
            chosen[parent] = by_id[parent]
            parent = by_id[parent].parent_span_id
    room = bound - len(chosen)
    if room > 0:
        rest = (v for v in by_id.values() if v.span_id not in chosen)
        for view in heapq.nsmallest(room, rest, key=lambda v: (v.start_time_unix_nano, v.sequence)):
            chosen[view.span_id] = view
    return list(chosen.values())


def _step_times(step: Any, view: Any, config: TraceFenceConfig) -> pb.ReviewStepTimes:
    times = pb.ReviewStepTimes(
        call_id=step.call_id, span_id=step.span_id, start_time_unix_nano=view.start_time_unix_nano, end_time_unix_nano=view.end_time_unix_nano or 0
    )  # fmt: skip
    fields = _argument_fields(step, view, config)
    if fields is None:
        times.fields_unavailable = True
    else:
        times.fields.extend(fields)
    return times


def _argument_fields(step: Any, view: Any, config: TraceFenceConfig) -> Sequence[pb.ArgumentField] | None:
    """The step's argument fields, or ``None`` when they cannot be read again as the step's own arguments."""
    if not step.arguments_sha256:
        return None
    limits = config.limits
    try:
        arguments = span_arguments(view.attributes, limits, view.events)
    except Exception:  # noqa: BLE001 - the page shows less; the plan is unchanged
        return None
    if arguments.sha256 != step.arguments_sha256 or not isinstance(arguments.value, dict):
        return None
    shown: Any = None
    if config.store_raw_values:
        shown, _ = redact_value(arguments.value, config.redaction)
    fields = []
    for name in sorted(arguments.value):
        canonical = canonicalize(arguments.value[name], max_bytes=limits.max_argument_bytes, max_depth=limits.max_argument_depth)
        field = pb.ArgumentField(name=str(name)[:200], sha256=canonical.sha256 or "")
        if isinstance(shown, dict) and name in shown:
            kept = canonicalize(shown[name], max_bytes=limits.max_argument_bytes, max_depth=limits.max_argument_depth)
            if kept.text is not None:
                field.value_json = kept.text
        fields.append(field)
    return fields


KEPT_TRACES_MAX = 256
"""Most traces whose ``ReviewSpans`` wait for their item's write (held after a failed write, say): at most about
12 MiB at the default ``review_spans_max``; past it the oldest is dropped and its item shows no waterfall (DECISIONS 881)."""


class SpanKeeper:
    """The ``ReviewSpans`` of traces whose review item is still to be written, by trace id, at most
    ``KEPT_TRACES_MAX`` (oldest dropped). Thread-safe. Taken by the writer in the transaction of the item."""

    def __init__(self, config: TraceFenceConfig) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, pb.ReviewSpans] = OrderedDict()

    def keep(self, plan: TracePlan, views: Iterable[Any]) -> None:
        """Build and keep ``plan``'s ``ReviewSpans`` (:func:`review_spans`), replacing an older one."""
        spans = review_spans(plan, views, self._config)
        with self._lock:
            self._kept.pop(plan.trace_id, None)
            self._kept[plan.trace_id] = spans
            while len(self._kept) > KEPT_TRACES_MAX:
                self._kept.popitem(last=False)

    def of(self, trace_ids: Iterable[str]) -> dict[str, pb.ReviewSpans]:
        """The kept ``ReviewSpans`` of those of ``trace_ids`` that have one (left kept until :meth:`written`)."""
        with self._lock:
            return {t: self._kept[t] for t in trace_ids if t in self._kept}

    def written(self, spans: dict[str, pb.ReviewSpans]) -> None:
        """Forget what was written (unless a newer one replaced it meanwhile)."""
        with self._lock:
            for trace_id, message in spans.items():
                if self._kept.get(trace_id) is message:
                    del self._kept[trace_id]
