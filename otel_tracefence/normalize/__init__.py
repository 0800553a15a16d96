"""Normalizer: spans (or rows) to tool steps. Pure functions, no I/O."""

from otel_tracefence.normalize.span_view import SpanView, from_otlp, from_readable
from otel_tracefence.normalize.step import span_to_step
from otel_tracefence.normalize.trace import NormalizedTrace, normalize_trace
from otel_tracefence.normalize.unread import unread_activity_step

__all__ = ["NormalizedTrace", "SpanView", "from_otlp", "from_readable", "normalize_trace", "span_to_step", "unread_activity_step"]
