"""Refusing Export calls while the review store fails and the review items held in memory are near their bound.

A full or failing review store refuses, it does not pretend (issue 30, DECISIONS 511): once the fence holds
``max_traces`` items it could not write, every Export call is answered ``UNAVAILABLE``
with a ``RetryInfo`` delay (gRPC) or ``503`` with ``Retry-After`` (HTTP), as the intake's own back-pressure is:
the service cannot tell which spans of a call will need an item before it plans them, and acknowledging a trace
whose item it would then drop is the loss this avoids. Counted in ``tracefence.requests.refused.review``
(``reason=review_store_failing``), logged once per ``LOG_EVERY_S`` with the count since the last line. Writes
resume by themselves: the fence's retry thread writes the held items once the store takes them, and the
refusals end when the hold falls below the mark.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from otel_tracefence.core.telemetry import COMPONENT, instrument

_log = logging.getLogger("otel_tracefence.service")
LOG_EVERY_S = 10.0  # one log line at most this often while calls are refused so


class ReviewRefusals:
    """Counts and logs the calls refused for a failing review store; thread-safe. ``meter``: an OpenTelemetry meter."""

    def __init__(self, meter: Any, *, clock=time.monotonic, attributes: dict[str, Any] | None = None) -> None:
        self._attributes = {**(attributes or {COMPONENT: "service"}), "reason": "review_store_failing"}
        self._counter = instrument(meter, "tracefence.requests.refused.review")
        self._clock = clock
        self._lock = threading.Lock()
        self._since_log = 0
        self._logged_at: float | None = None
        self.refused_total = 0

    def refused(self, held: int, bound: int) -> str:
        """Count one refused call (``held`` items held of ``bound``); the reason given to the client."""
        self._counter.add(1, self._attributes)
        now = self._clock()
        with self._lock:
            self.refused_total += 1
            self._since_log += 1
            due = self._logged_at is None or now - self._logged_at >= LOG_EVERY_S
            if due:
                count, self._since_log, self._logged_at = self._since_log, 0, now
        if due:
            _log.error(
                "review store failing: %d review item(s) held in memory of %d; refused %d Export call(s) (retry later) since the last line; "
                "accepting again once the store takes the held items", held, bound, count,
            )  # fmt: skip
        return f"the review store takes no writes and {held} review items wait in memory (bound {bound}); retry later"
