"""A step's effect: declared by the producer, else the operator's rules, else hints, else unknown."""

from __future__ import annotations

from typing import Any, Mapping

import cython

from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.model import (
    EFFECT_UNKNOWN, READ, SOURCE_CONFIG, SOURCE_DECLARED, SOURCE_HTTP_METHOD, SOURCE_MCP_HINT, SOURCE_NONE, WRITE, Effect, EffectSource, MalformedField,
)
from otel_tracefence.normalize.conventions import (
    HTTP_METHOD_KEYS, HTTP_SAFE_METHODS, MCP_READ_ONLY_HINT_KEYS,
)

DECLARABLE = {"read": READ, "write": WRITE, "unknown": EFFECT_UNKNOWN}


@cython.ccall
def parse_declared(value: Any) -> Effect | MalformedField:
    """A declared effect must be exactly ``read``, ``write`` or ``unknown``: anything else is malformed."""
    effect = DECLARABLE.get(value) if isinstance(value, str) else None
    if effect is None:
        return MalformedField("effect", f"effect {value!r} is not one of read, write, unknown")
    return effect


@cython.ccall
def _hint(attributes: Mapping[str, Any]) -> tuple[Effect, EffectSource] | None:
    for key in MCP_READ_ONLY_HINT_KEYS:
        hint = attributes.get(key)
        if isinstance(hint, bool):
            # MCP: readOnlyHint=true means the tool does not modify its environment.
            return (READ if hint else WRITE), SOURCE_MCP_HINT
    for key in HTTP_METHOD_KEYS:
        method = attributes.get(key)
        if isinstance(method, str) and method:
            return (READ if method.upper() in HTTP_SAFE_METHODS else WRITE), SOURCE_HTTP_METHOD
    return None


def resolve_effect(
    declared: Any, tool: str, attributes: Mapping[str, Any], config: TraceFenceConfig
) -> tuple[Effect, EffectSource, MalformedField | None]:
    """The effect and which source decided it. ``declared`` is ``None`` when the producer said nothing.

    An invalid declaration is malformed and never guessed: the effect is then ``unknown``.
    """
    if declared is not None:
        parsed = parse_declared(declared)
        if isinstance(parsed, MalformedField):
            return EFFECT_UNKNOWN, SOURCE_DECLARED, parsed
        return parsed, SOURCE_DECLARED, None
    rule = config.rule_for(tool) if tool else None
    if rule is not None and rule.effect is not None:
        return DECLARABLE[rule.effect], SOURCE_CONFIG, None
    hint = _hint(attributes)
    if hint is not None:
        return hint[0], hint[1], None
    return EFFECT_UNKNOWN, SOURCE_NONE, None
