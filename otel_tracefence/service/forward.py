"""Forwarding decided spans: a bounded queue per target, drained by one worker thread each.

Targets: upstream OTLP/gRPC endpoints, sent through the OpenTelemetry SDK's own
``OTLPSpanExporter`` (its TLS, headers, compression and retry on the
OTLP-retryable status codes, honouring the server's ``RetryInfo`` delay), or,
with no upstream, an OTLP/JSON lines file.

What an upstream answers decides what happens to a batch, as the OTLP
specification's table of gRPC codes says ("OTLP/gRPC Response", "Failures"):

* retryable (``CANCELLED``, ``DEADLINE_EXCEEDED``, ``ABORTED``, ``OUT_OF_RANGE``,
  ``UNAVAILABLE``, ``DATA_LOSS``; ``RESOURCE_EXHAUSTED`` only with a
  ``RetryInfo``): the exporter retries within its deadline; after that the batch
  stays at the head of its queue and is tried again after a pause (0.5 s,
  doubling up to 30 s, or the server's ``RetryInfo`` delay; new work does not cut
  it short, a shutdown's drain does);
* too large (``RESOURCE_EXHAUSTED`` without ``RetryInfo``: the upstream's
  receive limit, or our own send limit): the batch is split in two, down to
  single spans; a single span still refused can never be delivered;
* any other code is permanent: the batch is dropped.

Batches are sized under the upstream's ``max_message_bytes`` up front, so a
split is only needed when that setting is above the upstream's real limit; a
span that alone exceeds it is dropped before any attempt. Every dropped span is
counted (``dropped_spans``, ``tracefence.forward.dropped`` by ``reason``) and
logged with its trace id. Past the queue bound (in spans) the oldest batches are
dropped and counted; at shutdown, whatever the drain could not send is counted
too (``reason=shutdown``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable, Iterable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_tracefence.core.log_rate import RateLog
from otel_tracefence.service.otlp_bytes import LazyRequest, SpanHead, lazy_spans
from otel_tracefence.service.otlp_spans import lazy_request, split_request
# The targets and the outcome of a send, re-exported: importers of this module's old names keep working.
from otel_tracefence.service.targets import RETRY, SENT, FileTarget, Outcome, Request, SendResult, Target, encode  # noqa: F401
from otel_tracefence.service.upstream_grpc import RETRYABLE_CODES, SDK_EXPORTER_LOGGER, UpstreamTarget, classify  # noqa: F401

_log = logging.getLogger("otel_tracefence.service")
RATE_WEIGHT = 0.2  # weight of the latest send in ``Forwarder.send_rate``
PAUSE_AFTER_FAILURE_S = (0.5, 30.0)  # first and longest pause before a failed batch is tried again
DRAIN_RETRY_PAUSE_S = 0.25  # the longest pause after a failure while a shutdown drains
MAX_BATCH_SPANS = 8192  # queued requests are merged into one send up to this many spans (the Collector's and rotel's default)...
MAX_BATCH_BYTES = 4 * 1024 * 1024  # ...and this size, for a target with no message size limit of its own
MIN_BATCH_BYTES = 64 * 1024  # an upstream refusing batches as too large never shrinks merging below this


def _trace_ids(request: Request, limit: int = 20) -> list[str]:
    seen: dict[str, None] = {}
    for span in lazy_spans(lazy_request(encode(request))):
        seen.setdefault(SpanHead.FromString(span).trace_id.hex())
        if len(seen) >= limit:
            break
    return list(seen)


def _describe(span: bytes) -> str:
    ids = SpanHead.FromString(span)
    return f"span {ids.span_id.hex()} of trace {ids.trace_id.hex()}"


class Forwarder:
    """A bounded queue of requests for one target, drained by a worker thread.

    ``put`` never blocks. A request larger than the target's ``max_message_bytes``
    is cut into pieces under it first (a span that alone exceeds it is dropped).
    A request put behind one that is not being sent yet is merged into it (up to
    ``MAX_BATCH_SPANS`` spans, a sixteenth of the bound, and the target's
    message size), so a trace-at-a-time producer still makes few, large upstream
    calls. ``batch_wait_s``: how long the worker lets a batch under those sizes
    fill before sending it (as the Collector's batch processor ``timeout``; 0:
    send at once); a full batch, a second one queued behind it, or a drain sends
    at once. ``depth`` is the number of spans waiting. ``put`` returns a ticket:
    :meth:`wait_attempted` waits until the request has had its first attempt (the
    router of ``serve --workers N`` paces its clients by its workers so). Counters are attributes
    (``sent_spans``, ``dropped_spans``, ``failures``) and are also reported
    through the service's telemetry: ``on_drop(spans, reason)`` with reason
    ``queue_full``, ``too_large``, ``rejected``, ``upstream_rejected`` or ``shutdown``.
    """

    def __init__(
        self, target: Target, max_spans: int, on_drop: Callable[..., None] | None = None, on_failure=None,
        on_settled: Callable[[Iterable[bytes]], None] | None = None, *, batch_wait_s: float = 0.0,
    ) -> None:
        # ``on_settled(spans)``: spans this queue is done with, sent or dropped for good (the persistent queue
        # deletes them); spans left at shutdown are not settled, and with ``on_settled`` they are kept, not dropped.
        self.target = target
        self._on_settled = on_settled
        self.kept_spans = 0  # left at shutdown in the persistent queue, for the next start
        self.max_spans = max_spans
        self.batch_wait_s = batch_wait_s
        self.max_bytes = getattr(target, "max_message_bytes", None)
        # Each entry: [request (see Request), spans, bytes (an upper bound of its serialized size), end]; ``end``:
        # ``put_spans`` once its last part was put (entries are sent in order, so it orders the tickets).
        self._queue: deque[list] = deque()
        self.put_spans = 0  # spans put so far (the tickets' count)
        self.attempted_spans = 0  # every span put up to this ticket has had an attempt (or is settled)
        # Batches stay small beside the bound, so dropping past it stays fine-grained.
        self._batch_spans = max(1, min(MAX_BATCH_SPANS, max_spans // 16))
        self._batch_bytes = self.max_bytes or MAX_BATCH_BYTES
        self.depth = 0
        # Spans per second of sending, while sending (an exponentially weighted mean of the successful sends):
        # how fast this target takes what is queued. None until the first send succeeds.
        self.send_rate: float | None = None
        self.sent_spans = 0
        self.dropped_spans = 0
        self.failures = 0
        # An upstream answering RESOURCE_EXHAUSTED without RetryInfo (throttling, or a real size limit) has every batch
        # split down to single spans and each dropped: counted one by one, logged as a rate (issue 30), not per span.
        self._too_large_drops = RateLog(
            _log, f"dropped %d span(s) for {target.name} in %.0fs, each too large on its own (larger than its "
            "max_message_bytes, or refused alone with RESOURCE_EXHAUSTED without RetryInfo: the OTLP specification says "
            "not to retry it)", level=logging.ERROR,
        )  # fmt: skip
        self._splits = RateLog(_log, f"{target.name} refused %d batch(es) in %.0fs as too large: sent again in halves")
        self._on_drop = on_drop or (lambda n, reason="": None)
        self._on_failure = on_failure or (lambda: None)
        self._cond = threading.Condition()
        self._closing = False
        self._draining = False  # drain() is waiting: a pause after a failure ends at once
        self._busy = False
        self._sending: list | None = None  # the queue entry the worker is sending
        self._sending_dropped = False  # it left the queue (past the bound) while being sent
        self._thread = threading.Thread(target=self._run, name=f"tracefence-forward-{target.name}", daemon=True)
        self._thread.start()

    def put(self, request: bytes | ExportTraceServiceRequest | LazyRequest, spans: int) -> int:
        """Queue ``request`` (``spans`` spans): an encoded ``ExportTraceServiceRequest`` (what the service
        puts), or a message, full or lazy (shared with other forwarders, never changed here). Returns its ticket,
        for :meth:`wait_attempted`."""
        size = len(request) if isinstance(request, bytes) else request.ByteSize()
        if self.max_bytes is not None and size > self.max_bytes:
            pieces, oversized = split_request(lazy_request(request), max_bytes=self.max_bytes, max_spans=self._batch_spans)
            with self._cond:
                self._settle_spans(oversized)
                for span in oversized:
                    self._count_drop(1, "too_large", f"{_describe(span)} is {len(span)} bytes, "
                                     f"more than {self.target.name} takes (max_message_bytes {self.max_bytes}): it can never be delivered")
            ticket = self.put_spans
            for piece, piece_spans, piece_bytes in pieces:
                ticket = self._put(piece.SerializeToString(), piece_spans, piece_bytes)
            return ticket
        return self._put(request, spans, size)

    def _put(self, request: Request, spans: int, size: int) -> int:
        with self._cond:
            if self._closing:  # after the shutdown drain: nothing will send it
                self._count_drop(spans, "shutdown", f"decided after the shutdown drain ended; not forwarded (traces {', '.join(_trace_ids(request))})")
                return self.attempted_spans
            self.put_spans += spans
            if not self._merge_into_tail(request, spans, size):
                self._queue.append([request, spans, size, self.put_spans])
            self.depth += spans
            while self.depth > self.max_spans and len(self._queue) > 1:
                oldest = self._queue.popleft()
                self.depth -= oldest[1]
                self._attempted(oldest[3])
                if self._busy and oldest is self._sending:
                    # Being sent right now: counted as dropped only if that attempt fails.
                    self._sending_dropped = True
                    continue
                self._settle(oldest[0])
                self._count_drop(oldest[1], "queue_full")
            self._cond.notify()
            return self.put_spans

    def _measure(self, spans: int, seconds: float) -> None:
        """Fold one successful send of ``spans`` spans in ``seconds`` into :attr:`send_rate` (caller holds the lock)."""
        if seconds <= 0:
            return
        sample = spans / seconds
        self.send_rate = sample if self.send_rate is None else self.send_rate + RATE_WEIGHT * (sample - self.send_rate)

    def _attempted(self, end: int) -> None:
        # Caller holds the lock: every span put up to ``end`` has had an attempt, or left the queue.
        if end > self.attempted_spans:
            self.attempted_spans = end
            self._cond.notify_all()

    def wait_attempted(self, ticket: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until the request whose :meth:`put` returned ``ticket`` has had its first attempt
        (whatever its outcome), or has left the queue; whether it has."""
        with self._cond:
            return self._cond.wait_for(lambda: self.attempted_spans >= ticket, timeout=timeout_s)

    def _merge_into_tail(self, request: Request, spans: int, size: int) -> bool:
        # Caller holds the lock. The head may be on the wire: only a tail that is not is merged into.
        if not self._queue:
            return False
        entry = self._queue[-1]
        tail, tail_spans, tail_bytes, _ = entry
        if tail_spans + spans > self._batch_spans or (self._busy and entry is self._sending):
            return False
        if tail_bytes + size > self._batch_bytes:
            return False
        # Merged as encodings: concatenated ExportTraceServiceRequests are one (their resource_spans appended),
        # so a batch is a list of parts joined when sent, and nothing is parsed or copied here.
        parts = tail if isinstance(tail, list) else [encode(tail)]
        parts.append(encode(request))
        self._queue[-1] = [parts, tail_spans + spans, tail_bytes + size, self.put_spans]
        return True

    def _settle(self, request: Request) -> None:
        if self._on_settled is not None:
            self._settle_spans(lazy_spans(lazy_request(encode(request))))

    def _settle_spans(self, spans: Iterable[bytes]) -> None:
        if self._on_settled is not None:
            try:
                self._on_settled(spans)
            except Exception as exc:  # noqa: BLE001 - at worst the spans are sent again after a restart
                _log.error("persistent queue: could not mark spans forwarded to %s: %r", self.target.name, exc)

    def _count_drop(self, spans: int, reason: str, detail: str = "") -> None:
        # Caller holds the lock.
        if reason == "shutdown" and self._on_settled is not None:  # on disk: sent at the next start
            self.kept_spans += spans
            _log.warning("kept %d span(s) for %s in the persistent queue, sent at the next start: %s", spans, self.target.name, detail)
            return
        self.dropped_spans += spans
        self._on_drop(spans, reason)
        if reason == "queue_full":
            _log.warning("forward queue for %s full: dropped %d spans (%d dropped so far)", self.target.name, spans, self.dropped_spans)
        elif reason == "too_large":
            self._too_large_drops.event(spans, f"last: {detail}; {self.dropped_spans} dropped so far")
        else:
            _log.error("dropped %d span(s) for %s (%s): %s; %d dropped so far", spans, self.target.name, reason, detail, self.dropped_spans)

    def _next_entry(self) -> list | None:
        """The queue's head, marked as being sent, once there is one (None: closing with nothing queued)."""
        with self._cond:
            while not self._queue and not self._closing:
                self._cond.wait()
            if not self._queue:
                return None
            self._let_batch_fill()
            entry = self._queue[0]
            if isinstance(entry[0], list):  # a merged batch: joined once, not at every attempt
                entry[0] = b"".join(entry[0])
            self._busy = True
            self._sending, self._sending_dropped = entry, False
            return entry

    def _attempt(self, request: Request) -> Outcome:
        """One send of ``request`` to the target; a fault of the target is a retry (it must not kill the worker)."""
        try:
            outcome = self.target.send(request)
        except Exception as exc:  # noqa: BLE001 - a target fault must not kill the worker
            _log.error("forwarding to %s failed: %r", self.target.name, exc)
            return RETRY
        if isinstance(outcome, bool):
            return SENT if outcome else RETRY
        return outcome

    def _run(self) -> None:
        pause = PAUSE_AFTER_FAILURE_S[0]
        failed_in_a_row = 0
        while True:
            entry = self._next_entry()
            if entry is None:
                return
            request, spans, size, end = entry
            started = time.monotonic()
            outcome = self._attempt(request)
            with self._cond:
                self._busy = False
                self._attempted(end)
                # It left the queue while being sent: dropped past the bound, or counted by a drain that ended.
                left_queue = self._sending_dropped or not self._queue or self._queue[0] is not entry
                counted = left_queue and not self._sending_dropped  # a drain that ended counted it (shutdown)
                self._sending = None
                if outcome.kind != "retry":  # settled one way or another: it leaves the head
                    if not left_queue:
                        self._queue.popleft()
                        self.depth -= spans
                    if failed_in_a_row and outcome.kind == "sent":
                        _log.warning(
                            "forwarding to %s works again after %d failed attempt(s); %d spans still queued", self.target.name, failed_in_a_row, self.depth
                        )
                    failed_in_a_row = 0
                    pause = PAUSE_AFTER_FAILURE_S[0]
                if outcome.kind in ("sent", "rejected") or (outcome.kind == "retry" and self._sending_dropped):
                    self._settle(request)
                if outcome.kind == "sent":
                    self._measure(spans, time.monotonic() - started)
                    self.sent_spans += spans - outcome.rejected_spans
                    if outcome.rejected_spans:
                        self._count_drop(outcome.rejected_spans, "upstream_rejected", f"partial success: {outcome.reason} (traces {', '.join(_trace_ids(request))})")
                    self._cond.notify_all()
                    continue
                if outcome.kind == "too_large":
                    self._settle_too_large(request, spans, size, outcome, left_queue, end)
                    self._cond.notify_all()
                    continue
                if outcome.kind == "rejected":
                    if not counted:
                        self._count_drop(spans, "rejected", f"{outcome.reason}: a permanent error, not retried (traces {', '.join(_trace_ids(request))})")
                    self._cond.notify_all()
                    continue
                # retry
                if self._sending_dropped:  # dropped past the bound while this attempt ran, and it failed
                    self._count_drop(spans, "queue_full")
                self.failures += 1
                failed_in_a_row += 1
                self._on_failure()
                if self._closing:
                    self._cond.notify_all()
                    return
                wait = pause if outcome.retry_after_s is None else min(max(outcome.retry_after_s, 0.0), PAUSE_AFTER_FAILURE_S[1])
                if self._draining:  # a stop's time is short: its attempts follow each other closely (gRPC may still be reconnecting)
                    wait = min(wait, DRAIN_RETRY_PAUSE_S)
                # The exporter logs its own error; this says that nothing is lost yet, and what is held.
                _log.warning(
                    "forwarding %d spans to %s failed (%d in a row); they stay queued (%d/%d spans) and are tried again in %.1fs",
                    spans, self.target.name, failed_in_a_row, self.depth, self.max_spans, wait,
                )
                cut_short = self._pause(wait)
                pause = PAUSE_AFTER_FAILURE_S[0] if cut_short else min(pause * 2, PAUSE_AFTER_FAILURE_S[1])

    def _let_batch_fill(self) -> None:
        """Wait up to ``batch_wait_s`` while the head batch is under the batch sizes and nothing else is queued
        (caller holds the lock): requests put meanwhile are merged into it, so the upstream gets fewer, larger calls."""
        until = time.monotonic() + self.batch_wait_s
        while self.batch_wait_s > 0 and not self._closing and not self._draining and len(self._queue) == 1:
            _, spans, size, _ = self._queue[0]
            remaining = until - time.monotonic()
            if spans >= self._batch_spans or size >= self._batch_bytes or remaining <= 0:
                return
            self._cond.wait(timeout=remaining)

    def _settle_too_large(self, request: Request, spans: int, size: int, outcome: Outcome, left_queue: bool, end: int) -> None:
        """The target refused ``request`` as too large (caller holds the lock; the entry has left the head)."""
        if left_queue:  # dropped past the bound meanwhile (counted now), or counted by a drain that ended
            if self._sending_dropped:
                self._settle(request)
                self._count_drop(spans, "queue_full")
            return
        if spans <= 1:
            self._settle(request)
            span = lazy_spans(lazy_request(encode(request)))[0]
            self._count_drop(1, "too_large", f"{self.target.name} refused {_describe(span)} "
                             f"({len(span)} bytes) on its own ({outcome.reason}): it can never be delivered")
            return
        halves, _ = split_request(lazy_request(encode(request)), max_spans=(spans + 1) // 2)
        # Later batches are merged only up to half the refused size: the upstream's real limit is below it.
        self._batch_bytes = max(MIN_BATCH_BYTES, min(self._batch_bytes, size // 2))
        self._splits.event(
            1, f"last: {spans} spans ({size} bytes), {outcome.reason}; later batches merged up to {self._batch_bytes} bytes; "
            "set this upstream's max_message_bytes to its receive limit to size batches under it",
        )
        for piece, piece_spans, piece_bytes in reversed(halves):
            self._queue.appendleft([piece.SerializeToString(), piece_spans, piece_bytes, end])
            self.depth += piece_spans

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` after a failed attempt (caller holds the lock). New work does not cut the pause
        short, or a busy producer would retry a refusing upstream on every batch; a drain starting does,
        so a shutdown tries at once rather than sleeping through its deadline. True when cut short so."""
        until = time.monotonic() + seconds
        draining = self._draining
        while not self._closing and self._draining == draining:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.wait(timeout=remaining)
        return True

    def count_not_forwarded(self, spans: int, detail: str) -> None:
        """Count ``spans`` that never reached this queue and never will (shutdown), as dropped."""
        if spans:
            with self._cond:
                self._count_drop(spans, "shutdown", detail)

    def drain(self, timeout_s: float) -> bool:
        """Stop taking work once the queue is empty or ``timeout_s`` has passed; True when everything was sent.

        What is still queued then is counted as dropped (``reason=shutdown``) and logged.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._draining = True
            self._cond.notify_all()
            while (self._queue or self._busy) and time.monotonic() < deadline:
                self._cond.wait(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=max(0.1, deadline - time.monotonic()) + 1)
        with self._cond:  # after the join: an attempt under way at the deadline may have delivered
            drained = not self._queue
            left = self.depth
            if not drained:
                traces = sorted({t for entry in self._queue for t in _trace_ids(entry[0])})
                self._count_drop(left, "shutdown", f"still queued at shutdown after the {timeout_s:g}s drain; not forwarded (traces {', '.join(traces[:20])}"
                                 + (f" and {len(traces) - 20} more" if len(traces) > 20 else "") + ")")
                self._queue.clear()
                self.depth = 0
            self._attempted(self.put_spans)
        self._too_large_drops.flush()
        self._splits.flush()
        if not drained:
            _log.error("shutdown: %d spans still queued for %s were not forwarded", left, self.target.name)
        try:
            self.target.close()
        except Exception as exc:  # noqa: BLE001
            _log.error("closing %s failed: %r", self.target.name, exc)
        return drained
