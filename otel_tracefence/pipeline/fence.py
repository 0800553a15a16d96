"""The engine every door shares: hold spans by trace, decide, annotate, hand on, write reviews.

:class:`Fence` wraps a :class:`~otel_tracefence.pipeline.trace_buffer.TraceBuffer` and knows
nothing of the kind of span it carries: the door gives it ``annotate`` (how to
put extra attributes on one of its spans), ``service_name`` and ``emit`` (where
decided spans go: downstream processors, an exporter, the forward queues). It
runs a timer thread only when traces can wait (a decision wait or a maximum
wait). Nothing here raises into the caller: a failure is logged, counted, and
the spans are handed on unannotated.

Review writes: a trace whose class needs review is written to the review sink
before its spans are handed on. The traces handed on together (those a batch of
spans decided, or up to ``HAND_ON_TRACES`` the timer decided) have their review
items written in one transaction (``upsert_many``: one synced commit, not one
per trace), then their spans are handed on. When a write fails (the database locked past
its busy timeout, read-only, on a full disk), the item is held in memory
(bounded by ``config.max_traces``, keyed by trace id, so a newer plan replaces
the held one) and written again by a retry thread, with a growing pause, until
the sink takes it, one write per item (a failed transaction never fails its
items again together); while items are held, later ones queue behind them without
waiting on the sink, so the spans' path waits on a failing database at most
once, for one busy timeout. An item the sink refuses alone (it takes the others
in the same retry pass: a constraint, a trigger) is set aside: still held and
tried on every retry, logged once with its trace id and the error, and no
longer making later items queue (``tracefence.errors``
``error.type=review_refused``). ``flush`` and ``shutdown`` try once more; what is
still held at shutdown, or pushed out past the bound, is lost, counted
(``tracefence.review.writes`` ``outcome=dropped``) and logged with its trace
ids. ``tracefence.review.writes`` counts traces: ``ok`` written (at once or on
a retry), ``failed`` held because a write failed or was queued behind failing
ones; ``tracefence.errors`` ``error.type=review_write`` counts failed attempts;
``tracefence.review.pending`` is the number held.

Chunks of a trace past its bound (its root not ended yet) whose review item
exists already (its class needed review before they came) update the item
after ``REVIEW_UPDATE_INTERVAL_S`` at first, the interval doubling after each
write (up to ``REVIEW_UPDATE_MAX_INTERVAL_S``), with every step planned
meanwhile, written by the same retry thread (and by ``flush`` and
``shutdown``): a giant trace handed on in many chunks costs a few writes, not
one per chunk.
Any other late batch, and the chunk with the root, is written before its spans
are handed on, as a decided trace is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Callable, Generic, Iterable, Protocol, Sequence, TypeVar

from opentelemetry import metrics

from otel_tracefence.pipeline import annotate

from otel_tracefence.core import reasons
from otel_tracefence.pipeline.trace_buffer import Decided, LateBatch, TraceBuffer
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.normalize import SpanView
from otel_tracefence.core.telemetry import COMPONENT, Telemetry, guarded, instrument

P = TypeVar("P")
_log = logging.getLogger("otel_tracefence")
UNPLANNED_EMIT_SPANS = 8192  # spans per emit when traces are handed on without a plan (a stop's deadline)
UNPLANNED_REVIEW_BATCH = 2000  # their review items per transaction
HAND_ON_TRACES = 64  # traces the timer (and a flush) decides before handing them on together: one review transaction
REVIEW_RETRY_PAUSE_S = (0.5, 5.0)  # first and longest pause before held review items are written again
REVIEW_UPDATE_INTERVAL_S = 5.0  # chunks of a giant trace update its review item at most this often at first...
REVIEW_UPDATE_MAX_INTERVAL_S = 60.0  # ...the interval doubling after each such write, up to this


def with_steps_of(plan: TracePlan, older: Sequence[Any]) -> TracePlan:
    """``plan`` with the step decisions of ``older`` it lacks, in trace order, flagged partial: a re-plan of late
    spans sees only a window of its trace's steps, and a review write must never lose a step planned before."""
    have = {(d.step.span_id, d.step.call_id) for d in plan.steps}
    called = {d.step.call_id for d in plan.steps if d.step.call_id}
    # A requested call the newer plan has as a recorded step (its tool span came late) is not kept beside it.
    extra = [d for d in older if (d.step.span_id, d.step.call_id) not in have and not (d.step.requested_only and d.step.call_id in called)]
    if not extra:
        return plan
    steps = sorted((*plan.steps, *extra), key=lambda d: d.step.order_key)
    return replace(plan, steps=tuple(steps), partial=True)


