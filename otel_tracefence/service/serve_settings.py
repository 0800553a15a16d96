"""What the service's settings say before it starts: whether the review API may listen where it is set to (fail
closed), whether this process serves ``/metrics``, and the bounds on its input that its ``listening`` line reports."""

from __future__ import annotations

from otel_tracefence.core.config import ConfigError, TraceFenceConfig
from otel_tracefence.core.exposure import exposure_problem


def check_review_exposure(config: TraceFenceConfig) -> str | None:
    """Fail closed: raise :class:`ConfigError` when the review API would listen beyond loopback with no review
    token and no ``insecure_review_api``; with that flag, return the warning to log. None when all is well."""
    settings = config.service
    if not config.review_db:
        return None  # no review queue, no review API
    address = settings.review_endpoint or settings.endpoint
    problem = exposure_problem(address, settings.review_token, what="the review API", token_setting="service.review_token")
    if problem is None:
        return None
    if not settings.insecure_review_api:
        raise ConfigError(
            f"tracefence serve: refusing to start: {problem}. Set service.review_token (OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN), "
            "or put the review API on loopback (service.review_endpoint, e.g. 127.0.0.1:4319), "
            "or accept the exposure with --insecure-review-api (service.insecure_review_api)",
            ("service",),
        )
    return f"{problem} (allowed by insecure_review_api)"


def input_limits(config: TraceFenceConfig) -> dict[str, int]:
    """Every bound on what the service reads and holds, as reported in the ``listening`` log line."""
    settings = config.service
    return {
        "max_message_bytes": settings.max_message_bytes,
        "max_attributes_per_span": config.limits.max_attributes_per_span,
        "max_argument_bytes": config.limits.max_argument_bytes,
        "max_argument_depth": config.limits.max_argument_depth,
        "max_related_call_ids": config.limits.max_related_call_ids,
        "max_tokens_per_value": config.limits.max_tokens_per_value,
        "max_traces": config.max_traces,
        "max_spans_per_trace": config.max_spans_per_trace,
        "decided_cache_size": config.decided_cache_size,
        "intake_queue_spans": settings.intake_queue_spans,
        "intake_queue_bytes": settings.intake_queue_bytes,
        "forward_queue_spans": settings.forward_queue_spans,
    }


def serves_prometheus(config: TraceFenceConfig, worker: int | None = None) -> bool:
    """Whether this process serves ``/metrics``: ``service.prometheus_metrics``, somewhere to serve it (the OTLP/HTTP
    port or ``service.metrics_endpoint``), and not a worker of ``serve --workers N`` (its router serves it)."""
    settings = config.service
    return settings.prometheus_metrics and worker is None and bool(settings.operations_endpoint(settings.http_endpoint))
