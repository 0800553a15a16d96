""":func:`declare`: label the tool span a framework already made with its effect, idempotency key and result
stability; a call that finds no recording tool span is counted (``tracefence.declare.unrecorded``) and
warned about once per tool."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Mapping

from opentelemetry import trace
from opentelemetry.trace import Span
from otel_tracefence.agent.attributes import (
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_NAME,
    TRACEFENCE_EFFECT,
    TRACEFENCE_IDEMPOTENCY_KEY,
    TRACEFENCE_RESULT_STABLE,
    _check_effect,
    _check_key,
    _check_stable,
)

_log = logging.getLogger("otel_tracefence.agent.instrument")  # the helpers' one logger, as before the split


def declare(
    effect: str | None = None,
    *,
    idempotency_key: str | None = None,
    result_stable: bool | None = None,
    span: Span | None = None,
    tool: str | None = None,
) -> None:
    """Label a tool span with the producer's ``tracefence.effect``, ``tracefence.idempotency_key`` and
    ``tracefence.result_stable``.

    For a tool body that runs under a span someone else made (a framework's
    ``execute_tool`` / ``running tool`` span, an OpenInference ``TOOL`` span, or a
    :func:`tool_call` decorator's span): call it inside the body, where that span is
    current, or pass ``span``. ``effect`` is ``"read"``, ``"write"`` or ``None``
    (leave it to the operator's rules); ``idempotency_key`` is the key the
    destination deduplicates on, a non-empty string or ``None``. ``None`` values
    are not written. Never use the model's tool-call id as the key: models mint a
    new one each turn. ``result_stable=False`` says the tool's results differ between
    executions (a page id, a transaction id, a timestamp the agent may branch on; seed
    000): a read so labelled is never re-executed by a replay, its recorded result is
    injected (decision ``skip``, reason ``unstable_result``). ``True`` says they are
    stable, ``None`` leaves it to the operator's rules (default: stable). ``tool``
    names the tool in the warning below (default: the calling function's name).

    Raises :class:`ValueError` for any other effect, key or ``result_stable``. A
    ``span`` given, or a recording current span, is labelled, unless the current
    span's attributes already mark it as another kind than a tool span (an agent,
    chain or model span: labelling it would make a tool step of it). When tracing
    is on (an SDK tracer provider is set) and there is no current span (as inside
    tools of OpenInference's LangChain instrumentation), or it is of another kind,
    nothing is written: a warning is logged once per tool name with the remedy
    (``tool_rules`` in the configuration), and every such call is counted in the
    ``tracefence.declare.unrecorded`` metric. Without an SDK, or for a trace that
    was not sampled, it does nothing.
    """
    effect = _check_effect(effect)
    idempotency_key = _check_key(idempotency_key)
    result_stable = _check_stable(result_stable)
    target = span if span is not None else trace.get_current_span()
    try:
        if not target.is_recording():
            if span is None and not target.get_span_context().is_valid and _tracing_on():
                _unrecorded(tool or _caller_name(), effect, idempotency_key, "there is no current span")
            return
        if span is None and _is_tool_span(target) is False:
            _unrecorded(tool or _caller_name(), effect, idempotency_key, f"the current span {_span_name(target)!r} is not a tool span")
            return
        if effect is not None:
            target.set_attribute(TRACEFENCE_EFFECT, effect)
        if idempotency_key is not None:
            target.set_attribute(TRACEFENCE_IDEMPOTENCY_KEY, idempotency_key)
        if result_stable is not None:
            target.set_attribute(TRACEFENCE_RESULT_STABLE, result_stable)
    except Exception:  # noqa: BLE001 - a broken span implementation must not break the tool
        _log.debug("tracefence: could not label span", exc_info=True)


# The attributes that give a span's kind in the conventions the normalizer reads, with the values
# that make it a tool step (spelled here so that an agent importing this module does not load the
# normalizer). Many instrumentations set them only when the span ends, so a span that carries none
# yet is labelled: only a span already marked as another kind (an agent, chain or model span) is not.
_KIND_KEYS_TOOL_VALUES = {
    GEN_AI_OPERATION_NAME: ("execute_tool",),
    "openinference.span.kind": ("TOOL",),
    "traceloop.span.kind": ("tool",),
    "langfuse.observation.type": ("tool",),
    "langsmith.span.kind": ("tool", "TOOL"),
    "mlflow.spanType": ("TOOL",),
}


def _is_tool_span(span: Any) -> bool | None:
    """``False`` when a recording span's attributes, as they are now, mark it as another kind than a
    tool span (``openinference.span.kind`` ``CHAIN``, ``gen_ai.operation.name`` ``chat``, ...) and it
    carries no ``tracefence.*`` label; ``True`` when they mark a tool span; ``None`` when they say
    nothing or cannot be read (not an SDK span), and the span is labelled rather than guessed about."""
    try:
        attributes = getattr(span, "attributes", None)
        if not isinstance(attributes, Mapping):
            return None
        if any(isinstance(k, str) and k.startswith("tracefence.") for k in attributes):
            return True
        kinds = [(key, attributes[key]) for key in _KIND_KEYS_TOOL_VALUES if key in attributes]
        if not kinds:
            return None
        return any(value in _KIND_KEYS_TOOL_VALUES[key] for key, value in kinds)
    except Exception:  # noqa: BLE001
        return None


def _span_name(span: Any) -> str:
    try:
        name = getattr(span, "name", "")
        return name if isinstance(name, str) else ""
    except Exception:  # noqa: BLE001
        return ""


def _tracing_on() -> bool:
    """True when a tracer provider other than the API's default (proxy or no-op) is set globally."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _caller_name() -> str:
    """The name of the function that called :func:`declare` (the tool body)."""
    import sys

    try:
        return sys._getframe(2).f_code.co_name
    except (AttributeError, ValueError):  # pragma: no cover - interpreters without frames
        return "<unknown>"


UNRECORDED_METRIC = "tracefence.declare.unrecorded"
_warned_tools: set[str] = set()
_warned_lock = threading.Lock()
_unrecorded_counter: Any = None


def _unrecorded(tool: str, effect: str | None, key: str | None, why: str) -> None:
    """Count a declaration no span records, and warn once per tool name with the remedy. Never raises."""
    global _unrecorded_counter
    try:
        if _unrecorded_counter is None:
            from opentelemetry import metrics

            from otel_tracefence.core.telemetry import instrument

            _unrecorded_counter = instrument(metrics.get_meter("otel_tracefence"), UNRECORDED_METRIC)
        _unrecorded_counter.add(1, {"tracefence.component": "instrument", GEN_AI_TOOL_NAME: tool})
        with _warned_lock:
            if tool in _warned_tools:
                return
            _warned_tools.add(tool)
        rule = [f"match: {json.dumps(tool)}"]
        if effect is not None:
            rule.append(f"effect: {effect}")
        if key is not None:
            rule.append("idempotency_key_argument: <argument name>")
        _log.warning(
            "tracefence: declare() in tool %r recorded nothing: %s to label, so its calls plan without this label "
            "(effect_unknown unless a rule says otherwise). Label the tool in the configuration instead: "
            "tool_rules: [{%s}]. See docs/processor.md, \"Labelling tools\", for your framework.",
            tool,
            why,
            ", ".join(rule),
        )
    except Exception:  # noqa: BLE001 - the tool must run whatever happens here
        pass

