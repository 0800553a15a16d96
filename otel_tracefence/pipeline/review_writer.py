"""The review writer: the review items of a fence's traces, written to its review sink.

Review writes: a trace whose class needs review is written to the review sink before its spans are handed on. The
traces handed on together (those a batch of spans decided, or up to ``HAND_ON_TRACES`` the timer decided) have their
review items written in one transaction (``upsert_many``: one synced commit, not one per trace), then their spans
are handed on. When a write fails (the database locked past its busy timeout, read-only, on a full disk), the item
is held in memory (bounded by ``config.max_traces``, keyed by trace id, so a newer plan replaces the held one) and
written again by a retry thread, with a growing pause, until the sink takes it, one write per item (a failed
transaction never fails its items again together); while items are held, later ones queue behind them without
waiting on the sink, so the spans' path waits on a failing database at most once, for one busy timeout. An item the
sink refuses alone (it takes the others in the same retry pass: a constraint, a trigger) is set aside: still held
and tried on every retry, logged once with its trace id and the error, and no longer making later items queue
(``tracefence.errors`` ``error.type=review_refused``). ``flush`` and ``shutdown`` try once more; what is still held
at shutdown, or pushed out past the bound, is lost, counted (``tracefence.review.writes`` ``outcome=dropped``) and
logged with its trace ids. ``tracefence.review.writes`` counts traces: ``ok`` written (at once or on a retry),
``failed`` held because a write failed or was queued behind failing ones; ``tracefence.errors``
``error.type=review_write`` counts failed attempts; ``tracefence.review.pending`` is the number held.

Chunks of a trace past its bound (its root not ended yet) whose review item exists already (its class needed review
before they came) update the item after ``REVIEW_UPDATE_INTERVAL_S`` at first, the interval doubling after each
write (up to ``REVIEW_UPDATE_MAX_INTERVAL_S``), with every step planned meanwhile, written by the same retry thread
(and by ``flush`` and ``shutdown``): a giant trace handed on in many chunks costs a few writes, not one per chunk.
Any other late batch, and the chunk with the root, is written before its spans are handed on, as a decided trace is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Callable, Generic, Iterable, Protocol, Sequence, TypeVar

from opentelemetry import metrics

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.core.telemetry import COMPONENT, Telemetry, guarded, instrument
from otel_tracefence.pipeline.review_spans import SpanKeeper

P = TypeVar("P")
_log = logging.getLogger("otel_tracefence")
UNPLANNED_REVIEW_BATCH = 2000  # review items per transaction of traces handed on without a plan
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



class ReviewWriter(Generic[P]):
    """Write the review items of one fence's traces to ``sink``, the single job of keeping them: at once (one
    transaction per hand-on, :meth:`write`), held after a failed write and written again by a retry thread, set
    aside when refused alone, put off for the chunks of a giant trace (:meth:`update_late`), and those a stop
    owes (:meth:`owe_at_stop`). ``latest_plan(trace_id)``: the fence's latest plan of a trace (or ``None``),
    ``service_name(payload)``: a span's service name, for the item. Nothing here raises into the fence but
    :meth:`write` and :meth:`update_late`, which its callers guard."""

    def __init__(
        self,
        config: TraceFenceConfig,
        sink: ReviewSink | None,
        telemetry: Telemetry,
        *,
        latest_plan: Callable[[str], TracePlan | None],
        service_name: Callable[[P], str],
        guard: ReviewGuard | None = None,
        meter_provider: Any = None,
    ) -> None:
        self.sink = sink
        self.review_classes = frozenset(config.review_classes)
        self.telemetry = telemetry
        self._latest_plan = latest_plan
        self._service_name = service_name
        self._guard = guard
        self._review_lock = threading.Lock()  # one write at a time (see write)
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
        # Refusals begin at _held_max (backlog_full); the traces acknowledged before they did are still planned and
        # reach the hold after it: room for as many again (the trace buffer's own bound), so none of them is dropped
        # (DECISIONS 977).
        self._held_drop_at = 2 * config.max_traces
        # Review items of traces with late spans whose update waits for REVIEW_UPDATE_INTERVAL_S:
        # trace id -> (service name, the step decisions planned meanwhile, by span and call id)
        self._deferred_reviews: OrderedDict[str, tuple[str, dict]] = OrderedDict()
        self._updated_at: OrderedDict[str, tuple[float, float]] = OrderedDict()  # trace -> (last chunk update, interval)
        self._retry_thread: threading.Thread | None = None
        self._retry_stop = threading.Event()
        self.spans = SpanKeeper(config)  # what each item keeps of its trace for the item page (issue 26)
        if sink is not None and getattr(sink, "on_error", False) is None:
            # The SQLite store reports a database file deleted or replaced under it (it logs and reopens):
            # counted in tracefence.errors, in every door.
            sink.on_error = lambda kind: telemetry.errors.add(1, {**telemetry.attributes, "error.type": kind})
        if sink is not None:
            meter = metrics.get_meter("otel_tracefence", meter_provider=meter_provider)
            instrument(meter, "tracefence.review.pending", lambda: [(len(self._held_reviews), telemetry.attributes)])

    def owes(self, replay_class: str) -> bool:
        """True when a trace of ``replay_class`` (its value) gets a review item: a sink, and the class is one of
        ``config.review_classes``."""
        return self.sink is not None and replay_class in self.review_classes

    def pending(self) -> int:
        """Review items not written yet: held after a failed write, or put off (chunks of a giant trace)."""
        with self._held_lock:
            return len(self._held_reviews) + len(self._deferred_reviews)

    def flush(self) -> None:
        """Write what is put off now, and try once more each item held after a failed write."""
        if self._deferred_reviews:
            self._write_deferred_reviews(all_now=True)
        if self._held_reviews:
            self._write_held_reviews()

    def stop_retries(self) -> None:
        """Stop the retry thread: it ends after its current attempt (at most one busy timeout)."""
        self._retry_stop.set()
        retry = self._retry_thread
        if retry is not None:
            retry.join(timeout=30)

    def close(self) -> None:
        """Count and log what is still held (lost: the last word on what the review queue lacks), close the sink."""
        with self._held_lock:
            lost = list(self._held_reviews)
            self._held_reviews.clear()
            self._set_aside.clear()
        if lost:
            self.telemetry.review_writes.add(len(lost), {**self.telemetry.attributes, "outcome": "dropped"})
            self.telemetry.errors.add(1, {**self.telemetry.attributes, "error.type": "review_dropped"})
            shown = ", ".join(lost[:100]) + (f" and {len(lost) - 100} more" if len(lost) > 100 else "")
            _log.error("tracefence %s: shutdown: %d review item(s) could not be written and are lost: traces %s", self.telemetry.attributes[COMPONENT], len(lost), shown)
        if self.sink is not None:
            guarded(self.telemetry, "review_close", self.sink.close)

    def owed_at_stop(self) -> list[str]:
        """The trace ids, in order, whose review item a stop under way may still owe: taken by its flush and not yet
        handed on with their item written (a review write still waiting on a locked database, or traces not reached).
        Empty outside a stop. Safe from any thread: the stop's caller logs them when the flush outlives its time."""
        with self._held_lock:
            return list(self._owed_at_stop)

    def owe_at_stop(self, trace_ids: Iterable[str]) -> None:
        with self._held_lock:
            self._owed_at_stop.update(dict.fromkeys(trace_ids))

    def paid_at_stop(self, trace_ids: Iterable[str]) -> None:
        with self._held_lock:
            for trace_id in trace_ids:
                self._owed_at_stop.pop(trace_id, None)

    def write_unplanned(self, items: list[tuple[TracePlan, str]], reason: str, until: float | None) -> None:
        """Write the review items of traces handed on without a plan (``(plan, service name)``), ``UNPLANNED_REVIEW_BATCH``
        per transaction (the sink's ``upsert_many``) until ``until`` (``time.monotonic()``); a transaction that
        fails is written again one item at a time, and two failures in a row end the writes (DECISIONS 290). Items
        not written by then, or whose write failed, are counted and logged with their trace ids. Never raises."""
        attrs = self.telemetry.attributes
        written, at, one_by_one_until, in_a_row = 0, 0, 0, 0
        lost: list[str] = []
        while at < len(items) and in_a_row < 2 and (until is None or time.monotonic() < until):
            batch = items[at : at + (1 if at < one_by_one_until else UNPLANNED_REVIEW_BATCH)]
            if guarded(self.telemetry, "review_write", lambda: self._upsert_many(batch)):
                written, in_a_row = written + len(batch), 0
                self.paid_at_stop(plan.trace_id for plan, _ in batch)
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

    def update_late(self, plan: TracePlan, payloads: Sequence[P], reviews: list[tuple[TracePlan, Sequence[P], str]]) -> None:
        """Update an existing review item: now (added to ``reviews``) when the trace's last write is older than
        ``REVIEW_UPDATE_INTERVAL_S``, else later (its latest plan, by the writer thread or the next flush)."""
        if self.sink is None:
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
            latest = self._latest_plan(trace_id)
            if latest is None:  # forgotten meanwhile: the steps planned since the last write, fenced (they were late)
                ordered = tuple(sorted(steps.values(), key=lambda d: d.step.order_key))
                latest = TracePlan(trace_id=trace_id, replay_class=ReplayClass.REVIEW, steps=(), partial=True)
                plan = replace(latest, steps=ordered)
            else:
                plan = with_steps_of(latest, list(steps.values()))
            reviews.append((plan, [], service))
        if reviews:
            guarded(self.telemetry, "late", lambda: self.write(reviews))

    def write(self, reviews: Sequence[tuple[TracePlan, Sequence[P], str]]) -> None:
        """Write the review items of ``reviews`` (``(plan, payloads, service name)``: the service name is the first
        one the payloads give, else the one given) that need review, in one transaction (:meth:`_write_reviews`).
        Each item counts once in ``tracefence.review.writes``: ``ok`` when written; when the write fails, or the sink
        is failing already (items are held), each is held for the retry thread (:meth:`_hold_review`)."""
        if self.sink is None:
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
        write_many = getattr(self.sink, "upsert_many", None)
        spans = self.spans.of(plan.trace_id for plan, _ in batch) if getattr(self.sink, "keeps_spans", False) else {}
        if write_many is not None and (len(batch) > 1 or spans):
            if spans:
                write_many(batch, spans=spans)
            else:
                write_many(batch)
            self.spans.written(spans)
            return
        for plan, service in batch:
            self.sink.upsert(plan, service_name=service)  # type: ignore[union-attr]

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
        latest = self._latest_plan(plan.trace_id)
        return plan if latest is None or latest is plan else with_steps_of(latest, plan.steps)

    def _needs_review(self, plan: TracePlan) -> bool:
        return plan.replay_class is not None and plan.replay_class.value in self.review_classes

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
                self.pin([plan.trace_id])
            else:
                plan = with_steps_of(plan, known[0].steps)
            self._held_generation += 1
            self._held_reviews[plan.trace_id] = (plan, service or (known[1] if known else ""), self._held_generation)
            while len(self._held_reviews) > self._held_drop_at:
                dropped.append(self._held_reviews.popitem(last=False)[0])
                self._set_aside.pop(dropped[-1], None)
            self._start_writer()
        if known is None:
            self.telemetry.review_writes.add(1, {**self.telemetry.attributes, "outcome": "failed"})
        if dropped:
            self.telemetry.review_writes.add(len(dropped), {**self.telemetry.attributes, "outcome": "dropped"})
            kept = "; their spans stay in the persistent queue, planned and written again at the next start" if self._guard is not None else ""
            self.telemetry.error(
                "review_dropped", f"{len(dropped)} review item(s) held past the bound of {self._held_drop_at} are lost{kept}: traces {', '.join(dropped[:20])}"
            )
        return True

    def pin(self, trace_ids: Sequence[str]) -> None:
        """Tell the guard these traces' review items are not durable (before their spans are handed on). Called
        with or without ``_held_lock`` (the guard takes only its own lock, and never calls back)."""
        if self._guard is not None and trace_ids:
            guarded(self.telemetry, "review_guard", lambda: self._guard.pin(trace_ids))  # type: ignore[union-attr]

    def _release(self, trace_ids: Sequence[str]) -> None:
        """Tell the guard these traces' review items are durable now."""
        if self._guard is not None and trace_ids:
            guarded(self.telemetry, "review_guard", lambda: self._guard.release(trace_ids))  # type: ignore[union-attr]

    def backlog_full(self) -> bool:
        """True while the review sink fails and the items held in memory fill their bound (``config.max_traces``):
        the service refuses new Export calls then (UNAVAILABLE / 503), rather than acknowledge traces whose item
        it would drop (DECISIONS 511). Traces acknowledged already still take the hold past it, up to twice the bound
        before an item is dropped (counted; DECISIONS 977)."""
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
