"""Self-telemetry through the OpenTelemetry metrics API, every instrument declared once, in :data:`INSTRUMENTS`.

Two families side by side (docs/DECISIONS.md 680): the OpenTelemetry semantic conventions' SDK component metrics
(``otel.sdk.processor.span.*``, ``otel.sdk.exporter.span.*``: the names, units and descriptions of the
``opentelemetry-semantic-conventions`` package), and tracefence's own (``tracefence.*``). Every point carries
``otel.component.type`` and ``otel.component.name`` (:func:`component`: the conventions' well-known type where
one applies, e.g. ``otlp_grpc_span_exporter``, else the class's qualified name; the name
``{type}/{instance}``), and ``tracefence.component`` (``processor``, ``exporter``, ``service``, ``router``).
With no meter provider configured the API's no-op meter is used, so recording costs next to nothing.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import defaultdict
from typing import Any, Callable, Iterable, NamedTuple

from opentelemetry import metrics
from opentelemetry.semconv._incubating.metrics import otel_metrics as semconv

COMPONENT = "tracefence.component"
COMPONENT_TYPE = "otel.component.type"  # semantic conventions, attributes registry: otel
COMPONENT_NAME = "otel.component.name"
ERROR_TYPE = "error.type"
_log = logging.getLogger("otel_tracefence")


class Instrument(NamedTuple):
    kind: str  # counter, up_down_counter; observed when collected: gauge, up_down (up-down counter), observable_counter
    unit: str
    description: str


def _semconv(kind: str, name: str, description: str) -> tuple[str, Instrument]:
    return name, Instrument(kind, "{span}", description)


INSTRUMENTS: dict[str, Instrument] = dict(
    [
        # The semantic conventions' SDK metrics (Status: Development), as the SDK's own span processors and
        # exporters record them: a tracefence serve is a span processor (its intake queue, its decision) in front
        # of span exporters (its forward queues, one per upstream).
        _semconv("counter", semconv.OTEL_SDK_PROCESSOR_SPAN_PROCESSED, "The number of spans for which the processing has finished, either successful or failed."),
        _semconv("up_down", semconv.OTEL_SDK_PROCESSOR_SPAN_QUEUE_SIZE, "The number of spans in the queue of a given instance of an SDK span processor."),
        _semconv("up_down", semconv.OTEL_SDK_PROCESSOR_SPAN_QUEUE_CAPACITY, "The maximum number of spans the queue of a given instance of an SDK span processor can hold."),
        _semconv("observable_counter", semconv.OTEL_SDK_EXPORTER_SPAN_EXPORTED, "The number of spans for which the export has finished, either successful or failed."),
        _semconv(
            "up_down", semconv.OTEL_SDK_EXPORTER_SPAN_INFLIGHT,
            "The number of spans which were passed to the exporter, but that have not been exported yet (neither successful, nor failed).",
        ),  # fmt: skip
    ]
) | {
    # tracefence's own.
    "tracefence.spans.received": Instrument("counter", "{span}", "Spans received."),
    "tracefence.traces.decided": Instrument("counter", "{trace}", "Traces planned, by replay class and partial flag."),
    "tracefence.spans.late": Instrument("counter", "{span}", "Spans that arrived after their trace was decided."),
    "tracefence.errors": Instrument("counter", "{error}", "Internal failures; the spans were handed on unannotated."),
    "tracefence.review.writes": Instrument("counter", "{trace}", "Traces written to the review queue, by outcome."),
    "tracefence.traces.held": Instrument("gauge", "{trace}", "Traces held awaiting a decision."),
    "tracefence.review.pending": Instrument("gauge", "{trace}", "Review items held in memory because their write failed."),
    "tracefence.spans.rejected": Instrument("counter", "{span}", "Spans refused as invalid."),
    "tracefence.requests.refused": Instrument("counter", "{request}", "Export calls refused as larger than the whole intake bound."),
    "tracefence.requests.refused.review": Instrument(
        "counter", "{request}",
        "Export calls refused (retry later) while the review store fails and the review items held in memory are near their bound.",
    ),  # fmt: skip
    "tracefence.forward.dropped": Instrument("counter", "{span}", "Spans not forwarded, by reason: queue_full, too_large, rejected, upstream_rejected, shutdown."),
    "tracefence.forward.failures": Instrument("counter", "{request}", "Forward attempts that failed."),
    "tracefence.forward.queue.size": Instrument("gauge", "{span}", "Spans waiting to be forwarded."),
    "tracefence.worker.restarts": Instrument("counter", "{process}", "Worker processes restarted after they died."),
    "tracefence.worker.queue.size": Instrument("gauge", "{span}", "Spans waiting to be handed to each worker."),
    "tracefence.write_index.unchecked": Instrument(
        "counter", "{trace}", "Traces planned alone because the write index was unavailable (their writes noted retries_unchecked).",
    ),  # fmt: skip
    "tracefence.review.duplicate_effects": Instrument("counter", "{trace}", "Review items a verdict found the effect of twice (duplicate_effect_found)."),
    "tracefence.reconcile.verdicts": Instrument("counter", "{call}", "Reconciler answers, by reconciler and verdict."),
    "tracefence.reconcile.failures": Instrument(
        "counter", "{call}", "Reconciler calls that gave no answer (raised, timeout, bad_return, busy): their verdict is undetermined.",
    ),  # fmt: skip
    "tracefence.declare.unrecorded": Instrument("counter", "{call}", "declare() calls with no recording tool span to label: nothing was recorded."),
}

# otel.component.type of each door (the conventions: the language-defined name of the type where no well-known
# value applies); the forward targets take the well-known exporter types (service/self_metrics.py).
COMPONENT_TYPES = {
    "processor": "otel_tracefence.sdk.processor.TraceFenceSpanProcessor",
    "exporter": "otel_tracefence.sdk.exporter.TraceFenceSpanExporter",
    "service": "otel_tracefence.service.server.TraceFenceService",
    "router": "otel_tracefence.service.router.RouterService",
}
_instances: defaultdict[str, Iterable[int]] = defaultdict(itertools.count)
_instances_lock = threading.Lock()


def component(component_type: str) -> dict[str, str]:
    """``otel.component.type`` and a new ``otel.component.name`` (``{type}/{n}``, n counting from 0 per type in this
    process, as the SDK names its own components)."""
    with _instances_lock:
        index = next(_instances[component_type])  # type: ignore[call-overload]
    return {COMPONENT_TYPE: component_type, COMPONENT_NAME: f"{component_type}/{index}"}


def door_attributes(door: str) -> dict[str, str]:
    """The attributes every point of a door carries: ``tracefence.component`` and its ``otel.component.*``."""
    return {COMPONENT: door, **component(COMPONENT_TYPES.get(door, f"otel_tracefence.{door}"))}


class Tally:
    """A counter's running totals by attribute set, kept here and reported when metrics are collected (an observable
    counter): an ``add`` costs a dict update, where the SDK's synchronous counter costs about 20 µs a call, on the
    path of every trace (docs/DECISIONS.md 688). ``add(amount, attributes)`` as a counter's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[frozenset, list[Any]] = {}

    def add(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        key = frozenset(attributes.items()) if attributes else frozenset()
        with self._lock:
            entry = self._totals.get(key)
            if entry is None:
                self._totals[key] = [amount, dict(attributes or {})]
            else:
                entry[0] += amount

    def points(self) -> list[tuple[float, dict[str, Any]]]:
        with self._lock:
            return [(value, attributes) for value, attributes in self._totals.values()]


def instrument(meter: metrics.Meter, name: str, callback: Callable[[], Iterable[tuple[float, dict[str, Any]]]] | None = None) -> Any:
    """The instrument ``name`` of :data:`INSTRUMENTS` on ``meter``; an observable one reads ``callback()``
    (``(value, attributes)`` pairs) whenever metrics are collected. A counter is a :class:`Tally` reported as an
    observable counter (the same monotonic, cumulative sum to every reader)."""
    spec = INSTRUMENTS[name]
    if spec.kind == "counter" and callback is None:
        tally = Tally()
        instrument_for(meter, spec, name, "observable_counter", tally.points)
        return tally
    if spec.kind == "up_down_counter":
        return meter.create_up_down_counter(name, unit=spec.unit, description=spec.description)
    if callback is None:
        raise ValueError(f"{name} is observable: give a callback")
    return instrument_for(meter, spec, name, spec.kind, callback)


def instrument_for(meter: metrics.Meter, spec: Instrument, name: str, kind: str, callback: Callable[[], Iterable[tuple[float, dict[str, Any]]]]) -> Any:
    """An observable instrument of ``kind`` (``gauge``, ``up_down``, ``observable_counter``) reading ``callback()``."""

    def observe(options: metrics.CallbackOptions):
        return [metrics.Observation(value, attributes) for value, attributes in callback()]

    create = {"gauge": meter.create_observable_gauge, "up_down": meter.create_observable_up_down_counter}.get(kind, meter.create_observable_counter)
    return create(name, callbacks=[observe], unit=spec.unit, description=spec.description)


class Telemetry:
    """The counters of one door (``tracefence.*``), each point with ``attributes`` (default: :func:`door_attributes`,
    a component of its own; a service passes its own, so the fence inside it is the same component)."""

    def __init__(self, component: str, meter_provider: metrics.MeterProvider | None = None, *, attributes: dict[str, Any] | None = None) -> None:
        meter = metrics.get_meter("otel_tracefence", meter_provider=meter_provider)
        self.attributes = dict(attributes) if attributes is not None else door_attributes(component)
        self.spans_received = instrument(meter, "tracefence.spans.received")
        self.traces_decided = instrument(meter, "tracefence.traces.decided")
        self.spans_late = instrument(meter, "tracefence.spans.late")
        self.errors = instrument(meter, "tracefence.errors")
        self.review_writes = instrument(meter, "tracefence.review.writes")
        self.write_index_unchecked = instrument(meter, "tracefence.write_index.unchecked")
        self._meter = meter
        self._last_logged: dict[str, float] = {}
        self._lock = threading.Lock()

    def count_unchecked(self) -> None:
        """A trace planned alone because the write index was unavailable (``tracefence.write_index.unchecked``)."""
        self.write_index_unchecked.add(1, self.attributes)

    def observe_held(self, count: Callable[[], int]) -> None:
        """Report ``tracefence.traces.held``, the traces held awaiting a decision, read when metrics are collected."""
        instrument(self._meter, "tracefence.traces.held", lambda: [(count(), self.attributes)])

    def error(self, kind: str, message: str, exc: BaseException | None = None) -> None:
        """Count an internal failure and log it, at most once a minute per kind (never raises)."""
        try:
            self.errors.add(1, {**self.attributes, ERROR_TYPE: kind})
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
