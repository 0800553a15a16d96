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

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import Decision, MalformedField, ReplayClass, StepDecision, ToolStep, TracePlan
from otel_tracefence.normalize import NormalizedTrace, SpanView, span_to_step, unread_activity_step
from otel_tracefence.normalize.trace import late_request, late_requests, quiet, untied_request
from otel_tracefence.pipeline.plan import PlannedTrace, plan_spans
from otel_tracefence.pipeline.write_index import MemoryWriteIndex
from otel_tracefence.planner import plan_trace
from otel_tracefence.planner.replay_class import replay_class as class_of

P = TypeVar("P")
FORGOTTEN_FACTOR = 2  # traces remembered by id and class only, as a multiple of decided_cache_size
_NO_WAITS: frozenset[str] = frozenset()
_UNTRACKED: Any = object()  # TraceBuffer._open has no entry for the trace (its None means: too many open spans to track)


def fail_closed(plan: TracePlan, late_span_ids: set[str] | frozenset[str], late_call_ids: set[str] | frozenset[str] = frozenset()) -> TracePlan:
    """``plan`` with every step recorded by a span in ``late_span_ids`` fenced, and every requested call no span
    records (``requested_only``) whose call id is in ``late_call_ids``: such a span (or the span requesting the
    call) arrived after its trace was decided, so the trace was decided before it was complete.

    ``decided_before_complete`` ranks as the last review rule, just before ``skip`` and
    ``replay`` (docs/DECISIONS.md 1 and 47): a step another rule already fences keeps its
    decision and gets the code after the fencing codes; a ``replay`` or ``skip`` becomes
    ``review`` with it first. The plan is flagged partial and its class recomputed (``review``).
    """
    if not late_span_ids and not late_call_ids:
        return plan
    decisions: list[StepDecision] = []
    for decision in plan.steps:
        step = decision.step
        late = step.call_id in late_call_ids if step.requested_only else step.span_id in late_span_ids
        if not late or reasons.DECIDED_BEFORE_COMPLETE in decision.reasons:
            decisions.append(decision)
        elif decision.decision in (Decision.REVIEW, Decision.CONFLICT):
            at = next((i for i, code in enumerate(decision.reasons) if code in reasons.NOTES), len(decision.reasons))
            codes = decision.reasons[:at] + (reasons.DECIDED_BEFORE_COMPLETE,) + decision.reasons[at:]
            decisions.append(replace(decision, reasons=codes))
        else:
            codes = (reasons.DECIDED_BEFORE_COMPLETE,) + tuple(c for c in decision.reasons if c not in reasons.NOT_FENCING)
            decisions.append(replace(decision, decision=Decision.REVIEW, reasons=codes))
    return replace(plan, steps=tuple(decisions), replay_class=class_of(decisions), partial=True)


def span_digest(view: SpanView) -> int:
    """A hash of a step's span as planning reads it (1 to 2**30 - 1): every field of its view but its ``sequence``
    (the arrival order), so two views the normalizer takes for one span (a redelivered copy,
    ``normalize.trace._same_span``) have the same digest, and a span that differs in name, attributes, status, times,
    events or parent almost surely has another. Remembered for the spans that hold a step (other spans remember 0):
    a late span under a remembered id is a redelivery only when its digest is the remembered one (docs/DECISIONS.md
    357). A value that is not hashable (an OTLP array) counts by its ``repr``."""
    head = (view.name, view.parent_span_id, view.start_time_unix_nano, view.end_time_unix_nano, view.status_code, view.status_message,
            view.kind, view.unreadable, view.dropped_attributes, view.dropped_events)  # fmt: skip
    attributes, events = view.attributes, view.events
    try:  # most values are str, int, float or bool: hashed as they are
        content = hash((head, tuple(attributes.items()) if attributes else (), tuple((e.name, tuple(e.attributes.items())) for e in events) if events else ()))
    except TypeError:  # a list (an OTLP array) or a map: its repr stands for it
        content = hash((head, _hashable(attributes), tuple((e.name, _hashable(e.attributes)) for e in events)))
    return (content & 0x3FFFFFFF) or 1  # never 0: 0 is what a span holding no step remembers


