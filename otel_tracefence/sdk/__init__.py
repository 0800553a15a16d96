"""The doors in the agent's own process: the span processor and the zero-code exporter."""

from otel_tracefence.sdk.exporter import TraceFenceSpanExporter
from otel_tracefence.sdk.otlp_exporter import otlp_span_exporter
from otel_tracefence.sdk.processor import TraceFenceSpanProcessor

__all__ = ["TraceFenceSpanExporter", "TraceFenceSpanProcessor", "otlp_span_exporter"]