class ReviewGuard(Protocol):
    """Told which traces' review items are not durable (held in memory) and when they become so: the service's
    persistent queue keeps those traces' spans on disk meanwhile (a review item is part of the acknowledgement,
    DECISIONS 510). Called from the fence's threads; must not raise (what it raises is counted and logged)."""

    def pin(self, trace_ids: Iterable[str]) -> None: ...

    def release(self, trace_ids: Iterable[str]) -> None: ...


class ReviewSink(Protocol):
    """Where traces whose class needs review go (a review store: SQLite by default, or PostgreSQL)."""

    def upsert(self, plan: TracePlan, *, service_name: str = "") -> Any: ...

    def close(self) -> None: ...


def open_review_sink(config: TraceFenceConfig) -> ReviewSink | None:
    """The configured review sink: the store ``config.review_db`` names (a SQLite file or a PostgreSQL URL,
    :func:`~otel_tracefence.review.open_review_store`), or ``None`` when it is empty."""
    if not config.review_db:
        return None
    from otel_tracefence.review.open import open_review_store

    return open_review_store(config.review_db, store_raw_values=config.store_raw_values)


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
        self._guard = review_guard
        self._emit = emit
        self._annotate = annotate_span
        self._service_name = service_name
        self._review_sink = review_sink
        self._review_classes = frozenset(config.review_classes)
        self._review_lock = threading.Lock()  # one write at a time (see _review)
        # Review items whose write failed, oldest first: trace id -> (plan, service name, generation).
        self._held_reviews: OrderedDict[str, tuple[TracePlan, str, int]] = OrderedDict()
        # The held items the sink refused alone (it took another item in the same retry pass), trace id -> None,
        # under _held_lock; always a subset of _held_reviews' keys (DECISIONS 290).
        self._set_aside: dict[str, None] = {}
        self._held_lock = threading.Lock()
        # During a stop's flush: the traces whose review item the stop may still owe (taken, not yet handed on with
        # their item written), trace id -> None in order, under _held_lock; read by owed_at_stop (DECISIONS 209).
        self._owed_at_stop: dict[str, None] = {}
        self._held_generation = 0
        self._held_max = config.max_traces
        # Review items of traces with late spans whose update waits for REVIEW_UPDATE_INTERVAL_S:
        # trace id -> (service name, the step decisions planned meanwhile, by span and call id)
        self._deferred_reviews: OrderedDict[str, tuple[str, dict]] = OrderedDict()
        self._updated_at: OrderedDict[str, tuple[float, float]] = OrderedDict()  # trace -> (last chunk update, interval)
        self._retry_thread: threading.Thread | None = None
        self._retry_stop = threading.Event()
        self.buffer: TraceBuffer[P] = TraceBuffer(config, decision_wait_ms=decision_wait_ms, max_wait_ms=max_wait_ms, read_view=read_view)
        self.telemetry = Telemetry(component, meter_provider, attributes=telemetry_attributes)
        self.telemetry.observe_held(lambda: len(self.buffer))
        if review_sink is not None and getattr(review_sink, "on_error", False) is None:
            # The SQLite store reports a database file deleted or replaced under it (it logs and reopens):
            # counted in tracefence.errors, in every door.
            review_sink.on_error = lambda kind: self.telemetry.errors.add(1, {**self.telemetry.attributes, "error.type": kind})
        if review_sink is not None:
            meter = metrics.get_meter("otel_tracefence", meter_provider=meter_provider)
            instrument(meter, "tracefence.review.pending", lambda: [(len(self._held_reviews), self.telemetry.attributes)])
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
        with self._held_lock:
            return len(self._held_reviews) + len(self._deferred_reviews)

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
        self._owe_at_stop([one[0] for one in taken] + list(unplanned))
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
                self._paid_at_stop(deciding)
                deciding = []
        self.hand_on(ready)
        self._paid_at_stop(deciding)
        with self._wake:  # a timer still busy when its join timed out leaves the rest of its traces here
            late, self._left_by_timer = self._left_by_timer, []
        _join_unplanned(unplanned, self.buffer.give_up(late))
        if unplanned:
            self.hand_on_unplanned(unplanned, reasons.NOT_PLANNED_AT_SHUTDOWN, until=review_until)
        if self._deferred_reviews:
            self._write_deferred_reviews(all_now=True)
        if self._held_reviews:
            self._write_held_reviews()

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
        self._retry_stop.set()
        retry = self._retry_thread
        if retry is not None:
            retry.join(timeout=30)  # it ends after its current attempt (at most one busy timeout)
        self.flush(deadline, unplanned, review_until)
        with self._held_lock:
            lost = list(self._held_reviews)
            self._held_reviews.clear()
            self._set_aside.clear()
        if lost:  # logged whatever was logged before: the last word on what the review queue lacks
            self.telemetry.review_writes.add(len(lost), {**self.telemetry.attributes, "outcome": "dropped"})
            self.telemetry.errors.add(1, {**self.telemetry.attributes, "error.type": "review_dropped"})
            shown = ", ".join(lost[:100]) + (f" and {len(lost) - 100} more" if len(lost) > 100 else "")
            _log.error("tracefence %s: shutdown: %d review item(s) could not be written and are lost: traces %s", self.telemetry.attributes[COMPONENT], len(lost), shown)
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
        transaction (:meth:`_review_many`), then ``emit`` each one's spans, in order: no span is handed on before
        its trace's review item is written (or held after a failed write)."""
        reviews: list[tuple[TracePlan, Sequence[P], str]] = []
        outs = [self._annotated_late(item, reviews) if isinstance(item, LateBatch) else self._annotated_decided(item, reviews) for item in ready]
        if reviews:
            guarded(self.telemetry, "review_write", lambda: self._review_many(reviews))
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
                return out
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("decide", f"could not annotate trace {decided.trace_id}: {exc!r}", exc)
        return originals

    def hand_on_unplanned(self, traces: dict[str, list[tuple[SpanView | None, P]]], reason: str, until: float | None = None) -> None:
        """Hand on spans whose traces were not planned (``reason``: why, a code of ``otel_tracefence.core.reasons``),
        failing closed: every span annotated ``review``, partial, with ``tracefence.trace.reasons`` = ``[reason]``
        (:func:`annotate.unplanned_attributes`), whatever it holds, ``UNPLANNED_EMIT_SPANS`` spans per ``emit``;
        then one review item per trace (its id, class ``review``, partial, no step: an existing item keeps its
        steps), ``UNPLANNED_REVIEW_BATCH`` per transaction (the sink's ``upsert_many``) until ``until``
        (``time.monotonic()``); a transaction that fails is written again one item at a time, and two failures in a
        row end the writes. Items not written by then, or whose write failed, are counted and logged with
        their trace ids. ``traces``: ``(view or None, payload)`` by trace id (hex). Never raises; a span that
        cannot be annotated is handed on as it came, counted as an error."""
        extra = annotate.unplanned_attributes(reason)
        attrs = self.telemetry.attributes
        owes = self._review_sink is not None and ReplayClass.REVIEW.value in self._review_classes
        if owes:  # before the spans go: released as their items are written
            self._pin(list(traces))
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
        if self._review_sink is None or ReplayClass.REVIEW.value not in self._review_classes:
            self._paid_at_stop(traces)  # no item is owed
            return
        items = [(TracePlan(trace_id=t, replay_class=ReplayClass.REVIEW, steps=(), partial=True), self._first_service(spans)) for t, spans in traces.items()]
        written, at, one_by_one_until, in_a_row = 0, 0, 0, 0
        lost: list[str] = []
        while at < len(items) and in_a_row < 2 and (until is None or time.monotonic() < until):
            batch = items[at : at + (1 if at < one_by_one_until else UNPLANNED_REVIEW_BATCH)]
            if guarded(self.telemetry, "review_write", lambda: self._upsert_many(batch)):
                written, in_a_row = written + len(batch), 0
                self._paid_at_stop(plan.trace_id for plan, _ in batch)
                with self._held_lock:  # a held one keeps its steps to write: it stays pinned until they are
                    self._release([plan.trace_id for plan, _ in batch if plan.trace_id not in self._held_reviews])
            elif len(batch) > 1:  # a failed transaction: its items one at a time, so that one refused item fails alone
                one_by_one_until = at + len(batch)
                continue
            else:  # refused alone, or the sink refuses writes: two failures in a row end the writes (DECISIONS 290)
                lost.append(batch[0][0].trace_id)
                in_a_row += 1
            at += len(batch)
        self.telemetry.review_writes.add(written, {**attrs, "outcome": "ok"})
        lost += [plan.trace_id for plan, _ in items[at:]]
        if lost:
            self.telemetry.review_writes.add(len(lost), {**attrs, "outcome": "dropped"})
            self.telemetry.errors.add(1, {**attrs, "error.type": "review_dropped"})
            shown = ", ".join(lost[:100]) + (f" and {len(lost) - 100} more" if len(lost) > 100 else "")
            _log.error(
                "tracefence %s: %d review item(s) of traces handed on without a plan (%s) were not written (in time, or refused) and are lost; "
                "their spans went on as review: traces %s", attrs[COMPONENT], len(lost), reason, shown,
            )  # fmt: skip

    def owed_at_stop(self) -> list[str]:
        """The trace ids, in order, whose review item a stop under way may still owe: taken by its flush and not yet
        handed on with their item written (a review write still waiting on a locked database, or traces not reached).
        Empty outside a stop. Safe from any thread: the stop's caller logs them when the flush outlives its time."""
        with self._held_lock:
            return list(self._owed_at_stop)

    def _owe_at_stop(self, trace_ids: Iterable[str]) -> None:
        with self._held_lock:
            self._owed_at_stop.update(dict.fromkeys(trace_ids))

    def _paid_at_stop(self, trace_ids: Iterable[str]) -> None:
        with self._held_lock:
            for trace_id in trace_ids:
                self._owed_at_stop.pop(trace_id, None)

    def _first_service(self, spans: Sequence[tuple[Any, P]]) -> str:
        return next((name for name in (self._service_name(payload) for _, payload in spans) if name), "")

    def _annotated_late(self, batch: LateBatch[P], reviews: list[tuple[TracePlan, Sequence[P], str]]) -> list[P]:
        """The late spans of one trace to hand on together, annotated; the review write of the batch's plan added to
        ``reviews`` (unless put off: a chunk of a giant trace, :meth:`_update_review`)."""
        attrs = self.telemetry.attributes
        self.telemetry.spans_received.add(len(batch.spans), attrs)
        self.telemetry.spans_late.add(len(batch.spans), attrs)
        if batch.plan is not None:
            payloads = [late.payload for late in batch.spans]
            if batch.overflowing and batch.previous_class is not None and batch.previous_class in self._review_classes:
                guarded(self.telemetry, "late", lambda: self._update_review(batch.plan, payloads, reviews))
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

    def _update_review(self, plan: TracePlan, payloads: Sequence[P], reviews: list[tuple[TracePlan, Sequence[P], str]]) -> None:
        """Update an existing review item: now (added to ``reviews``) when the trace's last write is older than
        ``REVIEW_UPDATE_INTERVAL_S``, else later (its latest plan, by the writer thread or the next flush)."""
        if self._review_sink is None:
            return
        now = time.monotonic()
        with self._held_lock:
            last, interval = self._updated_at.get(plan.trace_id, (None, REVIEW_UPDATE_INTERVAL_S))
            if last is not None and now - last < interval:
                service = next((name for name in map(self._service_name, payloads) if name), "")
                known_service, steps = self._deferred_reviews.get(plan.trace_id, ("", {}))
                steps.update(((d.step.span_id, d.step.call_id), d) for d in plan.steps)
                self._deferred_reviews[plan.trace_id] = (service or known_service, steps)
                self._start_writer()
                return
            self._updated_at[plan.trace_id] = (now, interval)
            self._updated_at.move_to_end(plan.trace_id)
            while len(self._updated_at) > self._held_max:
                self._updated_at.popitem(last=False)
        reviews.append((plan, payloads, ""))

    def _start_writer(self) -> None:
        # Caller holds _held_lock.
        if self._retry_thread is None and not self._retry_stop.is_set():
            self._retry_thread = threading.Thread(target=self._run_review_retry, name="tracefence-review-retry", daemon=True)
            self._retry_thread.start()

    def _write_deferred_reviews(self, *, all_now: bool = False) -> None:
        """Write the review items whose update was put off and is due (``all_now``: every one), each with its
        trace's latest plan and every step planned meanwhile. Each write doubles the trace's interval (up to
        ``REVIEW_UPDATE_MAX_INTERVAL_S``): an item's write costs in proportion to its steps, so a trace that
        keeps growing is written a logarithmic number of times, not once a second."""
        with self._held_lock:
            now = time.monotonic()
            due = [t for t in self._deferred_reviews if all_now or now - self._updated_at.get(t, (0.0, 0.0))[0] >= self._updated_at.get(t, (0.0, 0.0))[1]]
            deferred = {t: self._deferred_reviews.pop(t) for t in due}
            for trace_id in deferred:
                interval = self._updated_at.get(trace_id, (0.0, REVIEW_UPDATE_INTERVAL_S))[1]
                self._updated_at[trace_id] = (now, min(2 * interval, REVIEW_UPDATE_MAX_INTERVAL_S))
        reviews: list[tuple[TracePlan, Sequence[P], str]] = []
        for trace_id, (service, steps) in deferred.items():
            latest = self.buffer.latest_plan(trace_id)
            if latest is None:  # forgotten meanwhile: the steps planned since the last write, fenced (they were late)
                ordered = tuple(sorted(steps.values(), key=lambda d: d.step.order_key))
                latest = TracePlan(trace_id=trace_id, replay_class=ReplayClass.REVIEW, steps=(), partial=True)
                plan = replace(latest, steps=ordered)
            else:
                plan = with_steps_of(latest, list(steps.values()))
            reviews.append((plan, [], service))
        if reviews:
            guarded(self.telemetry, "late", lambda: self._review_many(reviews))

    def _review_many(self, reviews: Sequence[tuple[TracePlan, Sequence[P], str]]) -> None:
        """Write the review items of ``reviews`` (``(plan, payloads, service name)``: the service name is the first
        one the payloads give, else the one given) that need review, in one transaction (:meth:`_write_reviews`).
        Each item counts once in ``tracefence.review.writes``: ``ok`` when written; when the write fails, or the sink
        is failing already (items are held), each is held for the retry thread (:meth:`_hold_review`)."""
        if self._review_sink is None:
            return
        asked: list[tuple[TracePlan, str]] = []
        for plan, payloads, service in reviews:
            service = next((name for name in map(self._service_name, payloads) if name), service)
            if self._deferred_reviews:  # a write of this trace now takes the steps whose write was put off
                with self._held_lock:
                    put_off = self._deferred_reviews.pop(plan.trace_id, None)
                if put_off is not None:
                    plan = with_steps_of(plan, list(put_off[1].values()))
                    service = service or put_off[0]
            if self._sink_failing() and self._hold_review(plan, service, failed=False):
                continue  # the sink is failing: queue behind the held items, never wait on it again
            asked.append((plan, service))
        if not asked:
            return
        # One write at a time, of each trace's latest plan: a late span's plan written by
        # another thread in between is never overwritten by an older one.
        with self._review_lock:
            batch: list[tuple[TracePlan, str]] = []
            for plan, service in asked:
                plan = self._latest(plan)
                if not self._needs_review(plan):
                    continue
                if plan.trace_id in self._set_aside:  # refused alone before: its newer plan goes to the retry, not in a batch
                    self._hold_review(plan, service, failed=True)
                    continue
                if self._sink_failing() and self._hold_review(plan, service, failed=False):
                    continue  # a write failed while this one waited for the lock
                batch.append((plan, service))
            failure = self._write_reviews(batch) if batch else None
        if failure is None:
            if batch:
                self.telemetry.review_writes.add(len(batch), {**self.telemetry.attributes, "outcome": "ok"})
            return
        for plan, service in batch:
            self._hold_review(plan, service, failed=True)

    def _upsert_many(self, batch: Sequence[tuple[TracePlan, str]]) -> None:
        """``(plan, service name)`` items written in one transaction by the sink's ``upsert_many`` (one ``upsert``
        each for a sink without it). Raises what the sink raises."""
        write_many = getattr(self._review_sink, "upsert_many", None)
        if write_many is not None and len(batch) > 1:
            write_many(batch)
            return
        for plan, service in batch:
            self._review_sink.upsert(plan, service_name=service)  # type: ignore[union-attr]

    def _write_reviews(self, batch: Sequence[tuple[TracePlan, str]]) -> Exception | None:
        """Write ``batch`` (:meth:`_upsert_many`); None when written, else what the sink raised, counted and logged
        (at most once a minute) with the trace ids."""
        # Caller holds _review_lock.
        try:
            self._upsert_many(batch)
            return None
        except Exception as exc:  # noqa: BLE001 - a failing review queue must not stop the spans
            ids = [plan.trace_id for plan, _ in batch]
            which = f"item for trace {ids[0]}" if len(ids) == 1 else f"items for {len(ids)} traces ({', '.join(ids[:20])}{' ...' if len(ids) > 20 else ''})"
            self.telemetry.error(
                "review_write",
                f"review {which} not written: {exc!r}; held in memory and written again once the review queue takes writes",
                exc,
            )
            return exc

    def _latest(self, plan: TracePlan) -> TracePlan:
        """The trace's latest plan, keeping any step of ``plan`` it lacks."""
        latest = self.buffer.latest_plan(plan.trace_id)
        return plan if latest is None or latest is plan else with_steps_of(latest, plan.steps)

    def _needs_review(self, plan: TracePlan) -> bool:
        return plan.replay_class is not None and plan.replay_class.value in self._review_classes

    def _sink_failing(self) -> bool:
        """True while an item is held that the sink did not refuse alone: later items queue behind it. Items set
        aside (:meth:`_write_held_reviews`) alone do not make later ones queue (DECISIONS 290)."""
        return len(self._held_reviews) > len(self._set_aside)

    def _hold_review(self, plan: TracePlan, service: str, *, failed: bool) -> bool:
        """Keep a review item whose write ``failed``, or that would queue behind held ones, for the retry
        thread. False (nothing done) when it would queue but the sink is not failing any more."""
        plan = self._latest(plan)
        if not self._needs_review(plan):
            return True
        dropped: list[str] = []
        with self._held_lock:
            if not failed and not self._sink_failing():
                return False
            known = self._held_reviews.pop(plan.trace_id, None)
            if known is None:  # under the lock, before the retry thread can write and release it
                self._pin([plan.trace_id])
            else:
                plan = with_steps_of(plan, known[0].steps)
            self._held_generation += 1
            self._held_reviews[plan.trace_id] = (plan, service or (known[1] if known else ""), self._held_generation)
            while len(self._held_reviews) > self._held_max:
                dropped.append(self._held_reviews.popitem(last=False)[0])
                self._set_aside.pop(dropped[-1], None)
            self._start_writer()
        if known is None:
            self.telemetry.review_writes.add(1, {**self.telemetry.attributes, "outcome": "failed"})
        if dropped:
            self.telemetry.review_writes.add(len(dropped), {**self.telemetry.attributes, "outcome": "dropped"})
            kept = "; their spans stay in the persistent queue, planned and written again at the next start" if self._guard is not None else ""
            self.telemetry.error(
                "review_dropped", f"{len(dropped)} review item(s) held past the bound of {self._held_max} are lost{kept}: traces {', '.join(dropped[:20])}"
            )
        return True

    def _pin(self, trace_ids: Sequence[str]) -> None:
        """Tell the guard these traces' review items are not durable (before their spans are handed on). Called
        with or without ``_held_lock`` (the guard takes only its own lock, and never calls back)."""
        if self._guard is not None and trace_ids:
            guarded(self.telemetry, "review_guard", lambda: self._guard.pin(trace_ids))  # type: ignore[union-attr]

    def _release(self, trace_ids: Sequence[str]) -> None:
        """Tell the guard these traces' review items are durable now."""
        if self._guard is not None and trace_ids:
            guarded(self.telemetry, "review_guard", lambda: self._guard.release(trace_ids))  # type: ignore[union-attr]

    def review_backlog_full(self) -> bool:
        """True while the review sink fails and the items held in memory fill their bound (``config.max_traces``):
        the service refuses new Export calls then (UNAVAILABLE / 503), rather than acknowledge traces whose item
        it would drop (DECISIONS 511). Traces acknowledged already may still take the hold past it (counted)."""
        return self._sink_failing() and len(self._held_reviews) >= self._held_max

    def _run_review_retry(self) -> None:
        pause = REVIEW_RETRY_PAUSE_S[0]
        while not self._retry_stop.wait(REVIEW_UPDATE_INTERVAL_S if not self._held_reviews else pause):
            if self._deferred_reviews:
                self._write_deferred_reviews()
            if self._write_held_reviews():
                with self._held_lock:
                    if not self._deferred_reviews and not self._held_reviews:
                        if self._retry_thread is threading.current_thread():
                            self._retry_thread = None
                        return
                continue
            pause = min(pause * 2, REVIEW_RETRY_PAUSE_S[1])

    def _write_held_reviews(self) -> bool:
        """One retry pass: write each item held at its start once, one write each, those not set aside first,
        oldest first; True once none is held.

        An item whose write fails goes to the back of the queue; the pass ends at the second failure in a row (the
        sink refuses writes, not one item: a down sink costs the pass two busy timeouts). The items that failed in a
        pass that wrote another one were refused alone: they are set aside (kept held, tried again on every pass,
        no longer making later items queue), counted once each in ``tracefence.errors`` ``error.type=review_refused``
        and logged once each with their trace id and the error (DECISIONS 290)."""
        with self._held_lock:
            order = [t for t in self._held_reviews if t not in self._set_aside] + list(self._set_aside)
        written = 0
        failed: dict[str, Exception] = {}
        in_a_row = 0
        for trace_id in order:
            with self._held_lock:
                held = self._held_reviews.get(trace_id)
            if held is None:
                continue
            plan, service, generation = held
            with self._review_lock:
                failure = self._write_reviews([(self._latest(plan), service)])
            with self._held_lock:
                now = self._held_reviews.get(trace_id)
                if failure is None and now is not None and now[2] == generation:  # not replaced by a newer plan meanwhile
                    del self._held_reviews[trace_id]
                    self._set_aside.pop(trace_id, None)
                    self._release([trace_id])  # durable now (under the lock: a new hold pins it again after this)
                elif failure is not None and now is not None:
                    self._held_reviews.move_to_end(trace_id)
            if failure is None:
                self.telemetry.review_writes.add(1, {**self.telemetry.attributes, "outcome": "ok"})
                written += 1
                in_a_row = 0
                continue
            failed[trace_id] = failure
            in_a_row += 1
            if in_a_row == 2:
                break
        if written:
            self._set_aside_refused(failed)
            _log.warning("tracefence %s: the review queue takes writes again: wrote %d held item(s)", self.telemetry.attributes[COMPONENT], written)
        with self._held_lock:
            return not self._held_reviews

    def _set_aside_refused(self, failed: dict[str, Exception]) -> None:
        """Set aside the held items of ``failed`` (trace id -> what the sink raised) the sink refused while it took
        another; each newly set aside is counted and logged once, in one line."""
        with self._held_lock:
            new = {t: exc for t, exc in failed.items() if t in self._held_reviews and t not in self._set_aside}
            self._set_aside.update(dict.fromkeys(new))
        if not new:
            return
        self.telemetry.errors.add(len(new), {**self.telemetry.attributes, "error.type": "review_refused"})
        shown = "; ".join(f"trace {t}: {exc!r}" for t, exc in list(new.items())[:20]) + (f"; and {len(new) - 20} more" if len(new) > 20 else "")
        _log.error(
            "tracefence %s: the review queue refuses %d item(s) while it takes others: %s; kept held and tried again on every retry (at most %.0f s apart), lost at stop if still refused",
            self.telemetry.attributes[COMPONENT],
            len(new),
            shown,
            REVIEW_RETRY_PAUSE_S[1],
        )
