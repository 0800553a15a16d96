"""What the normalizer reads of a configuration, read once per trace instead of once per use.

:class:`~otel_tracefence.core.config.TraceFenceConfig` and :class:`~otel_tracefence.core.config.Limits` are
pydantic models: every attribute read goes through the ``__getattr__`` hook pydantic installs, and
``rule_for`` is an interpreted method, so reading them per span and per value cost about 2,500
instructions per span (docs/DECISIONS.md, 175). :func:`read_config` copies the fields the normalizer
reads into extension types whose attributes are read in C; ``normalize_trace`` hands that to
everything below it, which reads it exactly as it reads a config (the same attribute names).
"""

from __future__ import annotations

from typing import Any

import cython

from otel_tracefence.core.config import Limits, TraceFenceConfig


@cython.cclass
class LimitsReading:
    """A :class:`~otel_tracefence.core.config.Limits`' values, as plain attributes. Any other attribute is the
    model's own (read through)."""

    max_argument_bytes = cython.declare(object, visibility="readonly")
    max_argument_depth = cython.declare(object, visibility="readonly")
    max_related_call_ids = cython.declare(object, visibility="readonly")
    max_tokens_per_value = cython.declare(object, visibility="readonly")
    max_attributes_per_span = cython.declare(object, visibility="readonly")
    _limits = cython.declare(object)

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self.max_argument_bytes = limits.max_argument_bytes
        self.max_argument_depth = limits.max_argument_depth
        self.max_related_call_ids = limits.max_related_call_ids
        self.max_tokens_per_value = limits.max_tokens_per_value
        self.max_attributes_per_span = limits.max_attributes_per_span

    def __getattr__(self, name: str) -> Any:
        return getattr(self._limits, name)


@cython.cclass
class ConfigReading:
    """A :class:`~otel_tracefence.core.config.TraceFenceConfig` as the normalizer reads it: the fields it reads
    as plain attributes (``limits`` a :class:`LimitsReading`), ``rule_for`` answered once per tool name,
    any other attribute the config's own (read through). ``config`` is the configuration read."""

    config = cython.declare(object, visibility="readonly")
    limits = cython.declare(object, visibility="readonly")
    store_raw_values = cython.declare(object, visibility="readonly")
    idempotency_key_arguments = cython.declare(object, visibility="readonly")
    result_error_shapes = cython.declare(object, visibility="readonly")
    redaction = cython.declare(object, visibility="readonly")
    _rules = cython.declare(dict)  # tool name -> the config's rule_for(tool); None when there are no rules

    def __init__(self, config: TraceFenceConfig) -> None:
        self.config = config
        self.limits = LimitsReading(config.limits)
        self.store_raw_values = config.store_raw_values
        self.idempotency_key_arguments = config.idempotency_key_arguments
        self.result_error_shapes = config.result_error_shapes
        self.redaction = config.redaction
        self._rules = {} if config.tool_rules else None

    def rule_for(self, tool: str) -> Any:
        """``config.rule_for(tool)``, asked once per tool name; ``None`` without asking when there are no rules."""
        if self._rules is None:
            return None
        if tool in self._rules:
            return self._rules[tool]
        rule = self._rules[tool] = self.config.rule_for(tool)
        return rule

    def __getattr__(self, name: str) -> Any:
        return getattr(self.config, name)


def read_config(config: TraceFenceConfig | ConfigReading) -> ConfigReading:
    """``config`` read once (a :class:`ConfigReading` is returned as it is)."""
    return config if isinstance(config, ConfigReading) else ConfigReading(config)
