"""What the span processor and the zero-code exporter share: hold, decide, annotate, hand on, review.

:class:`SdkFence` wraps a :class:`~otel_tracefence.buffer.TraceBuffer` of SDK
``ReadableSpan`` objects. It hands annotated copies to an ``emit`` callback (the
downstream processors, or the wrapped exporter), writes review-class traces to
the review sink, and runs a timer thread only when a decision wait is set.
Nothing here raises into the agent: a failure is logged, counted, and the spans
are handed on unannotated.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Protocol, Sequence

from opentelemetry.sdk.trace import ReadableSpan

from otel_tracefence import annotate
from otel_tracefence.buffer import Decided, Late, TraceBuffer
from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.model import TracePlan
from otel_tracefence.normalize import from_readable
from otel_tracefence.telemetry import Telemetry, guarded

_log = logging.getLogger("otel_tracefence")


class ReviewSink(Protocol):
    """Where traces whose class needs review go (the SQLite store by default)."""

    def upsert(self, plan: TracePlan, *, service_name: str = "") -> Any: ...

    def close(self) -> None: ...


def open_review_sink(config: TraceFenceConfig) -> ReviewSink | None:
    """The configured review sink: the SQLite store at ``config.review_db``, or ``None`` when it is empty."""
    if not config.review_db:
        return None
    from otel_tracefence.review.store import SQLiteReviewStore

    return SQLiteReviewStore(config.review_db, store_raw_values=config.store_raw_values)


def copy_with(span: ReadableSpan, extra: dict[str, Any], attributes: dict[str, Any] | None = None) -> ReadableSpan:
    """A copy of a finished SDK span with ``extra`` attributes on top of its own
    (``attributes``: the span's own, when the caller already holds them as a dict)."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=annotate.merged(span.attributes if attributes is None else attributes, extra),
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _service_name(span: ReadableSpan) -> str:
    resource = span.resource
    return str(resource.attributes.get("service.name", "")) if resource is not None else ""


def is_local_root(span: ReadableSpan) -> bool:
    """A span without a parent, or whose parent is remote: the root of this process's part of the trace."""
    return span.parent is None or bool(span.parent.is_remote)


class SdkFence:
    """The shared engine; ``emit`` receives lists of (possibly annotated) spans to hand on."""

    def __init__(
        self,
        config: TraceFenceConfig,
        emit: Callable[[Sequence[ReadableSpan]], None],
        *,
        component: str,
        review_sink: ReviewSink | None,
        meter_provider: Any = None,
    ) -> None:
        self.config = config
        self._emit = emit
        self._review_sink = review_sink
        self._review_classes = frozenset(config.review_classes)
        self._buffer: TraceBuffer[ReadableSpan] = TraceBuffer(config)
        self.telemetry = Telemetry(component, meter_provider)
        self.telemetry.observe_held(lambda: len(self._buffer))
        self._wake = threading.Condition()
        self._stopped = False
        self._timer: threading.Thread | None = None
        if config.decision_wait_ms > 0:
            self._timer = threading.Thread(target=self._run_timer, name="tracefence-decision-wait", daemon=True)
            self._timer.start()

    # -- intake ---------------------------------------------------------------
    def add(self, span: ReadableSpan) -> None:
        """Take one finished span. Never raises; on failure the span is handed on unannotated."""
        try:
            view = from_readable(span)
            ready = self._buffer.add(view, span, local_root=is_local_root(span))
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("intake", f"could not hold span: {exc!r}", exc)
            guarded(self.telemetry, "emit", lambda: self._emit([span]))
            return
        self._hand_on(ready)

    def flush(self) -> None:
        """Decide everything held now (as partial where the root has not ended) and hand it on."""
        self._hand_on(self._buffer.drain())

    def shutdown(self) -> None:
        """Stop the timer, decide and hand on everything held, close the review sink."""
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        if self._timer is not None:
            self._timer.join(timeout=5)
        self.flush()
        if self._review_sink is not None:
            guarded(self.telemetry, "review_close", self._review_sink.close)

    # -- decision wait -------------------------------------------------------------
    def _run_timer(self) -> None:
        while True:
            with self._wake:
                if self._stopped:
                    return
                deadline = self._buffer.next_deadline()
                timeout = 0.25 if deadline is None else max(0.0, deadline - time.monotonic())
                self._wake.wait(timeout=min(timeout, 0.25))
            if self._stopped:
                return
            guarded(self.telemetry, "decision_wait", lambda: self._hand_on(self._buffer.due()))

    def wake(self) -> None:
        with self._wake:
            self._wake.notify_all()

    # -- hand on -----------------------------------------------------------------
    def _hand_on(self, ready: Sequence[Decided[ReadableSpan] | Late[ReadableSpan]]) -> None:
        for item in ready:
            if isinstance(item, Late):
                self._hand_on_late(item)
            else:
                self._hand_on_decided(item)

    def _hand_on_decided(self, decided: Decided[ReadableSpan]) -> None:
        originals = [span for _, span in decided.spans]
        self.telemetry.spans_received.add(len(originals), self.telemetry.attributes)
        if decided.planned is None:
            self.telemetry.error("plan", f"could not plan trace {decided.trace_id}: {decided.error!r}", decided.error)
            guarded(self.telemetry, "emit", lambda: self._emit(originals))
            return
        try:
            plan = decided.planned.plan
            attrs = self.telemetry.attributes
            if plan.replay_class is None:
                out = originals  # a trace with no tool step is passed through untouched
            else:
                by_span = annotate.span_attributes(decided.planned)
                common = annotate.trace_attributes(plan)
                out = [copy_with(span, by_span.get(view.span_id, common), view.attributes) for view, span in decided.spans]
                self.telemetry.traces_decided.add(1, {**attrs, annotate.REPLAY_CLASS: plan.replay_class.value, annotate.TRACE_PARTIAL: plan.partial})
                self._review(plan, originals)
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("decide", f"could not annotate trace {decided.trace_id}: {exc!r}", exc)
            out = originals
        guarded(self.telemetry, "emit", lambda: self._emit(out))

    def _hand_on_late(self, late: Late[ReadableSpan]) -> None:
        span = late.payload
        try:
            self.telemetry.spans_received.add(1, self.telemetry.attributes)
            self.telemetry.spans_late.add(1, self.telemetry.attributes)
            extra = annotate.late_attributes(late.replay_class)
            if late.step_decision is not None:
                d = late.step_decision
                extra.update(
                    {
                        annotate.STEP_DECISION: d.decision.value,
                        annotate.STEP_REASONS: list(d.reasons),
                        annotate.STEP_RELATED_CALL_IDS: list(d.related_call_ids),
                        annotate.STEP_EFFECT: d.step.effect.value,
                        annotate.STEP_STATUS: d.step.status.value,
                    }
                )
            if late.plan is not None:
                self._review(late.plan, [span])
            span = copy_with(span, extra, late.view.attributes)
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("late", f"could not annotate late span: {exc!r}", exc)
        guarded(self.telemetry, "emit", lambda: self._emit([span]))

    def _review(self, plan: TracePlan, spans: Sequence[ReadableSpan]) -> None:
        if self._review_sink is None or plan.replay_class is None or plan.replay_class.value not in self._review_classes:
            return
        service = next((name for name in map(_service_name, spans) if name), "")
        ok = guarded(self.telemetry, "review_write", lambda: self._review_sink.upsert(plan, service_name=service))
        self.telemetry.review_writes.add(1, {**self.telemetry.attributes, "outcome": "ok" if ok else "failed"})

