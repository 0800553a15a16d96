"""Wiring mistakes caught where the processor is built, with the fix in the message."""

from __future__ import annotations

import difflib
import dis
from typing import Any, Mapping, Sequence

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

from otel_tracefence.core.config import TraceFenceConfig


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


def does_nothing(method: Any) -> bool:
    """True when ``method`` (a function or bound method) is Python code whose body only returns ``None``
    (``pass``, or a docstring alone), as ``BatchSpanProcessor.on_start`` and ``SimpleSpanProcessor.on_start``
    are in the OpenTelemetry Python SDK. Read from its bytecode, so a version that gives it a body is called again."""
    code = getattr(getattr(method, "__func__", method), "__code__", None)
    if code is None:
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP", "CACHE")]
    return ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)])
