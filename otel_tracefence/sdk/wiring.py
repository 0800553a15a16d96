"""Wiring mistakes caught where the processor is built, with the fix in the message."""

from __future__ import annotations

import difflib
import dis
import logging
import os
from typing import Any, Mapping, Sequence

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

from otel_tracefence.core.config import CONFIG_FILE_ENV, ENV_PREFIX, ConfigError, TraceFenceConfig, load_config

_log = logging.getLogger("otel_tracefence")


def check_downstream(downstream: Sequence[Any], owner: str) -> None:
    """Raise :class:`TypeError` unless every item of ``downstream`` is a span processor.

    An exporter (``OTLPSpanExporter()``, ``InMemorySpanExporter()``) given where a processor
    belongs would otherwise be accepted and fail on every span; the message names the fix.
    """
    for item in downstream:
        name = type(item).__name__
        if isinstance(item, SpanExporter) or (callable(getattr(item, "export", None)) and not callable(getattr(item, "on_end", None))):
            raise TypeError(
                f"{owner} wraps span processors, and {name} is a span exporter: wrap it in a processor, "
                f"{owner}(BatchSpanProcessor({name}(...))), or SimpleSpanProcessor in tests"
            )
        if not isinstance(item, SpanProcessor) and not all(callable(getattr(item, m, None)) for m in ("on_start", "on_end", "shutdown", "force_flush")):
            raise TypeError(f"{owner} wraps span processors (opentelemetry.sdk.trace.SpanProcessor), not {name}")


def check_settings(settings: Mapping[str, Any], owner: str) -> None:
    """Raise :class:`TypeError` for a keyword argument that is no :class:`TraceFenceConfig` setting,
    naming the closest setting (a misspelt keyword is the caller's mistake, not the environment's)."""
    fields = TraceFenceConfig.model_fields
    for key in settings:
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the settings are {', '.join(sorted(fields))}"
            raise TypeError(f"{owner}() got an unexpected keyword argument {key!r}{hint}")


def check_config(config: Any, owner: str) -> None:
    """Raise :class:`TypeError` for a ``config`` that is neither ``None`` nor a :class:`TraceFenceConfig` (a file's path
    is the likeliest: the command line takes one), saying how to load one."""
    if config is not None and not isinstance(config, TraceFenceConfig):
        raise TypeError(
            f"{owner}(config=...) takes a TraceFenceConfig, not {type(config).__name__}: load a file with "
            "otel_tracefence.core.config.load_config(path), or name it in OTEL_TRACEFENCE_CONFIG and leave config out"
        )


def does_nothing(method: Any) -> bool:
    """True when ``method`` (a function or bound method) is Python code whose body only returns ``None``
    (``pass``, or a docstring alone), as ``BatchSpanProcessor.on_start`` and ``SimpleSpanProcessor.on_start``
    are in the OpenTelemetry Python SDK. Read from its bytecode, so a version that gives it a body is called again."""
    code = getattr(getattr(method, "__func__", method), "__code__", None)
    if code is None:
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP", "CACHE")]
    return ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)])


def config_or_defaults(settings: Mapping[str, Any]) -> TraceFenceConfig:
    """The configuration, ``settings`` (keyword arguments) over the environment and the config file; a setting
    the environment or the file gives wrong falls back to its default, logged, the others are kept: a typo in a
    deployment's variables never keeps the agent from starting (DECISIONS 695). A missing or unreadable config
    file (``OTEL_TRACEFENCE_CONFIG``) is left out, logged, the rest kept.

    A bad ``OTEL_TRACEFENCE_<SETTING>`` variable is hidden from the reload (and put
    back afterwards): the settings library parses every variable before any
    argument can override it.
    """
    overrides = dict(settings)
    hidden: dict[str, str] = {}
    try:
        for _ in range(len(TraceFenceConfig.model_fields)):
            try:
                return load_config(**overrides)
            except ConfigError as exc:
                bad = [f for f in exc.fields if f in TraceFenceConfig.model_fields and f not in overrides]
                if not bad and CONFIG_FILE_ENV in os.environ and not exc.fields:  # the file named is at fault
                    _log.error("tracefence: %s; planning without it, the other settings as given", exc)
                    hidden[CONFIG_FILE_ENV] = os.environ.pop(CONFIG_FILE_ENV)
                    continue
                if not bad:
                    _log.error("tracefence: %s; planning with the default settings instead", exc)
                    break
                _log.error("tracefence: %s; using the default for %s, the other settings as given", exc, ", ".join(bad))
                for field in bad:
                    overrides[field] = TraceFenceConfig.model_fields[field].get_default(call_default_factory=True)
                    prefix = f"{ENV_PREFIX}{field.upper()}"
                    for name in [n for n in os.environ if n.upper() == prefix or n.upper().startswith(prefix + "__")]:
                        hidden[name] = os.environ.pop(name)
    finally:
        os.environ.update(hidden)
    return TraceFenceConfig.model_construct()  # the defaults alone: no file, no environment
