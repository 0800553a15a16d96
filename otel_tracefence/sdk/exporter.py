"""``TraceFenceSpanExporter``: zero-code setup under ``opentelemetry-instrument``.

The SDK has no entry-point group for span processors, so this is registered as
a span exporter (``opentelemetry_traces_exporter`` entry point ``tracefence``):
``OTEL_TRACES_EXPORTER=tracefence opentelemetry-instrument python agent.py``.
The SDK's auto-configuration wraps it in a ``BatchSpanProcessor``; it holds the
batches' spans by trace, plans whole traces, and exports them annotated through
the SDK's OTLP exporter for ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` /
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc`` by default, ``http/protobuf``,
``http/json``; every ``OTEL_EXPORTER_OTLP_*`` variable applies, read by the SDK:
:mod:`otel_tracefence.sdk.otlp_exporter`), or through
``OTEL_TRACEFENCE_EXPORTER=console`` for the console exporter.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.sdk.bounded import run_until
from otel_tracefence.sdk.otlp_exporter import otlp_span_exporter
from otel_tracefence.sdk.processor import SHUTDOWN_TIMEOUT_MS
from otel_tracefence.sdk.review_sink import open_review_sink_or_hold
from otel_tracefence.sdk.span_fence import ReviewSink, SdkFence, is_local_root
from otel_tracefence.sdk.wiring import check_config, config_or_defaults
from otel_tracefence.core.telemetry import guarded

INNER_EXPORTER_ENV = "OTEL_TRACEFENCE_EXPORTER"
_log = logging.getLogger("otel_tracefence")
_DEFAULT = object()


def _default_inner() -> SpanExporter:
    name = os.environ.get(INNER_EXPORTER_ENV, "otlp").strip().lower()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":  # the protocol the standard variables name
        return otlp_span_exporter()
    if name in ("otlp_proto_grpc", "otlp_proto_http"):  # the SDK's own exporter names: that protocol, whatever the variables say
        return otlp_span_exporter("grpc" if name == "otlp_proto_grpc" else "http/protobuf")
    raise ValueError(f"{INNER_EXPORTER_ENV}={name!r}: expected otlp, otlp_proto_grpc, otlp_proto_http or console")


def _inner_or_otlp() -> SpanExporter:
    try:
        return _default_inner()
    except (ValueError, ImportError) as exc:
        _log.error("tracefence: %s; exporting through OTLP instead, over grpc", exc)
        return otlp_span_exporter("grpc")


class TraceFenceSpanExporter(SpanExporter):
    """A ``SpanExporter`` that plans whole traces, then exports them annotated through ``inner``.

    ``inner`` defaults to the SDK's OTLP span exporter for the protocol the standard variables name
    (:func:`~otel_tracefence.sdk.otlp_exporter.otlp_span_exporter`), or the console exporter, per
    ``OTEL_TRACEFENCE_EXPORTER``. Settings as for
    :class:`~otel_tracefence.sdk.processor.TraceFenceSpanProcessor`. Spans of a
    trace whose root has not arrived are held across batches (bounded), and
    exported at ``force_flush`` or ``shutdown`` flagged partial. ``export``
    always answers ``SUCCESS`` for what it holds: losing them is never the
    agent's problem; failures of ``inner`` are counted.

    Built by ``opentelemetry-instrument`` from environment variables, it never
    fails the agent's tracing setup: a bad ``OTEL_TRACEFENCE_*`` setting is
    logged as an error and the defaults are used instead; a review database
    that cannot be opened is logged once and its items are held in memory until it opens; an
    unknown ``OTEL_TRACEFENCE_EXPORTER`` or OTLP protocol falls back to OTLP/gRPC (logged);
    ``http/json`` without an OTLP/JSON exporter installed goes over ``http/protobuf`` (logged). Explicit
    arguments (``config=``, ``inner=``, ``review_sink=``) are used as given.
    """

    def __init__(
        self,
        inner: SpanExporter | None = None,
        *,
        config: TraceFenceConfig | None = None,
        review_sink: ReviewSink | None | Any = _DEFAULT,
        meter_provider: Any = None,
        **settings: Any,
    ) -> None:
        check_config(config, type(self).__name__)
        self.config = config if config is not None else config_or_defaults(settings)
        self._inner = inner if inner is not None else _inner_or_otlp()
        sink = open_review_sink_or_hold(self.config, "exporter") if review_sink is _DEFAULT else review_sink
        # An exporter never sees spans start, so it cannot tell a complete trace from one with
        # spans still open: it waits only when a wait was set (argument, environment or file),
        # never the processor's default cap on every trace. A tool span that comes after its
        # trace was decided fails closed (review, decided_before_complete).
        wait = self.config.decision_wait_ms if "decision_wait_ms" in self.config.model_fields_set else 0.0
        self._fence = SdkFence(self.config, self._emit, component="exporter", review_sink=sink, meter_provider=meter_provider, decision_wait_ms=wait)

    def _emit(self, spans: Sequence[ReadableSpan]) -> None:
        if spans and self._inner.export(list(spans)) is not SpanExportResult.SUCCESS:
            self._fence.telemetry.error("export", f"inner exporter refused {len(spans)} span(s)")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        # The spans of one batch arrived together: local roots last, so a child that ended just
        # after its root (same batch) is planned with its trace, not late; late spans of one trace
        # in the batch are re-planned once.
        roots, others = [], []
        for span in spans:
            try:
                root = is_local_root(span)
            except Exception:  # noqa: BLE001 - add_spans hands an unreadable span on itself
                root = False
            (roots if root else others).append(span)
        self._fence.add_spans(others + roots)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        guarded(self._fence.telemetry, "flush", self._fence.flush)
        try:
            return bool(self._inner.force_flush(timeout_millis))
        except Exception as exc:  # noqa: BLE001
            self._fence.telemetry.error("export", f"force_flush failed: {exc!r}", exc)
            return False

    def shutdown(self, timeout_millis: int = SHUTDOWN_TIMEOUT_MS) -> None:
        """Plan and hand on everything held, then shut the wrapped exporter down, within ``timeout_millis``
        (milliseconds; the SDK's processors call ``shutdown()`` with none: 30 s) and ``bounded.MARGIN_S`` more,
        whatever the wrapped exporter does: a step still running at the deadline goes on in the background, counted
        (``tracefence.errors``, ``error.type=shutdown_timeout``)."""
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        telemetry = self._fence.telemetry
        for kind, action in (("shutdown", self._fence.shutdown), ("export", self._inner.shutdown)):
            if not run_until(lambda k=kind, a=action: guarded(telemetry, k, a), deadline, f"tracefence-exporter-{kind}"):
                what = "planning what is held (the wrapped exporter's export?)" if kind == "shutdown" else "the wrapped exporter's shutdown()"
                telemetry.error("shutdown_timeout", f"shutdown: {what} did not finish within {timeout_millis} ms; it goes on in the background")
