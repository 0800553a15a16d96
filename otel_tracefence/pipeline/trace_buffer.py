"""Holding spans by trace until the trace can be decided: the stateful part, apart from the rules.

Like the Collector's tail-sampling processor, a trace is decided when its local
root span has ended and its decision wait has passed, or earlier when a bound is
hit (then flagged partial). A door that sees spans start (the span processor)
reports them with :meth:`TraceBuffer.started`; a trace whose root has ended is
then decided as soon as none of its spans started here is still open, and the
decision wait is only the longest it waits for them (flagged partial when it
runs out with spans still open).

Spans of a trace decided earlier are "late": they are re-planned with the
remembered steps, so a late tool span still gets its own decision and the
review item is updated, never duplicated. The trace was decided before it was
complete, and its other spans may already have left with a class that did not
know of the late step: a late tool step therefore fails closed (:func:`fail_closed`,
decision ``review``, reason ``decided_before_complete``, the plan flagged
partial), and a late span never carries a class less restrictive than one
already handed on for its trace. A late span that is no tool step but changes the
plan (an HTTP request below a step that dispatched it again or failed, a model span
asking for a call no step records) fails closed the same way (docs/DECISIONS.md 270).
This is the one place that rule lives; every door (processor, exporter, service)
goes through it.

Cost stays linear in the spans of a trace, however large (issue 9). Late spans
are taken in batches (:meth:`TraceBuffer.add_batch`: the service gives one per
intake slice of at most 512 spans, the exporter one per export): a trace is
re-planned at most once per batch (in slices of at most ``max_spans_per_trace``
spans), its remembered state is changed in place, never copied per span, and
it remembers at most its latest ``max_spans_per_trace`` steps (late tool steps
fail closed whatever a re-plan sees; the review store keeps every step an item
ever had, docs/DECISIONS.md 71-73). A trace decided because it reached
``max_spans_per_trace`` before its root ended is *overflowing*: its later spans
are held again, in chunks bounded like a trace (same bound, same waits, same
eviction), and each chunk is handed on as one :class:`LateBatch` with one
re-plan, which sees the chunk's steps and as many earlier ones.

The buffer is generic over what a door carries beside each :class:`SpanView`
(an SDK ``ReadableSpan``, an OTLP protobuf span with its resource and scope).
It is thread-safe; planning runs outside its lock.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, Sequence, TypeVar

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass, TracePlan
from otel_tracefence.normalize import NormalizedTrace, SpanView
# Late, LateBatch and fail_closed are re-exported: importers of this module's old names keep working.
from otel_tracefence.pipeline.late_spans import (  # noqa: F401
    Late,
    LateBatch,
    Remembered,
    digests,
    fail_closed,
    late_results,
    most_restrictive,
    read_late,
    span_digest,
)
from otel_tracefence.pipeline.plan import PlannedTrace, plan_spans
from otel_tracefence.pipeline.write_index import MemoryWriteIndex
from otel_tracefence.planner import plan_trace

P = TypeVar("P")
FORGOTTEN_FACTOR = 2  # traces remembered by id and class only, as a multiple of decided_cache_size
_NO_WAITS: frozenset[str] = frozenset()
_UNTRACKED: Any = object()  # TraceBuffer._open has no entry for the trace (its None means: too many open spans to track)


@dataclass(slots=True)
class _Held(Generic[P]):
    first_seen: float
    spans: list[tuple[SpanView, P]] = field(default_factory=list)
    deadline: float | None = None  # monotonic seconds; set once a local root span has ended
    late: bool = False  # a chunk of an overflowing trace (decided already): handed on as one LateBatch


@dataclass(frozen=True, slots=True)
class Decided(Generic[P]):
    """A trace decided now: its spans (with the door's payloads) and its plan.

    ``planned`` is ``None`` when planning failed (``error`` says why): the door
    then hands the spans on as ``review`` (``Fence.hand_on_unplanned``, ``not_planned_error``), never drops them.
    """

    trace_id: str
    spans: list[tuple[SpanView, P]]
    planned: PlannedTrace | None
    error: Exception | None = None


class TraceBuffer(Generic[P]):
    """Spans held by trace id, bounded by ``config.max_traces`` and ``config.max_spans_per_trace``.

    ``decision_wait_ms`` (default ``config.decision_wait_ms``): how long to keep
    waiting for late children once the local root span has arrived. When the door
    reports span starts (:meth:`started`), a trace is decided as soon as its root
    has ended and none of its spans started here is open, and the wait is the
    longest it waits for the open ones. 0: decide when the root ends.
    ``max_wait_ms`` (0: no limit): how long a trace is held at most since its
    first span arrived; a trace whose root never came is then decided partial.

    ``read_view(view, payload)``: the view planning reads of a span, made from its payload when a door holds
    no view (the service holds span bytes only: it builds the views when the trace is planned). With it,
    the buffer keeps no view of a held span that has a payload and asks ``read_view(None, payload)`` for
    it when the trace is planned; a late span's view is given to ``read_view`` as it came. Without it,
    planning reads the views as they came.

    Memory: at most ``max_traces`` traces held and ``max_spans_per_trace`` spans each;
    open spans are tracked for at most ``max_traces`` traces and ``max_spans_per_trace``
    spans each (past that a trace falls back to the whole wait); ``decided_cache_size``
    decided traces are remembered. The bounds are read from ``config`` once, when the buffer is made.
    """

    def __init__(
        self,
        config: TraceFenceConfig,
        *,
        decision_wait_ms: float | None = None,
        max_wait_ms: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        read_view: Callable[[SpanView, Any], SpanView] | None = None,
    ) -> None:
        self._config = config
        # The writes of the traces decided here, which later traces' writes meet (retries across traces).
        self.write_index = MemoryWriteIndex(config.write_index_max_entries)
        # The bounds, read once: a setting is read through the config model's attribute hook, several times per span.
        self._max_traces, self._cap, self._decided_cap = config.max_traces, config.max_spans_per_trace, config.decided_cache_size
        self._read_view = read_view
        self._clock = clock
        self._wait_s = (config.decision_wait_ms if decision_wait_ms is None else decision_wait_ms) / 1000.0
        self._max_wait_s = max_wait_ms / 1000.0
        self._held: OrderedDict[str, _Held[P]] = OrderedDict()
        # Spans started in this process and not yet ended, by trace (only doors that see starts
        # fill it). ``None``: too many to track; the trace then waits its whole decision wait.
        self._open: OrderedDict[str, set[str] | None] = OrderedDict()
        self._decided: OrderedDict[str, Remembered] = OrderedDict()
        # Traces pushed out of the decided cache: their id and the class handed on, for
        # FORGOTTEN_FACTOR x decided_cache_size more traces, so a span of one still comes late
        # (and fails closed) instead of starting a new trace with a class of its own.
        self._forgotten: OrderedDict[str, str | None] = OrderedDict()
        # Traces being planned right now (popped, not yet remembered): their spans are late,
        # once the plan is remembered. Late spans are planned one at a time against the
        # latest remembered steps, so concurrent late spans of one trace lose none. One condition
        # for all of them (notified when a trace leaves), not an Event per trace: most are never waited for.
        self._deciding: set[str] = set()
        self._late_lock = threading.Lock()
        self._lock = threading.Lock()
        self._decided_now = threading.Condition(self._lock)
        self._waiting = 0  # threads waiting on _decided_now (caller holds the lock to read or change it)

    def __len__(self) -> int:
        return len(self._held)

    def started(self, trace_id: str, span_id: str) -> None:
        """A span of ``trace_id`` started in this process: its trace is not complete until it ends."""
        with self._lock:
            ids = self._open.get(trace_id, _UNTRACKED)  # one look-up for every span but a trace's first
            if ids is _UNTRACKED:
                if trace_id in self._decided or trace_id in self._deciding or trace_id in self._forgotten:
                    return  # it will be late whatever happens (an overflowing trace keeps its open spans tracked)
                ids = self._open[trace_id] = set()
                while len(self._open) > self._max_traces:  # max_traces > 0: never the trace just added
                    self._open.popitem(last=False)  # forgetting costs only the whole decision wait
            if ids is None:
                return
            if len(ids) >= self._cap:
                self._open[trace_id] = None
            else:
                ids.add(span_id)

    def _incomplete(self, trace_id: str, held: _Held[P]) -> bool:
        # Caller holds the lock: the root has not ended, or spans known to have started are still open
        # (or were too many to track).
        if held.deadline is None:
            return True
        if trace_id not in self._open:
            return False
        ids = self._open[trace_id]
        return ids is None or bool(ids)

    def add(self, view: SpanView, payload: P, *, local_root: bool) -> list[Decided[P] | LateBatch[P]]:
        """Hold one finished span; returns whatever can be handed on now (decided traces, or this span if late)."""
        return self.add_batch([(view, payload, local_root)])

    def add_batch(self, items: Sequence[tuple[SpanView, P, bool]]) -> list[Decided[P] | LateBatch[P]]:
        """Hold finished spans ``(view, payload, local_root)``, in order; returns whatever can be handed on now.

        Late spans of one trace in ``items`` come back as one :class:`LateBatch` (one re-plan), in slices of at
        most ``max_spans_per_trace`` spans."""
        to_decide: list[tuple[str, _Held[P], bool, bool]] = []
        late: dict[str, list[tuple[SpanView, P]]] | None = None  # made for the first late span: most batches have none
        waits: set[str] | frozenset[str] = _NO_WAITS
        cap, max_traces = self._cap, self._max_traces
        held_by_trace, open_by_trace, keep_views = self._held, self._open, self._read_view is None
        with self._lock:
            for view, payload, local_root in items:
                trace_id = view.trace_id
                held = held_by_trace.get(trace_id)
                if held is None or held.late:
                    # A trace held, not as a chunk of an overflowing one, is in none of _decided, _deciding and
                    # _forgotten (it leaves _held before it enters them): only a trace's first span, and the spans of
                    # a trace decided already, are looked up there.
                    remembered, deciding = self._decided_state(trace_id)
                    if deciding or (remembered is not None and not remembered.overflow):
                        if late is None:
                            late, waits = {}, set()
                        if deciding:
                            waits.add(trace_id)
                        group = late.setdefault(trace_id, [])
                        group.append((view, payload))
                        continue
                    if held is None:
                        held = held_by_trace[trace_id] = _Held(self._clock(), late=remembered is not None)
                        if remembered is not None and remembered.root_ended:
                            held.deadline = self._clock() + self._wait_s
                open_ids = open_by_trace.get(trace_id)
                if open_ids:
                    open_ids.discard(view.span_id)
                held.spans.append((view if keep_views or payload is None else None, payload))
                if local_root:
                    held.deadline = self._clock() + self._wait_s
                if held.deadline is not None:  # the root has ended
                    # Complete: the root ended with no wait, or it ended and so has every span started here.
                    if self._wait_s <= 0 or (open_ids is not None and not open_ids):
                        # Complete as it stands, even when this span reaches the bound: not partial.
                        to_decide.append((trace_id, self._pop(trace_id), False, False))
                    elif len(held.spans) >= cap:  # the bound: decided as it stands
                        to_decide.append((trace_id, self._pop(trace_id), True, False))
                elif len(held.spans) >= cap:
                    # The bound before the root ended: decided as it stands; the trace overflows, keeping its open spans tracked.
                    to_decide.append((trace_id, self._pop(trace_id, keep_open=True), True, True))
                while len(held_by_trace) > max_traces:
                    oldest, evicted = next(iter(held_by_trace.items()))
                    partial = self._incomplete(oldest, evicted)
                    to_decide.append((oldest, self._pop(oldest), partial, False))
        out: list[Decided[P] | LateBatch[P]] = []
        for trace_id, held, partial, overflow in to_decide:
            out.extend(self._decide(trace_id, held, partial, overflow))
        if late is not None:
            self._hand_on_late(late, waits, out)
        return out

    def _decided_state(self, trace_id: str) -> tuple[Remembered | None, bool]:
        """A trace's remembered state if it was decided (brought back when forgotten but for its class), and whether
        it is being decided now. Caller holds the lock."""
        remembered = self._decided.get(trace_id)
        if remembered is None and trace_id in self._forgotten:
            # Decided long ago and forgotten but for its class: late all the same.
            remembered = self._decided[trace_id] = Remembered(self._forgotten.pop(trace_id), [])
            self._trim_decided()
        deciding = remembered is None and trace_id in self._deciding
        if remembered is not None:
            self._decided.move_to_end(trace_id)
        return remembered, deciding

    def _hand_on_late(self, late: dict[str, list[tuple[SpanView, P]]], waits: set[str] | frozenset[str], out: list) -> None:
        """The late spans of a batch, by trace, as :class:`LateBatch` es of at most ``max_spans_per_trace`` spans."""
        cap = self._cap
        for trace_id, spans in late.items():
            if trace_id in waits:
                self._wait_decided(trace_id, timeout_s=5.0)  # its trace is being planned: be late against that plan
            for start in range(0, len(spans), cap):
                out.append(self._late_batch(trace_id, spans[start : start + cap]))

    def traces_holding(self, span_ids: set[str], span_id_of: Callable[[SpanView | None, P], str]) -> dict[str, list[str]]:
        """``{span id: [trace id, ...]}``: for each of ``span_ids`` (hex), the traces held or remembered (decided,
        their span ids kept) that hold a span with that id, held ones first; a span id is unique only within a trace,
        so there may be more than one. ``span_id_of(view or None, payload)``: the id of a held span (the buffer keeps
        no view of most). Traces remembered by id and class only (forgotten) keep no span ids: never found. Reads
        every held span (one look-up per remembered trace): for rare callers (docs/DECISIONS.md 296)."""
        found: dict[str, list[str]] = {}
        with self._lock:
            for trace_id, held in self._held.items():
                for span_id in {span_id_of(view, payload) for view, payload in held.spans} & span_ids:
                    found.setdefault(span_id, []).append(trace_id)
            for trace_id, remembered in self._decided.items():
                for span_id in remembered.span_ids.keys() & span_ids:
                    if trace_id not in found.get(span_id, ()):  # an overflowing trace is held (a chunk) and remembered
                        found.setdefault(span_id, []).append(trace_id)
        return found

    def latest_plan(self, trace_id: str) -> TracePlan | None:
        """The trace's latest plan (late spans included), while it is remembered."""
        with self._lock:
            remembered = self._decided.get(trace_id)
        return remembered.plan if remembered is not None else None

    def _deadline(self, held: _Held[P]) -> float | None:
        limit = held.first_seen + self._max_wait_s if self._max_wait_s > 0 else None
        if held.deadline is None:
            return limit
        return held.deadline if limit is None else min(held.deadline, limit)

    def due(self) -> list[Decided[P] | LateBatch[P]]:
        """Decide every trace whose decision wait or maximum wait has run out."""
        return [out for taken in self.take_due() for out in self.decide_taken(taken)]

    def take_due(self) -> list[tuple[str, bool, Any]]:
        """Take out every trace whose decision wait or maximum wait has run out, as :meth:`take_all` does."""
        now = self._clock()
        with self._lock:
            ready = [(tid, held) for tid, held in self._held.items() if (d := self._deadline(held)) is not None and d <= now]
            return [(tid, partial, self._pop(tid)) for tid, held in ready for partial in [self._incomplete(tid, held)]]

    def next_deadline(self) -> float | None:
        """The earliest moment (``clock`` seconds) a held trace becomes due, or ``None``."""
        with self._lock:
            deadlines = [d for held in self._held.values() if (d := self._deadline(held)) is not None]
        return min(deadlines) if deadlines else None

    def drain(self) -> list[Decided[P] | LateBatch[P]]:
        """Decide everything held: traces whose local root has not ended are flagged partial."""
        return [out for taken in self.take_all() for out in self.decide_taken(taken)]

    def take_all(self) -> list[tuple[str, bool, Any]]:
        """Take every held trace out of the buffer, to be decided one at a time (:meth:`decide_taken`) or given up
        (:meth:`give_up`): ``(trace id, partial, held)`` each. :meth:`drain` is both steps at once."""
        with self._lock:
            return [(tid, self._incomplete(tid, held), self._pop(tid)) for tid, held in list(self._held.items())]

    def decide_taken(self, taken: tuple[str, bool, Any]) -> list[Decided[P] | LateBatch[P]]:
        """Decide one trace :meth:`take_all` took (as :meth:`drain` does)."""
        trace_id, partial, held = taken
        return self._decide(trace_id, held, partial)

    def give_up(self, taken: Sequence[tuple[str, bool, Any]]) -> dict[str, list[tuple[SpanView | None, P]]]:
        """The spans of traces :meth:`take_all` took that will not be planned (a stop's deadline), by trace id;
        they are no longer being decided."""
        out = {}
        for trace_id, _, held in taken:
            self._done_deciding(trace_id)
            out[trace_id] = list(held.spans)
        return out

    def _pop(self, trace_id: str, *, keep_open: bool = False) -> _Held[P]:
        # Caller holds the lock and decides the trace next (_decide). The held entry stays readable until popped.
        held = self._held.pop(trace_id, None)
        if not keep_open:
            self._open.pop(trace_id, None)
        if held is None:
            return _Held(self._clock())
        if not held.late:
            self._deciding.add(trace_id)
        return held

    def _decide(self, trace_id: str, held: _Held[P], partial: bool, overflow: bool = False) -> list[Decided[P] | LateBatch[P]]:
        spans = held.spans
        read = self._read_view
        if read is not None:
            try:
                spans = [(read(view, payload), payload) for view, payload in spans]
            except Exception as exc:  # noqa: BLE001 - a bug must not lose the trace's spans
                self._done_deciding(trace_id)
                return [Decided(trace_id, spans, None, exc)]
        if held.late:  # a chunk of an overflowing trace: one re-plan for all of it; it overflows on until its root ends
            batch = self._late_batch(trace_id, spans, root_ended=held.deadline is not None, overflow=held.deadline is None)
            return [batch] if batch.spans else []
        try:
            planned = plan_spans(trace_id, [view for view, _ in spans], self._config, partial=partial)
            planned = PlannedTrace(self.write_index.plan_against(planned.plan, self._config.limits.max_related_call_ids), planned.normalized)
            self._remember(  # and no longer being planned, under the same lock
                trace_id, planned.plan, digests(spans, planned), dispatched=set(planned.normalized.attempt_of.values()),
                overflow=overflow, root_ended=held.deadline is not None,
            )
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the trace's spans
            self._done_deciding(trace_id)
            return [Decided(trace_id, spans, None, exc)]
        return [Decided(trace_id, spans, planned)]

    def _wait_decided(self, trace_id: str, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until ``trace_id`` is no longer being planned."""
        with self._lock:
            self._waiting += 1
            try:
                self._decided_now.wait_for(lambda: trace_id not in self._deciding, timeout=timeout_s)
            finally:
                self._waiting -= 1

    def _done_deciding(self, trace_id: str) -> None:
        """``trace_id`` is planned (or its planning failed): wake the threads waiting to be late against it."""
        with self._lock:
            self._not_deciding(trace_id)

    def _not_deciding(self, trace_id: str) -> None:
        # Caller holds the lock.
        self._deciding.discard(trace_id)
        if self._waiting:
            self._decided_now.notify_all()

    def _late_batch(
        self, trace_id: str, spans: list[tuple[SpanView, P]], *, root_ended: bool = False, overflow: bool | None = None
    ) -> LateBatch[P]:
        """Hand on late spans of one trace; ``root_ended``/``overflow``: what a chunk tells of the trace."""
        with self._late_lock:
            with self._lock:
                remembered = self._decided.get(trace_id)
                if remembered is not None:
                    remembered.root_ended = remembered.root_ended or root_ended
                    if overflow is not None:
                        remembered.overflow = overflow
            if remembered is None:  # the trace's planning failed: nothing is known of it
                return LateBatch(trace_id, [Late(view, payload, None, None, None) for view, payload in spans], None)
            try:
                return self._late(trace_id, spans, remembered)
            except Exception:  # noqa: BLE001 - hand the spans on with what is known
                # They may hold a tool step nobody planned: fail closed (a trace with tool steps says review).
                fenced = ReplayClass.REVIEW.value if remembered.replay_class is not None else None
                return LateBatch(trace_id, [Late(view, payload, fenced, None, None, True) for view, payload in spans], None)

    def _remember(
        self, trace_id: str, plan: TracePlan, span_ids: dict[str, int], late_steps: set[str] | None = None, dispatched: set[str] | None = None,
        *, overflow: bool = False, root_ended: bool = False,
    ) -> None:
        with self._lock:
            self._decided[trace_id] = Remembered(
                plan.replay_class.value if plan.replay_class else None, [d.step for d in plan.steps], plan, span_ids, late_steps or set(),
                dispatched or set(), overflow, root_ended,
            )
            self._decided.move_to_end(trace_id)
            self._forgotten.pop(trace_id, None)
            self._trim_decided()
            self._not_deciding(trace_id)  # under the same lock: one lock fewer for every trace decided

    def _trim_decided(self) -> None:
        # Caller holds the lock.
        while len(self._decided) > self._decided_cap:
            forgotten, remembered = self._decided.popitem(last=False)
            self._forgotten[forgotten] = remembered.replay_class
        while len(self._forgotten) > FORGOTTEN_FACTOR * self._decided_cap:
            self._forgotten.popitem(last=False)

    def _late(self, trace_id: str, spans: list[tuple[SpanView, P]], remembered: Remembered) -> LateBatch[P]:
        # Caller holds _late_lock: the remembered state is changed in place, never copied per span.
        partial = remembered.plan is not None and remembered.plan.partial
        kinds, added, changed = read_late(spans, remembered, self._config, self._read_view)
        steps = remembered.steps
        plan = None
        kept = previous = remembered.replay_class
        if added or changed:
            called = {s.call_id for s in added if s.call_id and not s.requested_only}
            if called:  # a requested call now recorded by its tool span
                steps[:] = [s for s in steps if not (s.requested_only and s.call_id in called)]
            # A chunk of an overflowing trace is planned beside as many earlier steps as it brings, so each step
            # costs a bounded share of planning however long the trace; other late batches see every remembered step.
            window = steps[-2 * len(added) :] if remembered.overflow and added else steps
            plan = fail_closed(
                plan_trace(trace_id, window, partial=True, limits=self._config.limits), remembered.late_step_span_ids, remembered.late_call_ids
            )
            planned = plan.replay_class.value if plan.replay_class else None
            kept = most_restrictive(planned, remembered.replay_class)
            if kept != planned:  # never below a class already handed on for this trace
                plan = replace(plan, replay_class=ReplayClass(kept))
            with self._lock:
                remembered.plan, remembered.replay_class = plan, kept
                # The next re-plan sees the latest max_spans_per_trace steps beside its batch, never the whole trace.
                if len(steps) > self._cap:
                    del steps[: len(steps) - self._cap]
            partial = True
        return late_results(trace_id, kinds, remembered, plan, kept, previous, partial)


__all__ = ["Decided", "Late", "LateBatch", "NormalizedTrace", "TraceBuffer"]