_PLAIN = (str, int, float, bool, bytes, type(None))


def _hashable(attributes: Any) -> tuple:
    return tuple((key, value if type(value) in _PLAIN else repr(value)) for key, value in attributes.items()) if attributes else ()


def most_restrictive(a: str | None, b: str | None) -> str | None:
    """The more restrictive of two replay class values (``None``: no class, a trace without tool steps)."""
    if a is None or b is None:
        return a if b is None else b
    return a if ReplayClass(a).rank >= ReplayClass(b).rank else b


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


@dataclass(frozen=True, slots=True)
class Late(Generic[P]):
    """A span whose trace was decided before it arrived; ``plan`` is set when it changed the trace's plan.

    ``replay_class`` is never less restrictive than a class already handed on for the trace;
    ``partial``: the trace's latest plan is flagged partial."""

    view: SpanView
    payload: P
    replay_class: str | None
    step_decision: Any | None  # the late span's own StepDecision, when it is a tool step
    plan: TracePlan | None
    partial: bool = False


@dataclass(frozen=True, slots=True)
class LateBatch(Generic[P]):
    """Late spans of one trace handed on together: ``spans`` in arrival order; ``plan`` is the trace's new plan
    when the batch held tool steps (re-planned once for the whole batch), else ``None``."""

    trace_id: str
    spans: list[Late[P]]
    plan: TracePlan | None
    previous_class: str | None = None  # the trace's class before this batch (its review item exists if it needed one)
    overflowing: bool = False  # a chunk of a trace past its bound whose root has not ended: more chunks will follow


