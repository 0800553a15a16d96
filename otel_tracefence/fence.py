"""The engine every door shares: hold spans by trace, decide, annotate, hand on, write reviews.

:class:`Fence` wraps a :class:`~otel_tracefence.buffer.TraceBuffer` and knows
nothing of the kind of span it carries: the door gives it ``annotate`` (how to
put extra attributes on one of its spans), ``service_name`` and ``emit`` (where
decided spans go: downstream processors, an exporter, the forward queues). It
runs a timer thread only when traces can wait (a decision wait or a maximum
wait). Nothing here raises into the caller: a failure is logged, counted, and
the spans are handed on unannotated.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Generic, Protocol, Sequence, TypeVar

from otel_tracefence import annotate
from otel_tracefence.buffer import Decided, Late, TraceBuffer
from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.model import TracePlan
from otel_tracefence.normalize import SpanView
from otel_tracefence.telemetry import Telemetry, guarded

P = TypeVar("P")


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


def step_attributes(decision: Any) -> dict[str, Any]:
    """The ``tracefence.step.*`` attributes of one step decision."""
    return {
        annotate.STEP_DECISION: decision.decision.value,
        annotate.STEP_REASONS: list(decision.reasons),
        annotate.STEP_RELATED_CALL_IDS: list(decision.related_call_ids),
        annotate.STEP_EFFECT: decision.step.effect.value,
        annotate.STEP_STATUS: decision.step.status.value,
    }


class Fence(Generic[P]):
    """Hold, decide, annotate and hand on spans of type ``P``.

    ``annotate(payload, view, extra) -> payload``: the span with ``extra``
    attributes (a copy, or the same object changed in place when the door owns it).
    ``emit(payloads)``: hand a decided trace's spans (or one late span) on.
    ``service_name(payload)``: for the review item.
    """

    def __init__(
        self,
        config: TraceFenceConfig,
        *,
        emit: Callable[[list[P]], None],
        annotate_span: Callable[[P, SpanView, dict[str, Any]], P],
        service_name: Callable[[P], str],
        component: str,
        review_sink: ReviewSink | None,
        meter_provider: Any = None,
        decision_wait_ms: float | None = None,
        max_wait_ms: float = 0.0,
    ) -> None:
        self.config = config
        self._emit = emit
        self._annotate = annotate_span
        self._service_name = service_name
        self._review_sink = review_sink
        self._review_classes = frozenset(config.review_classes)
        self._review_lock = threading.Lock()
        self.buffer: TraceBuffer[P] = TraceBuffer(config, decision_wait_ms=decision_wait_ms, max_wait_ms=max_wait_ms)
        self.telemetry = Telemetry(component, meter_provider)
        self.telemetry.observe_held(lambda: len(self.buffer))
        self._wake = threading.Condition()
        self._stopped = False
        self._timer: threading.Thread | None = None
        wait = config.decision_wait_ms if decision_wait_ms is None else decision_wait_ms
        if wait > 0 or max_wait_ms > 0:
            self._timer = threading.Thread(target=self._run_timer, name=f"tracefence-{component}-wait", daemon=True)
            self._timer.start()

    # -- intake ---------------------------------------------------------------
    def add(self, view: SpanView, payload: P, *, local_root: bool) -> None:
        """Take one finished span. Never raises; on failure the span is handed on unannotated."""
        try:
            ready = self.buffer.add(view, payload, local_root=local_root)
        except Exception as exc:  # noqa: BLE001
            self.pass_through([payload], "intake", exc)
            return
        self.hand_on(ready)

    def pass_through(self, payloads: list[P], why: str, exc: Exception | None = None) -> None:
        """Hand spans on unannotated after a failure of ours (counted and logged as ``why``)."""
        self.telemetry.error(why, f"{why} failed, spans handed on unannotated: {exc!r}", exc)
        guarded(self.telemetry, "emit", lambda: self._emit(payloads))

    def flush(self) -> None:
        """Decide everything held now (as partial where the root has not arrived) and hand it on."""
        self.hand_on(self.buffer.drain())

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

    # -- waits ---------------------------------------------------------------------
    def _run_timer(self) -> None:
        while True:
            with self._wake:
                if self._stopped:
                    return
                deadline = self.buffer.next_deadline()
                timeout = 0.25 if deadline is None else max(0.0, deadline - time.monotonic())
                self._wake.wait(timeout=min(timeout, 0.25))
                if self._stopped:
                    return
            guarded(self.telemetry, "decision_wait", lambda: self.hand_on(self.buffer.due()))

    # -- hand on -----------------------------------------------------------------
    def hand_on(self, ready: Sequence[Decided[P] | Late[P]]) -> None:
        for item in ready:
            if isinstance(item, Late):
                self._hand_on_late(item)
            else:
                self._hand_on_decided(item)

    def _hand_on_decided(self, decided: Decided[P]) -> None:
        originals = [payload for _, payload in decided.spans]
        attrs = self.telemetry.attributes
        self.telemetry.spans_received.add(len(originals), attrs)
        if decided.planned is None:
            self.telemetry.error("plan", f"could not plan trace {decided.trace_id}: {decided.error!r}", decided.error)
            guarded(self.telemetry, "emit", lambda: self._emit(originals))
            return
        out = originals
        try:
            plan = decided.planned.plan
            if plan.replay_class is not None:  # a trace with no tool step is passed through untouched
                by_span = annotate.span_attributes(decided.planned)
                common = annotate.trace_attributes(plan)
                out = [self._annotate(payload, view, by_span.get(view.span_id, common)) for view, payload in decided.spans]
                self.telemetry.traces_decided.add(1, {**attrs, annotate.REPLAY_CLASS: plan.replay_class.value, annotate.TRACE_PARTIAL: plan.partial})
                self._review(plan, originals)
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("decide", f"could not annotate trace {decided.trace_id}: {exc!r}", exc)
            out = originals
        guarded(self.telemetry, "emit", lambda: self._emit(out))

    def _hand_on_late(self, late: Late[P]) -> None:
        payload = late.payload
        try:
            self.telemetry.spans_received.add(1, self.telemetry.attributes)
            self.telemetry.spans_late.add(1, self.telemetry.attributes)
            extra = annotate.late_attributes(late.replay_class)
            if late.step_decision is not None:
                extra.update(step_attributes(late.step_decision))
            if late.plan is not None:
                self._review(late.plan, [payload])
            if extra:  # a late span of a trace with no tool step is handed on untouched
                payload = self._annotate(payload, late.view, extra)
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("late", f"could not annotate late span: {exc!r}", exc)
        guarded(self.telemetry, "emit", lambda: self._emit([payload]))

    def _review(self, plan: TracePlan, payloads: Sequence[P]) -> None:
        if self._review_sink is None:
            return
        # One write at a time, of the trace's latest plan: a late span's plan written by
        # another thread in between is never overwritten by an older one.
        with self._review_lock:
            plan = self.buffer.latest_plan(plan.trace_id) or plan
            if plan.replay_class is None or plan.replay_class.value not in self._review_classes:
                return
            service = next((name for name in map(self._service_name, payloads) if name), "")
            ok = guarded(self.telemetry, "review_write", lambda: self._review_sink.upsert(plan, service_name=service))
        self.telemetry.review_writes.add(1, {**self.telemetry.attributes, "outcome": "ok" if ok else "failed"})
