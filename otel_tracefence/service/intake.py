"""Received spans waiting to be read and held: Export acknowledges at once, one worker does the rest.

The gRPC thread only checks ids and queues the spans; reading them into views,
holding them by trace and (when a bound or a root decides a trace) planning
happen here, off the call. The queue is bounded in spans: past the bound the
receiver answers ``UNAVAILABLE`` with a retry delay rather than queue more.
"""

from __future__ import annotations

import threading
from collections import deque

from otel_tracefence.fence import Fence
from otel_tracefence.normalize import from_otlp
from otel_tracefence.service.otlp_spans import OtlpItem


class Intake:
    """A bounded queue of received spans for one :class:`~otel_tracefence.fence.Fence`, drained by a thread."""

    def __init__(self, fence: Fence[OtlpItem], max_spans: int) -> None:
        self.max_spans = max_spans
        self.depth = 0
        self._fence = fence
        self._queue: deque[list[OtlpItem]] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._closing = False
        self._sequence = 0
        self._thread = threading.Thread(target=self._run, name="tracefence-intake", daemon=True)
        self._thread.start()

    def full(self) -> bool:
        return self.depth >= self.max_spans

    def put(self, items: list[OtlpItem]) -> None:
        """Queue one Export call's valid spans (never blocks)."""
        if not items:
            return
        with self._cond:
            self._queue.append(items)
            self.depth += len(items)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                items = self._queue.popleft()
                self._busy = True
            try:
                self._hold(items)
            finally:
                with self._cond:
                    self.depth -= len(items)
                    self._busy = False
                    self._cond.notify_all()

    def _hold(self, items: list[OtlpItem]) -> None:
        for item in items:
            try:
                view = from_otlp(item.span, self._sequence)
            except Exception as exc:  # noqa: BLE001 - one unreadable span never loses the others
                self._fence.pass_through([item], "intake", exc)
                continue
            self._sequence += 1
            self._fence.add(view, item, local_root=view.parent_span_id is None)

    def drain(self, timeout_s: float = 30.0) -> None:
        """Hold everything queued, then stop the worker."""
        with self._cond:
            self._cond.wait_for(lambda: not self._queue and not self._busy, timeout=timeout_s)
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=timeout_s)
