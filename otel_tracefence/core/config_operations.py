"""The operations settings of ``tracefence serve`` (``service.*``: ``/metrics``, ``/healthz``, ``/readyz``, the logs),
declared here and part of :class:`~otel_tracefence.core.config.ServiceSettings` (which inherits them), so they are
read like every other setting: the config file, ``OTEL_TRACEFENCE_SERVICE__*`` variables, flags on top.
"""

from __future__ import annotations

import os
from typing import Literal, Mapping

from pydantic import BaseModel, field_validator

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
OTEL_LOG_LEVEL = "OTEL_LOG_LEVEL"  # the specification's SDK variable (general SDK configuration), read as a fallback
_SYNONYMS = {"WARN": "WARNING", "FATAL": "CRITICAL", "TRACE": "DEBUG"}


def log_level_name(value: str) -> str:
    """``value`` as a level of :data:`LOG_LEVELS`, in any case, ``warn`` and ``fatal`` (the OpenTelemetry
    spellings) included. Raises ``ValueError`` naming the levels."""
    name = value.strip().upper()
    name = _SYNONYMS.get(name, name)
    if name not in LOG_LEVELS:
        raise ValueError(f"{value!r}: a log level is one of {', '.join(level.lower() for level in LOG_LEVELS)} (or warn, fatal)")
    return name


class OperationsSettings(BaseModel):
    """``/metrics``, ``/healthz``, ``/readyz`` and the logs of ``tracefence serve``."""

    metrics_endpoint: str = ""
    """Address of a listener of its own for ``/metrics``, ``/healthz`` and ``/readyz`` (same TLS as the receivers; port
    0: any free port). Empty or ``none``: they are served on the OTLP/HTTP receiver's port (``http_endpoint``), with
    no token. (Its address checks are ``ServiceSettings``'.)"""
    prometheus_metrics: bool = True
    """Serve the self-metrics as Prometheus text at ``/metrics`` (``opentelemetry-exporter-prometheus``)."""
    log_level: str | None = None
    """Lowest level logged: debug, info, warn(ing), error, critical. Unset: ``OTEL_LOG_LEVEL``, else ``info``;
    ``--log-level`` overrides it."""
    log_format: Literal["json", "text"] = "json"
    """Log lines on standard error: one JSON object each, or text (``time level logger: message key=value ...``);
    both keep every field. ``--log-format`` overrides it."""

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str | None) -> str | None:
        return log_level_name(value) if value is not None and value.strip() else None

    def resolved_log_level(self, flag: str | None = None, environ: Mapping[str, str] = os.environ) -> tuple[str, str | None]:
        """The level in force: the flag, else ``log_level``, else ``OTEL_LOG_LEVEL``, else ``INFO``; and the warning
        to log once logging is set up when ``OTEL_LOG_LEVEL`` holds no level (ignored, as the specification asks)."""
        if flag:
            return log_level_name(flag), None
        if self.log_level:
            return self.log_level, None
        value = environ.get(OTEL_LOG_LEVEL, "").strip()
        if value:
            try:
                return log_level_name(value), None
            except ValueError as exc:
                return "INFO", f"{OTEL_LOG_LEVEL}={value} is ignored: {exc}"
        return "INFO", None

    def operations_endpoint(self, http_endpoint: str) -> str:
        """Where ``/metrics``, ``/healthz`` and ``/readyz`` are served: ``metrics_endpoint``, else the OTLP/HTTP
        receiver's address (empty: nowhere)."""
        return self.metrics_endpoint or http_endpoint
