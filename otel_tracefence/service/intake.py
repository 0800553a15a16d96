"""Received spans waiting to be read and held: Export acknowledges at once, one worker does the rest.

The gRPC thread only checks ids and queues the spans; reading them into views,
holding them by trace and (when a bound or a root decides a trace) planning
happen here, off the call. The queue is bounded in spans and in request bytes,
and the bound counts the request being accepted: :meth:`Intake.reserve` takes
room for a whole request before any of it is read, or says why not. A request
that would take the queue past either bound is refused for now (``UNAVAILABLE``
with a retry delay); one that alone exceeds a bound can never be accepted
(``RESOURCE_EXHAUSTED``, naming the limit).

Fairness: requests are queued per source (the client's address, as gRPC names
its peer) and the worker takes them in turns, ``SLICE_SPANS`` spans at a time,
so one client's giant trace never holds another client's spans back by more than
a slice per queued source. One source's requests are read in the order they came.
Each slice goes to the fence as one batch (:meth:`~otel_tracefence.pipeline.fence.Fence.add_batch`):
late spans of one trace in it are re-planned once.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Sequence

from otel_tracefence.pipeline.fence import Fence
from otel_tracefence.normalize import SpanView
from otel_tracefence.service.otlp_spans import Orphan, OtlpItem, held_span_id, held_view, to_request
from otel_tracefence.service.persistent_queue import PersistentQueue

_log = logging.getLogger("otel_tracefence.service")
SLICE_SPANS = 512  # spans read from one source's request before the next source's turn


@dataclass(frozen=True)
class Reservation:
    """Room taken in the intake queue for one request: ``spans`` and ``bytes`` (its encoded size)."""

    spans: int
    bytes: int


class IntakeRefusal(Exception):
    """The request cannot be queued. ``permanent``: it alone exceeds a bound (never retry it as it is)."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class _Entry:
    """One queued request: its spans, the room it took, how many of its spans were read, and its refused spans whose
    parent is looked up once its spans are held (``orphans``)."""

    __slots__ = ("items", "reservation", "done", "orphans")

    def __init__(self, items: list[OtlpItem], reservation: Reservation, orphans: Sequence[Orphan] = ()) -> None:
        self.items, self.reservation, self.done, self.orphans = items, reservation, 0, orphans


