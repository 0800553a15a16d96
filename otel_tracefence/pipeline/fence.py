"""The engine every door shares: hold spans by trace, decide, annotate, hand on, write reviews.

:class:`Fence` wraps a :class:`~otel_tracefence.pipeline.trace_buffer.TraceBuffer` and knows
nothing of the kind of span it carries: the door gives it ``annotate`` (how to
put extra attributes on one of its spans), ``service_name`` and ``emit`` (where
decided spans go: downstream processors, an exporter, the forward queues). It
runs a timer thread only when traces can wait (a decision wait or a maximum
wait). Nothing here raises into the caller: a failure is logged, counted, and
the spans are handed on unannotated.

Review writes: a trace whose class needs review is written to the review sink before its spans are handed
on, by the fence's :class:`~otel_tracefence.pipeline.review_writer.ReviewWriter` (held after a failed write,
written again by its retry thread, set aside when refused alone, put off for the chunks of a giant trace).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Generic, Sequence, TypeVar


from otel_tracefence.pipeline import annotate
from otel_tracefence.pipeline.review_writer import ReviewGuard, ReviewSink, ReviewWriter

from otel_tracefence.core import reasons
from otel_tracefence.pipeline.trace_buffer import Decided, LateBatch, TraceBuffer
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.normalize import SpanView
from otel_tracefence.core.telemetry import COMPONENT, Telemetry, guarded

P = TypeVar("P")
_log = logging.getLogger("otel_tracefence")
UNPLANNED_EMIT_SPANS = 8192  # spans per emit when traces are handed on without a plan (a stop's deadline)
HAND_ON_TRACES = 64  # traces the timer (and a flush) decides before handing them on together: one review transaction


def step_attributes(decision: Any) -> dict[str, Any]:
    """The ``tracefence.step.*`` attributes of one step decision."""
    return {
        annotate.STEP_DECISION: decision.decision.value,
        annotate.STEP_REASONS: list(decision.reasons),
        annotate.STEP_RELATED_CALL_IDS: list(decision.related_call_ids),
        annotate.STEP_EFFECT: decision.step.effect.value,
        annotate.STEP_STATUS: decision.step.status.value,
    }



def _join_unplanned(unplanned: dict[str, list[Any]], given_up: dict[str, list[Any]]) -> None:
    """Add the held spans ``given_up`` (by trace id) to ``unplanned``, each trace's held spans first."""
    for trace_id, spans in given_up.items():
        unplanned[trace_id] = spans + unplanned.get(trace_id, [])

