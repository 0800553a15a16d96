"""Events that may come thousands a second logged as a rate: one line per interval with the count, not one per event.

A refused connection, a throttled export: each is counted, and the first of an interval is logged at once (so a
single event is never silent), the rest of that interval in one line when the next event after it comes, or at
:meth:`RateLog.flush` (a stop). Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable


class RateLog:
    """Counts one kind of event and logs it on ``logger`` at ``level`` at most once per ``interval_s`` seconds.

    ``message`` is a %-format taking two arguments: the number of events (an int) and the seconds they were counted
    over (a float), e.g. ``"refused %d OTLP/HTTP connection(s) in the last %.0fs at the cap of 512"``. :attr:`total`
    counts every event since the start. ``clock``: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        *,
        interval_s: float = 10.0,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._message = message
        self._interval_s = interval_s
        self._level = level
        self._clock = clock
        self._lock = threading.Lock()
        self._pending = 0  # events counted since the last line
        self._since: float | None = None  # when the last line was written (None: never)
        self.total = 0
        self.lines = 0  # lines written, for tests and metrics

    def event(self, count: int = 1, detail: str = "") -> None:
        """Count ``count`` events; log the count when the interval since the last line has passed. ``detail``
        (optional, already free of raw values) is appended to the line written now, if one is."""
        now = self._clock()
        with self._lock:
            self.total += count
            self._pending += count
            if self._since is not None and now - self._since < self._interval_s:
                return
            pending, over = self._pending, (now - self._since if self._since is not None else 0.0)
            self._pending, self._since = 0, now
            self.lines += 1
        self._write(pending, over, detail)

    def flush(self) -> None:
        """Log the events counted since the last line, if any (call at a stop)."""
        now = self._clock()
        with self._lock:
            pending, over = self._pending, (now - self._since if self._since is not None else 0.0)
            self._pending, self._since = 0, now
            if pending:
                self.lines += 1
        if pending:
            self._write(pending, over, "")

    def _write(self, count: int, over_s: float, detail: str) -> None:
        if self._logger.isEnabledFor(self._level):
            self._logger.log(self._level, self._message + ("; " + detail if detail else ""), count, over_s)


class RateFilter(logging.Filter):
    """A ``logging.Filter`` for a logger that is not ours (the OTLP exporter's, which logs one line per failed export):
    of the records with the same message template, one per ``interval_s`` seconds passes; the others are counted,
    and the next one to pass says how many there were (``... (and 41 more like it in 10s)``)."""

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, int]] = {}  # template -> (when one last passed, how many were held since)
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = self._clock()
        key = str(record.msg)
        with self._lock:
            since, held = self._seen.get(key, (None, 0))
            if since is not None and now - since < self._interval_s:
                self._seen[key] = (since, held + 1)
                self.suppressed += 1
                return False
            self._seen[key] = (now, 0)
        if held:
            record.msg, record.args = f"{record.getMessage()} (and {held} more like it in {now - since:.0f}s)", None
        return True


def rate_limit_logger(name: str, interval_s: float = 10.0) -> RateFilter:
    """Install one :class:`RateFilter` on the logger ``name`` (idempotent: the one installed is returned)."""
    logger = logging.getLogger(name)
    for existing in logger.filters:
        if isinstance(existing, RateFilter):
            return existing
    installed = RateFilter(interval_s)
    logger.addFilter(installed)
    return installed


__all__ = ["RateFilter", "RateLog", "rate_limit_logger"]
