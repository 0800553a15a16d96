"""The self-metrics of ``tracefence serve`` (one process, or the router of ``--workers N``): its meter provider, with
the Prometheus reader behind ``/metrics`` (``opentelemetry-exporter-prometheus``) and the periodic exporter of
``service.metrics_exporter``, and what it records, on the instruments of ``core/telemetry.py``.

A forward queue and its target are a span exporter in the semantic conventions' terms (``otel.sdk.exporter.span.*``,
``otel.component.type`` the SDK's own ``otlp_grpc_span_exporter`` / ``otlp_http_span_exporter``): ``exported``
counts the spans an upstream took, and those it never will with ``error.type`` the drop's reason; ``inflight``
the spans queued and not yet settled. The service in front of them is a span processor: its intake queue
(``otel.sdk.processor.span.queue.*``) and the spans it handed on decided (``otel.sdk.processor.span.processed``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Sequence

from opentelemetry import metrics
from opentelemetry.semconv._incubating.metrics import otel_metrics as semconv

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.telemetry import ERROR_TYPE, component, door_attributes, instrument

GRPC_EXPORTER = "otlp_grpc_span_exporter"  # the conventions' well-known otel.component.type values
HTTP_EXPORTER = "otlp_http_span_exporter"


def exporter_type(target: Any) -> str:
    """``otel.component.type`` of a forward target: the SDK exporter it sends through, else its class's name."""
    name = type(target).__name__
    if name in ("UpstreamTarget", "WorkerTarget"):
        return GRPC_EXPORTER
    if name == "HttpUpstreamTarget":
        return HTTP_EXPORTER
    return f"{type(target).__module__}.{name}"


class PrometheusText:
    """The Prometheus text exposition of one meter provider (its own registry, not the process-wide one), with the
    ``process_*`` figures of ``prometheus_client`` (CPU, memory, descriptors) beside it."""

    def __init__(self) -> None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, ProcessCollector

        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        self.reader = PrometheusMetricReader(registry=self.registry)

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition (body, content type) for a scrape's ``Accept`` header (text 0.0.4 or OpenMetrics)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


def meter_provider(config: TraceFenceConfig, worker: int | None = None, *, prometheus: bool = False) -> tuple[Any, PrometheusText | None]:
    """The service's own MeterProvider and its ``/metrics`` exposition (``prometheus``), or ``(None, None)`` when
    neither that nor ``service.metrics_exporter`` asks for one. A worker process of ``serve --workers N`` carries its
    index in the resource attribute ``tracefence.worker``."""
    settings = config.service
    if settings.metrics_exporter == "none" and not prometheus:
        return None, None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource

    readers: list[Any] = []
    text = PrometheusText() if prometheus else None
    if text is not None:
        readers.append(text.reader)
    if settings.metrics_exporter != "none":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

        if settings.metrics_exporter == "console":
            exporter: Any = ConsoleMetricExporter()
        else:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

            exporter = OTLPMetricExporter()
        readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=settings.metrics_interval_ms))
    resource = Resource.create({"service.name": "tracefence", **({"tracefence.worker": worker} if worker is not None else {})})
    return MeterProvider(metric_readers=readers, resource=resource), text


class ServiceMetrics:
    """What the service (``door``: ``service`` or ``router``) records. ``target_key``: the attribute naming a
    forward queue's target (``tracefence.upstream``, or ``tracefence.worker`` in the router)."""

    def __init__(self, meter_provider: Any, door: str, target_key: str = "tracefence.upstream") -> None:
        self.meter = metrics.get_meter("otel_tracefence", meter_provider=meter_provider)
        self.attributes = door_attributes(door)
        self.target_key = target_key
        self.rejected = instrument(self.meter, "tracefence.spans.rejected")
        self.refused = instrument(self.meter, "tracefence.requests.refused")
        self._dropped = instrument(self.meter, "tracefence.forward.dropped")
        self._failures = instrument(self.meter, "tracefence.forward.failures")
        self._processed = instrument(self.meter, semconv.OTEL_SDK_PROCESSOR_SPAN_PROCESSED)
        self._not_exported: defaultdict[tuple[int, str], int] = defaultdict(int)  # (queue, reason) -> spans

    def target_attributes(self, value: Any) -> dict[str, Any]:
        return {**self.attributes, self.target_key: value}

    def on_drop(self, index: int, value: Any) -> Callable[[int, str], None]:
        """The forward queue ``index``'s drop hook: ``tracefence.forward.dropped`` and the failed ``exported`` points."""

        def dropped(spans: int, reason: str) -> None:
            self._dropped.add(spans, {**self.target_attributes(value), "reason": reason})
            self._not_exported[(index, reason)] += spans

        return dropped

    def on_failure(self, value: Any) -> Callable[[], None]:
        return lambda: self._failures.add(1, self.target_attributes(value))

    def processed(self, spans: int) -> None:
        """Spans handed on, decided, to the forward queues."""
        self._processed.add(spans, self.attributes)

    def watch_forwarders(self, forwarders: Sequence[Any], values: Sequence[Any], queue_gauge: str) -> None:
        """Observe the forward queues: ``queue_gauge`` (``tracefence.forward.queue.size`` or
        ``tracefence.worker.queue.size``) and the exporter metrics, each queue a component of its own."""
        exporters = [{**component(exporter_type(f.target)), self.target_key: v} for f, v in zip(forwarders, values)]

        def exported():
            for index, (forwarder, attrs) in enumerate(zip(forwarders, exporters)):
                yield forwarder.sent_spans, attrs
                for (queue, reason), spans in list(self._not_exported.items()):
                    if queue == index:
                        yield spans, {**attrs, ERROR_TYPE: reason}

        instrument(self.meter, queue_gauge, lambda: [(f.depth, self.target_attributes(v)) for f, v in zip(forwarders, values)])
        instrument(self.meter, semconv.OTEL_SDK_EXPORTER_SPAN_EXPORTED, exported)
        instrument(self.meter, semconv.OTEL_SDK_EXPORTER_SPAN_INFLIGHT, lambda: [(f.depth, attrs) for f, attrs in zip(forwarders, exporters)])

    def watch_intake(self, depth: Callable[[], int], capacity: int) -> None:
        """Observe the intake queue, the processor's queue: spans acknowledged and not yet read."""
        instrument(self.meter, semconv.OTEL_SDK_PROCESSOR_SPAN_QUEUE_SIZE, lambda: [(depth(), self.attributes)])
        instrument(self.meter, semconv.OTEL_SDK_PROCESSOR_SPAN_QUEUE_CAPACITY, lambda: [(capacity, self.attributes)])