@dataclass(slots=True)
class _Remembered:
    replay_class: str | None
    steps: list[ToolStep]  # the latest max_spans_per_trace steps at most: what a re-plan sees beside a batch
    plan: TracePlan | None = None  # the trace's latest plan
    span_ids: dict[str, int] = field(default_factory=dict)  # every span seen -> span_digest if it holds a step, else 0: a redelivered one is not a new call
    late_step_span_ids: set[str] = field(default_factory=set)  # steps recorded (or dispatched again) by late spans
    dispatched: set[str] = field(default_factory=set)  # steps (span ids) with dispatch attempt spans seen
    overflow: bool = False  # decided on max_spans_per_trace before its root ended: later spans are held in chunks
    root_ended: bool = False  # its local root span has been seen
    late_call_ids: set[str] = field(default_factory=set)  # requested calls no span records, requested by late spans


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
        self._decided: OrderedDict[str, _Remembered] = OrderedDict()
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
                    remembered = self._decided.get(trace_id)
                    if remembered is None and trace_id in self._forgotten:
                        # Decided long ago and forgotten but for its class: late all the same.
                        remembered = self._decided[trace_id] = _Remembered(self._forgotten.pop(trace_id), [])
                        self._trim_decided()
                    deciding = remembered is None and trace_id in self._deciding
                    if remembered is not None:
                        self._decided.move_to_end(trace_id)
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
        for trace_id, spans in late.items() if late is not None else ():
            if trace_id in waits:
                self._wait_decided(trace_id, timeout_s=5.0)  # its trace is being planned: be late against that plan
            for start in range(0, len(spans), cap):
                out.append(self._late_batch(trace_id, spans[start : start + cap]))
        return out

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
                trace_id, planned.plan, _digests(spans, planned), dispatched=set(planned.normalized.attempt_of.values()),
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
            self._decided[trace_id] = _Remembered(
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

    def _late(self, trace_id: str, spans: list[tuple[SpanView, P]], remembered: _Remembered) -> LateBatch[P]:
        # Caller holds _late_lock: the remembered state is changed in place, never copied per span.
        partial = remembered.plan is not None and remembered.plan.partial
        known = {d.step.span_id: d for d in remembered.plan.steps} if remembered.plan is not None else {}
        steps = remembered.steps
        by_span = {s.span_id: i for i, s in enumerate(steps) if s.span_id}
        added: list[ToolStep] = []
        changed = False  # a step added or dispatched again: the trace is re-planned, once for the batch
        kinds: list[tuple[SpanView, P, str, Any]] = []  # (view, payload, kind, step or known decision)
        talking: list[tuple[int, SpanView]] = []  # (index in kinds, view read) of spans read after the batch's steps
        for view, payload in spans:
            read = view if self._read_view is None else self._read_view(view, payload)
            # Tool activity no convention reads fails closed when late too.
            step = span_to_step(read, self._config) or unread_activity_step(read, self._config)
            seen = remembered.span_ids.get(view.span_id)
            # Hashed when it holds a step, or its id's span did (a model span standing for calls it could not read).
            digest = span_digest(read) if step is not None or seen else 0
            if seen == digest:
                # Redelivered (a client or collector retry): the same call, never a second execution.
                kinds.append((view, payload, "again", known.get(view.span_id)))
                continue
            remembered.span_ids[view.span_id] = digest
            if seen is not None:  # another span under a decided span's id: not a redelivery (DECISIONS 357)
                step, clashed = self._clash(view.span_id, step, remembered, steps, by_span)
                if step is None:
                    kinds.append((view, payload, "attempt" if clashed else "plain", None))
                    changed = changed or clashed
                    continue
            elif step is None:  # a request below a step, or a model span asking for calls, may change the plan too
                if not quiet(read):
                    talking.append((len(kinds), read))
                kinds.append((view, payload, "plain", None))
                continue
            # A stand-in for a refused span is a step of its own, never an attempt: what it was is not known (296);
            # so is a step under a clashing id, as in time (normalize_trace, DECISIONS 357).
            # A span that dropped data is held as its own step wherever it is, as in time (DECISIONS 252, 358).
            whole = read.unreadable is None and seen is None and not read.dropped_attributes and not read.dropped_events
            owner = by_span.get(view.parent_span_id) if view.parent_span_id and whole else None
            if owner is not None:  # a dispatch attempt of a step already planned: that step was decided too soon
                _fence_step(remembered, steps, owner, steps[owner], dispatch=True)
                kinds.append((view, payload, "attempt", None))
                changed = True
                continue
            if step.span_id:
                by_span[step.span_id] = len(steps)
            steps.append(step)
            added.append(step)
            remembered.late_step_span_ids.add(step.span_id)
            kinds.append((view, payload, "step", step))
        for at, read in talking:  # after the batch's steps: children end (and come) before the step they belong to
            kind, what = self._late_activity(read, remembered, steps, by_span, added)
            if kind != "plain":
                kinds[at] = (*kinds[at][:2], kind, what)
                changed = True
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
        mine = {id(d.step): d for d in plan.steps} if plan is not None else {}
        out = []
        for view, payload, kind, what in kinds:
            if kind == "again":
                out.append(Late(view, payload, remembered.replay_class, what, None, partial))
            elif kind in ("step", "attempt", "request"):
                out.append(Late(view, payload, kept, mine.get(id(what)) if what is not None else None, plan, True))
            else:
                out.append(Late(view, payload, kept, None, None, partial))
        return LateBatch(trace_id, out, plan, previous, remembered.overflow)

    def _clash(
        self, span_id: str, step: ToolStep | None, remembered: _Remembered, steps: list[ToolStep], by_span: dict[str, int]
    ) -> tuple[ToolStep | None, bool]:
        """A late span under the id of a span seen before that is not that span: as in time (``normalize_trace``,
        ``_distinct_spans``), the remembered step with that id, if any, is malformed at ``span_id`` (fenced), and so
        is the late span's own ``step``, if any; returns that step and whether a remembered step was changed."""
        bad = MalformedField("span_id", f"span id {span_id} is carried by a span that came after its trace was decided and is not the span "
                                        "seen before under that id (not a redelivery): which call the id names cannot be known")  # fmt: skip
        at = by_span.get(span_id)
        if at is not None:
            _fence_step(remembered, steps, at, replace(steps[at], malformed=steps[at].malformed + (bad,)), dispatch=False)
        return (replace(step, malformed=step.malformed + (bad,)) if step is not None else None), at is not None

    def _late_activity(
        self, read: SpanView, remembered: _Remembered, steps: list[ToolStep], by_span: dict[str, int], added: list[ToolStep]
    ) -> tuple[str, ToolStep | None]:
        """What a late span that records no tool step changes in its trace (``steps`` and ``added`` changed in place),
        as ``(kind, its own step or None)``: an HTTP request right below a step that is a dispatch or failed fences
        that step (``"attempt"``, counted as :func:`_fence_step` counts); one tied to no step is a ``review`` step of
        its own (``"step"``, ``late_request_untied``) in a trace with tool steps; requested calls no step records are steps
        of their own (``"request"``; ``"step"`` when the span's output holds calls that cannot be read: the step
        standing for them is the span's). ``("plain", None)`` when it changes nothing (docs/DECISIONS.md 270)."""
        owner = by_span.get(read.parent_span_id) if read.parent_span_id else None
        sent = late_request(read, steps[owner]) if owner is not None else None
        if sent is not None:
            step, dispatch = sent
            if not dispatch and step is steps[owner]:
                return "plain", None  # a safe request that did not fail changes nothing
            _fence_step(remembered, steps, owner, step, dispatch=dispatch)
            return "attempt", None
        # A dispatch or failed request tied to no step (spans in between are not remembered): its own step, fenced,
        # unless the trace has no tool step it could belong to (docs/DECISIONS.md 295).
        untied = untied_request(read, self._config) if owner is None and remembered.replay_class is not None else None
        if untied is not None:
            steps.append(untied)
            added.append(untied)
            remembered.late_step_span_ids.add(untied.span_id)
            return "step", untied
        requested = late_requests(read, steps, self._config)
        for step in requested:
            steps.append(step)
            added.append(step)
            if step.requested_only:
                remembered.late_call_ids.add(step.call_id)
            else:
                remembered.late_step_span_ids.add(step.span_id)
        if not requested:
            return "plain", None
        own = next((step for step in requested if step.span_id == read.span_id), None)
        return ("step", own) if own is not None else ("request", None)


def _digests(spans: list[tuple[SpanView, Any]], planned: PlannedTrace) -> dict[str, int]:
    """Every span id of a decided trace -> :func:`span_digest` of the span when it holds a step (a plan step or a
    dispatch attempt), else 0: hashing only the few step spans keeps the cost off the many others."""
    holding = {d.step.span_id for d in planned.plan.steps}
    holding.update(planned.normalized.attempt_of)
    return {view.span_id: span_digest(view) if view.span_id in holding else 0 for view, _ in spans}


def _fence_step(remembered: _Remembered, steps: list[ToolStep], index: int, step: ToolStep, *, dispatch: bool) -> None:
    """Put ``step`` (the remembered ``steps[index]``, maybe changed by a late span below it) in its place, fenced as
    decided before complete; ``dispatch``: the late span dispatched it again. A step's first dispatch span is its
    one dispatch (as the normalizer counts an attempt span), every later one is one more attempt."""
    owner_id = step.span_id
    if dispatch:
        if owner_id in remembered.dispatched:
            step = replace(step, attempts=step.attempts + 1)
        remembered.dispatched.add(owner_id)
    steps[index] = step
    remembered.late_step_span_ids.add(owner_id)


__all__ = ["Decided", "Late", "LateBatch", "NormalizedTrace", "TraceBuffer"]