class Intake:
    """A bounded queue of received spans for one :class:`~otel_tracefence.pipeline.fence.Fence`, drained by a thread."""

    def __init__(self, fence: Fence[OtlpItem], max_spans: int, max_bytes: int | None = None, persistent: PersistentQueue | None = None) -> None:
        self.persistent = persistent  # every request written there before put() returns (before the acknowledgement)
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.depth = 0  # spans queued or reserved
        self.depth_bytes = 0  # request bytes queued or reserved
        self._fence = fence
        self._sources: OrderedDict[str, deque[_Entry]] = OrderedDict()  # queued requests by source, in turn order
        self._cond = threading.Condition()
        self._busy = False
        self._closing = False
        self._abandoned = False  # the drain's time ran out: the worker stops with spans still queued
        self._current: _Entry | None = None  # the request being read
        self.handed_spans = 0  # spans given to the fence (held, decided, or passed through)
        self._sequence = 0
        self._thread = threading.Thread(target=self._run, name="tracefence-intake", daemon=True)
        self._thread.start()
    def stand_in(self, view: SpanView) -> None:
        """Give the fence a view standing for a refused span (``otlp_spans.stand_in``): planned, never
        forwarded, not counted among the spans handed on."""
        self._fence.add(view, None, local_root=False)

    def full(self) -> bool:
        return self.depth >= self.max_spans or (self.max_bytes is not None and self.depth_bytes >= self.max_bytes)

    def check_size(self, *, spans: int | None = None, size: int | None = None) -> None:
        """Raise a permanent :class:`IntakeRefusal` when a request of ``spans`` spans or ``size`` bytes alone
        exceeds the queue's bound."""
        if size is not None and self.max_bytes is not None and size > self.max_bytes:
            raise IntakeRefusal(
                f"the request is {size} bytes, more than the whole intake queue holds (service.intake_queue_bytes = {self.max_bytes}); "
                "send it in smaller batches",
                permanent=True,
            )
        if spans is not None and spans > self.max_spans:
            raise IntakeRefusal(
                f"the request has {spans} spans, more than the whole intake queue holds (service.intake_queue_spans = {self.max_spans}); "
                "send it in smaller batches",
                permanent=True,
            )

    def reserve(self, spans: int, size: int) -> Reservation:
        """Take room for a request of ``spans`` spans and ``size`` bytes, or raise :class:`IntakeRefusal`
        (permanent when it alone exceeds a bound; else the queue is too full for it now)."""
        self.check_size(spans=spans, size=size)
        with self._cond:
            if self.depth + spans > self.max_spans or (self.max_bytes is not None and self.depth_bytes + size > self.max_bytes):
                bytes_part = f", {self.depth_bytes}/{self.max_bytes} bytes" if self.max_bytes is not None else ""
                raise IntakeRefusal(
                    f"intake queue is {self.depth}/{self.max_spans} spans{bytes_part} full; a request of {spans} spans and {size} bytes "
                    "does not fit; retry later",
                    permanent=False,
                )
            self.depth += spans
            self.depth_bytes += size
        return Reservation(spans, size)

    def release(self, reservation: Reservation) -> None:
        """Give back room taken by :meth:`reserve` and not used."""
        with self._cond:
            self.depth -= reservation.spans
            self.depth_bytes -= reservation.bytes
            self._cond.notify_all()

    def put(
        self, items: list[OtlpItem], reservation: Reservation | None = None, source: str = "", *, persisted: bool = False, orphans: Sequence[Orphan] = ()
    ) -> None:
        """Queue one Export call's valid spans, in the room ``reservation`` took (without one, room is taken now,
        past the bound if need be). ``source``: who sent them (requests of one source are read in order; sources
        take turns). With a persistent queue, the spans are written to it first (``persisted``: they are
        there already, replayed); when that write fails, the room is given back and :class:`IntakeRefusal`
        is raised (not permanent: the client retries), so nothing unwritten is acknowledged. ``orphans``: the
        request's spans refused for their trace id whose parent is not in it; once the spans queued before them are
        held, each stands in every trace the buffer holds or remembers with its parent (:meth:`_adopt`; not persisted)."""
        if reservation is None:
            reservation = Reservation(len(items), 0)
            with self._cond:
                self.depth += reservation.spans
        if not items and not orphans:
            self.release(reservation)
            return
        if self.persistent is not None and not persisted and items:
            try:
                self.persistent.append(to_request(items)[0], (item.span for item in items))
            except Exception as exc:  # noqa: BLE001 - a full or unwritable disk: refuse rather than acknowledge
                self.release(reservation)
                raise IntakeRefusal(f"the persistent queue cannot take the request ({exc}); retry later", permanent=False) from exc
        with self._cond:
            self._sources.setdefault(source, deque()).append(_Entry(items, reservation, orphans))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._sources and not self._closing:
                    self._cond.wait()
                if not self._sources or self._abandoned:
                    return
                source, entries = next(iter(self._sources.items()))
                entry = entries[0]
                self._busy = True
                self._current = entry
            try:
                self._hold(entry.items[entry.done : entry.done + SLICE_SPANS])
                if entry.orphans and entry.done >= len(entry.items):
                    self._adopt(entry.orphans)
            finally:
                with self._cond:
                    if entry.done >= len(entry.items) and not self._abandoned and entries and entries[0] is entry:
                        entries.popleft()
                        if not entries and self._sources.get(source) is entries:
                            del self._sources[source]
                        self.depth -= entry.reservation.spans
                        self.depth_bytes -= entry.reservation.bytes
                    if source in self._sources:
                        self._sources.move_to_end(source)  # the next source's turn
                    self._busy = False
                    self._current = None
                    self._cond.notify_all()

    def _hold(self, items: list[OtlpItem]) -> None:
        """Read ``items`` (the next slice of the current request) into views and give them to the fence as one batch."""
        with self._cond:  # a drain whose time ran out stops before the slice, and counts it as not read
            if self._abandoned:
                return
            if self._current is not None:
                self._current.done += len(items)
            self.handed_spans += len(items)  # one count per slice: reading a span is cheap, planning comes after
        batch = []
        try:
            for item in items:
                try:
                    view = held_view(item, self._sequence)
                except Exception as exc:  # noqa: BLE001 - one unreadable span never loses the others
                    self._fence.pass_through([item], "intake", exc)
                    continue
                self._sequence += 1
                batch.append((view, item, view.parent_span_id is None))
        finally:
            if batch:
                self._fence.add_batch(batch)

    def _adopt(self, orphans: Sequence[Orphan]) -> None:
        """Stand each of ``orphans`` in every trace the buffer holds or remembers that holds its parent (a span id is
        unique only within a trace: every such trace may have lost it), as a ``child_span_unread`` step; one that
        names a parent no such trace holds stands in none (docs/DECISIONS.md 296). Never raises."""
        try:
            found = self._fence.buffer.traces_holding({o.parent_span_id for o in orphans}, held_span_id)
            for o in orphans:
                for trace_id in found.get(o.parent_span_id, ()):
                    self._fence.add(o.view(trace_id), None, local_root=False)
        except Exception:  # noqa: BLE001 - the spans were refused and counted already; the intake goes on
            _log.exception("could not look up the parents of %d refused span(s)", len(orphans))

    def drain(self, timeout_s: float = 30.0) -> int:
        """Hold everything queued, then stop the worker, within ``timeout_s``. Returns the spans not read when the
        time ran out (queued, or later in the request being read): they are never held."""
        with self._cond:
            done = self._cond.wait_for(lambda: not self._sources and not self._busy, timeout=timeout_s)
            self._closing = True
            self._abandoned = not done
            left = sum(len(entry.items) - entry.done for entries in self._sources.values() for entry in entries)
            self._cond.notify_all()
        self._thread.join(timeout=timeout_s if done else 0.1)
        return left

    def take_unread(self) -> list[OtlpItem]:
        """After a :meth:`drain` whose time ran out: the spans it never read (queued, or later in the request being
        read), in the order they came per source, taken out of the queue; counted in :attr:`handed_spans` (the stop
        gives them to the fence, unplanned)."""
        with self._cond:
            if not self._abandoned:
                return []
            unread = [item for entries in self._sources.values() for entry in entries for item in entry.items[entry.done :]]
            self._sources.clear()
            self.handed_spans += len(unread)
            return unread