class Fence(Generic[P]):
    """Hold, decide, annotate and hand on spans of type ``P``.

    ``annotate(payload, view, extra) -> payload``: the span with ``extra``
    attributes (a copy, or the same object changed in place when the door owns it).
    ``emit(payloads)``: hand a decided trace's spans (or one late span) on.
    ``service_name(payload)``: for the review item.
    ``read_view(view, payload)``: the view planning reads, when the door holds a smaller one (the service).
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
        read_view: Callable[[SpanView, P], SpanView] | None = None,
        review_guard: ReviewGuard | None = None,
        telemetry_attributes: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self._emit = emit
        self._annotate = annotate_span
        self._service_name = service_name
        self.buffer: TraceBuffer[P] = TraceBuffer(config, decision_wait_ms=decision_wait_ms, max_wait_ms=max_wait_ms, read_view=read_view)
        self.telemetry = Telemetry(component, meter_provider, attributes=telemetry_attributes)
        self.telemetry.observe_held(lambda: len(self.buffer))
        self.buffer.write_index.on_unchecked = self.telemetry.count_unchecked
        self.reviews: ReviewWriter[P] = ReviewWriter(
            config, review_sink, self.telemetry, latest_plan=self.buffer.latest_plan, service_name=service_name,
            guard=review_guard, meter_provider=meter_provider,
        )  # fmt: skip
        self._wake = threading.Condition()
        self._stopped = False
        self._left_by_timer: list[tuple[str, bool, Any]] = []  # due traces the timer took and left to the stop
        self._timer: threading.Thread | None = None
        wait = config.decision_wait_ms if decision_wait_ms is None else decision_wait_ms
        if wait > 0 or max_wait_ms > 0:
            self._timer = threading.Thread(target=self._run_timer, name=f"tracefence-{component}-wait", daemon=True)
            self._timer.start()

    # -- intake ---------------------------------------------------------------
    def add(self, view: SpanView, payload: P, *, local_root: bool) -> None:
        """Take one finished span. Never raises; on failure the span is handed on unannotated."""
        try:
            ready = self.buffer.add_batch(((view, payload, local_root),))
        except Exception as exc:  # noqa: BLE001
            self.pass_through([payload], "intake", exc)
            return
        if ready:  # most spans end before their trace can be decided: nothing to hand on
            self.hand_on(ready)

    def add_batch(self, items: Sequence[tuple[SpanView, P, bool]]) -> None:
        """Take finished spans ``(view, payload, local_root)`` received together: late spans of one trace among them
        are re-planned once and handed on together. Never raises; on failure the spans are handed on unannotated."""
        try:
            ready = self.buffer.add_batch(items)
        except Exception as exc:  # noqa: BLE001
            self.pass_through([payload for _, payload, _ in items], "intake", exc)
            return
        self.hand_on(ready)

    def started(self, trace_id: str, span_id: str) -> None:
        """A span started (doors that see starts): its trace waits for it. Never raises."""
        try:
            self.buffer.started(trace_id, span_id)
        except Exception as exc:  # noqa: BLE001 - at worst the trace waits its whole decision wait
            self.telemetry.error("intake", f"could not note a span start: {exc!r}", exc)

    def pass_through(self, payloads: list[P], why: str, exc: Exception | None = None) -> None:
        """Hand spans on unannotated after a failure of ours (counted and logged as ``why``)."""
        self.telemetry.error(why, f"{why} failed, spans handed on unannotated: {exc!r}", exc)
        guarded(self.telemetry, "emit", lambda: self._emit(payloads))

    def pending_reviews(self) -> int:
        """Review items not written yet: held after a failed write, or put off (chunks of a giant trace)."""
        return self.reviews.pending()

    def review_backlog_full(self) -> bool:
        """:meth:`ReviewWriter.backlog_full`: the service refuses new Export calls while it is true."""
        return self.reviews.backlog_full()

    def owed_at_stop(self) -> list[str]:
        """:meth:`ReviewWriter.owed_at_stop`: the review items a stop under way may still owe, by trace id."""
        return self.reviews.owed_at_stop()

    def flush(
        self, deadline: float | None = None, unplanned: dict[str, list[tuple[SpanView | None, P]]] | None = None, review_until: float | None = None
    ) -> None:
        """Decide everything held now (as partial where the root has not arrived) and hand it on, one trace at a
        time; try once more to write the review items whose write failed.

        ``deadline`` (``time.monotonic()``): the traces not planned by then are handed on without a plan, fail
        closed (:meth:`hand_on_unplanned`, ``not_planned_at_shutdown``), as are ``unplanned`` (spans by trace id,
        acknowledged and never read) and every held trace that shares a trace id with them; their review items are
        written until ``review_until``."""
        unplanned = dict(unplanned or {})
        with self._wake:
            taken, self._left_by_timer = self._left_by_timer + self.buffer.take_all(), []
        self.reviews.owe_at_stop([one[0] for one in taken] + list(unplanned))
        ready: list[Decided[P] | LateBatch[P]] = []
        deciding: list[str] = []  # the traces in `ready`: their review items are owed until it is handed on
        for index, one in enumerate(taken):
            if deadline is not None and time.monotonic() >= deadline:
                _join_unplanned(unplanned, self.buffer.give_up(taken[index:]))
                break
            if one[0] in unplanned:  # part of it never read: planning the rest would pass it on less restricted
                _join_unplanned(unplanned, self.buffer.give_up([one]))
                continue
            ready = self._decide_in_turn(ready, one)
            deciding.append(one[0])
            if not ready:  # handed on
                self.reviews.paid_at_stop(deciding)
                deciding = []
        self.hand_on(ready)
        self.reviews.paid_at_stop(deciding)
        with self._wake:  # a timer still busy when its join timed out leaves the rest of its traces here
            late, self._left_by_timer = self._left_by_timer, []
        _join_unplanned(unplanned, self.buffer.give_up(late))
        if unplanned:
            self.hand_on_unplanned(unplanned, reasons.NOT_PLANNED_AT_SHUTDOWN, until=review_until)
        self.reviews.flush()

    def shutdown(
        self, deadline: float | None = None, unplanned: dict[str, list[tuple[SpanView | None, P]]] | None = None, review_until: float | None = None
    ) -> None:
        """Stop the timer, decide and hand on everything held, close the review sink.

        ``deadline``, ``unplanned`` and ``review_until``: what is not planned by then, and spans never read, are handed
        on fail closed (:meth:`flush`). Review items still unwritten after a last try are lost: counted and logged with their trace ids."""
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        if self._timer is not None:  # it stops after the trace it is handing on
            self._timer.join(timeout=5 if deadline is None else max(0.0, min(5.0, deadline - time.monotonic())))
        self.reviews.stop_retries()
        self.flush(deadline, unplanned, review_until)
        self.reviews.close()  # logs what is still held: the last word on what the review queue lacks

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
            try:
                taken = self.buffer.take_due()
            except Exception as exc:  # noqa: BLE001 - counted; the next turn tries again
                self.telemetry.error("decision_wait", f"decision_wait failed: {exc!r}", exc)
                continue
            ready: list[Decided[P] | LateBatch[P]] = []
            for index, one in enumerate(taken):  # one trace at a time: a stop takes over the rest at once
                if self._stopped:
                    with self._wake:
                        self._left_by_timer = taken[index:]
                    break
                try:
                    ready = self._decide_in_turn(ready, one)
                except Exception as exc:  # noqa: BLE001 - counted; the other traces go on
                    self.telemetry.error("decision_wait", f"decision_wait failed: {exc!r}", exc)
            guarded(self.telemetry, "decision_wait", lambda: self.hand_on(ready))
            if self._stopped:
                return

    def _decide_in_turn(self, ready: list[Decided[P] | LateBatch[P]], taken: tuple[str, bool, Any]) -> list[Decided[P] | LateBatch[P]]:
        """Decide one trace taken out of the buffer after ``ready`` (decided, not handed on yet); hand them all on
        together once they are ``HAND_ON_TRACES``: their review items in one transaction. Returns what is left to
        hand on (the caller hands it on when it has no trace left to decide)."""
        ready.extend(self.buffer.decide_taken(taken))
        if len(ready) < HAND_ON_TRACES:
            return ready
        self.hand_on(ready)
        return []

    # -- hand on -----------------------------------------------------------------
    def hand_on(self, ready: Sequence[Decided[P] | LateBatch[P]]) -> None:
        """Hand on decided traces and late batches: annotate each, write the review items they need all in one
        transaction (:meth:`ReviewWriter.write`), then ``emit`` each one's spans, in order: no span is handed on before
        its trace's review item is written (or held after a failed write)."""
        reviews: list[tuple[TracePlan, Sequence[P], str]] = []
        outs = [self._annotated_late(item, reviews) if isinstance(item, LateBatch) else self._annotated_decided(item, reviews) for item in ready]
        if reviews:
            guarded(self.telemetry, "review_write", lambda: self.reviews.write(reviews))
        for out in outs:
            if out:
                guarded(self.telemetry, "emit", lambda out=out: self._emit(out))

    def _annotated_decided(self, decided: Decided[P], reviews: list[tuple[TracePlan, Sequence[P], str]]) -> list[P]:
        """The spans of a decided trace to hand on, annotated; its review item added to ``reviews``."""
        if decided.planned is None:  # planning raised: never passed unannotated, as if it held no tool call
            self.telemetry.error("plan", f"could not plan trace {decided.trace_id}: {decided.error!r}", decided.error)
            self.hand_on_unplanned({decided.trace_id: list(decided.spans)}, reasons.NOT_PLANNED_ERROR)
            return []
        originals = [payload for _, payload in decided.spans]
        attrs = self.telemetry.attributes
        self.telemetry.spans_received.add(len(originals), attrs)
        try:
            plan = decided.planned.plan
            if plan.replay_class is not None:  # a trace with no tool step is passed through untouched
                common = annotate.trace_attributes(plan)
                by_span = annotate.span_attributes(decided.planned, common)
                if annotate.CLASHING in by_span:  # spans sharing one span id: each its own step's (DECISIONS 360)
                    out = [self._annotate(payload, view, annotate.attributes_of(by_span, view.span_id, view.sequence, common)) for view, payload in decided.spans]
                else:
                    out = [self._annotate(payload, view, by_span.get(view.span_id, common)) for view, payload in decided.spans]
                self.telemetry.traces_decided.add(1, {**attrs, annotate.REPLAY_CLASS: plan.replay_class._value_, annotate.TRACE_PARTIAL: plan.partial})
                reviews.append((plan, originals, ""))
                if self.reviews.owes(plan.replay_class.value) and getattr(self.reviews.sink, "keeps_spans", False):  # what the item page draws
                    self.reviews.spans.keep(plan, [view for view, _ in decided.spans])
                return out
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("decide", f"could not annotate trace {decided.trace_id}: {exc!r}", exc)
        return originals

    def hand_on_unplanned(self, traces: dict[str, list[tuple[SpanView | None, P]]], reason: str, until: float | None = None) -> None:
        """Hand on spans whose traces were not planned (``reason``: why, a code of ``otel_tracefence.core.reasons``),
        failing closed: every span annotated ``review``, partial, with ``tracefence.trace.reasons`` = ``[reason]``
        (:func:`annotate.unplanned_attributes`), whatever it holds, ``UNPLANNED_EMIT_SPANS`` spans per ``emit``;
        and one review item per trace (its id, class ``review``, partial, no step: an existing item keeps its
        steps), written beside the spans, on a thread of its own started before the first span is annotated
        (:meth:`ReviewWriter.write_unplanned`, until ``until``, ``time.monotonic()``): neither waits on the other, so
        a slow annotation under load does not use up the time of the items, nor a locked review store that of the
        spans (DECISIONS 690). Returns once both are done, or at ``until`` with the writer still waiting on the
        store (what it owes is then the stop's to log). ``traces``: ``(view or None, payload)`` by trace id (hex).
        Never raises; a span that cannot be annotated is handed on as it came, counted as an error."""
        extra = annotate.unplanned_attributes(reason)
        attrs = self.telemetry.attributes
        owes = self.reviews.owes(ReplayClass.REVIEW.value)
        writer = None
        if owes:  # before the spans go: released as their items are written
            self.reviews.pin(list(traces))
            items = [(TracePlan(trace_id=t, replay_class=ReplayClass.REVIEW, steps=(), partial=True), self._first_service(spans)) for t, spans in traces.items()]
            writer = threading.Thread(
                target=self.reviews.write_unplanned, args=(items, reason, until), name="tracefence-unplanned-reviews", daemon=True
            )  # fmt: skip
            writer.start()
        else:
            self.reviews.paid_at_stop(traces)  # no item is owed
        spans_total = sum(len(spans) for spans in traces.values())
        _log.warning("tracefence %s: %d trace(s) (%d spans) handed on without a plan, as review (%s)", attrs[COMPONENT], len(traces), spans_total, reason)
        self.telemetry.spans_received.add(spans_total, attrs)
        self.telemetry.traces_decided.add(len(traces), {**attrs, annotate.REPLAY_CLASS: "review", annotate.TRACE_PARTIAL: True})
        out: list[P] = []
        for spans in traces.values():
            for view, payload in spans:
                try:
                    out.append(self._annotate(payload, view, extra))  # type: ignore[arg-type]
                except Exception as exc:  # noqa: BLE001
                    self.telemetry.error("unplanned", f"could not annotate a span not planned: {exc!r}", exc)
                    out.append(payload)
            if len(out) >= UNPLANNED_EMIT_SPANS:  # forwarding starts while the rest is annotated
                guarded(self.telemetry, "emit", lambda chunk=out: self._emit(chunk))
                out = []
        if out:
            guarded(self.telemetry, "emit", lambda: self._emit(out))
        if writer is not None:
            writer.join(timeout=None if until is None else max(0.0, until - time.monotonic()) + 0.1)

    def _first_service(self, spans: Sequence[tuple[Any, P]]) -> str:
        return next((name for name in (self._service_name(payload) for _, payload in spans) if name), "")

    def _annotated_late(self, batch: LateBatch[P], reviews: list[tuple[TracePlan, Sequence[P], str]]) -> list[P]:
        """The late spans of one trace to hand on together, annotated; the review write of the batch's plan added to
        ``reviews`` (unless put off: a chunk of a giant trace, :meth:`ReviewWriter.update_late`)."""
        attrs = self.telemetry.attributes
        self.telemetry.spans_received.add(len(batch.spans), attrs)
        self.telemetry.spans_late.add(len(batch.spans), attrs)
        if batch.plan is not None:
            payloads = [late.payload for late in batch.spans]
            if batch.overflowing and batch.previous_class is not None and batch.previous_class in self.reviews.review_classes:
                guarded(self.telemetry, "late", lambda: self.reviews.update_late(batch.plan, payloads, reviews))
            else:
                reviews.append((batch.plan, payloads, ""))
        out = []
        for late in batch.spans:
            payload = late.payload
            try:
                extra = annotate.late_attributes(late.replay_class, partial=late.partial)
                if late.step_decision is not None:
                    extra.update(step_attributes(late.step_decision))
                if extra:  # a late span of a trace with no tool step is handed on untouched
                    payload = self._annotate(payload, late.view, extra)
            except Exception as exc:  # noqa: BLE001
                self.telemetry.error("late", f"could not annotate late span: {exc!r}", exc)
            out.append(payload)
        return out
