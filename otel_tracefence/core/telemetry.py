"""Self-telemetry through the OpenTelemetry metrics API, declared once.

Every instrument carries ``tracefence.component`` (``processor``, ``exporter``,
``service``). With no meter provider configured the API's no-op meter is used,
so recording costs next to nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from opentelemetry import metrics

COMPONENT = "tracefence.component"
_log = logging.getLogger("otel_tracefence")


class Telemetry:
    """The counters of one door. Units follow the semantic conventions' ``{span}``, ``{trace}`` annotations."""

    def __init__(self, component: str, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = metrics.get_meter("otel_tracefence", meter_provider=meter_provider)
        self.attributes = {COMPONENT: component}
        self.spans_received = meter.create_counter("tracefence.spans.received", unit="{span}", description="Spans received.")
        self.traces_decided = meter.create_counter(
            "tracefence.traces.decided", unit="{trace}", description="Traces planned, by replay class and partial flag."
        )
        self.spans_late = meter.create_counter("tracefence.spans.late", unit="{span}", description="Spans that arrived after their trace was decided.")
        self.errors = meter.create_counter("tracefence.errors", unit="{error}", description="Internal failures; the spans were handed on unannotated.")
        self.review_writes = meter.create_counter("tracefence.review.writes", unit="{trace}", description="Traces written to the review queue, by outcome.")
        self._meter = meter
        self._last_logged: dict[str, float] = {}
        self._lock = threading.Lock()

    def observe_held(self, count: Callable[[], int]) -> None:
        """Report ``tracefence.traces.held``, the traces held awaiting a decision, read when metrics are collected."""

        def callback(options: metrics.CallbackOptions):
            yield metrics.Observation(count(), self.attributes)

        self._meter.create_observable_gauge("tracefence.traces.held", callbacks=[callback], unit="{trace}", description="Traces held awaiting a decision.")

    def error(self, kind: str, message: str, exc: BaseException | None = None) -> None:
        """Count an internal failure and log it, at most once a minute per kind (never raises)."""
        try:
            self.errors.add(1, {**self.attributes, "error.type": kind})
            now = time.monotonic()
            with self._lock:
                last = self._last_logged.get(kind)
                if last is not None and now - last < 60:
                    return
                self._last_logged[kind] = now
            _log.error("tracefence %s: %s", self.attributes[COMPONENT], message, exc_info=exc)
        except Exception:  # pragma: no cover - logging itself failed; nothing safer to do
            pass


def guarded(telemetry: Telemetry, kind: str, action: Callable[[], None]) -> bool:
    """Run ``action``; on any exception count and log it and return False. Telemetry never raises into the agent."""
    try:
        action()
        return True
    except Exception as exc:  # noqa: BLE001 - the boundary between our code and the agent
        telemetry.error(kind, f"{kind} failed: {exc!r}", exc)
        return False
