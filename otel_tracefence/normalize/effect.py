"""A step's effect: declared by the producer, else the operator's rules, else hints, else unknown."""

from __future__ import annotations

from typing import Any, Mapping

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import (
    EFFECT_UNKNOWN, READ, SOURCE_CONFIG, SOURCE_DECLARED, SOURCE_HTTP_METHOD, SOURCE_MCP_HINT, SOURCE_NONE, WRITE, Effect, EffectSource, MalformedField,
)
from otel_tracefence.core.value_text import described, not_one_of
from otel_tracefence.normalize.conventions import (
    HTTP_METHOD_KEYS, HTTP_SAFE_METHODS, HTTP_UNSAFE_METHODS, MCP_DESTRUCTIVE_HINT_KEYS, MCP_READ_ONLY_HINT_KEYS,
)
from otel_tracefence.normalize.http import recorded_method

DECLARABLE = {"read": READ, "write": WRITE, "unknown": EFFECT_UNKNOWN}
MCP_HINT_KEYS = (*MCP_READ_ONLY_HINT_KEYS, *MCP_DESTRUCTIVE_HINT_KEYS)


@cython.ccall
def parse_declared(value: Any) -> Effect | MalformedField:
    """A declared effect must be exactly ``read``, ``write`` or ``unknown``: anything else is malformed."""
    effect = DECLARABLE.get(value) if isinstance(value, str) else None
    if effect is None:
        return MalformedField("effect", not_one_of("effect", value, DECLARABLE))
    return effect


def _method_effect(method: str) -> Effect:
    """An HTTP method's effect, the method compared as written (tokens are case-sensitive, RFC 9110 section
    9.1): a safe method reads (9.2.1), another method RFC 9110 or RFC 5789 defines may write, and any other
    token (``get``, ``_OTHER``, ``PURGE``) is ``unknown`` (docs/DECISIONS.md 204)."""
    if method in HTTP_SAFE_METHODS:
        return READ
    return WRITE if method in HTTP_UNSAFE_METHODS else EFFECT_UNKNOWN


def _hints(attributes: Mapping[str, Any]) -> list[tuple[Effect, EffectSource, str]]:
    """Every effect hint the span records, as (effect, source, ``key=value``), in the table's order."""
    found = []
    for key in MCP_READ_ONLY_HINT_KEYS:
        hint = attributes.get(key)
        if isinstance(hint, bool):
            # MCP: readOnlyHint=true means the tool does not modify its environment.
            found.append(((READ if hint else WRITE), SOURCE_MCP_HINT, f"{key}={str(hint).lower()}"))
    for key in MCP_DESTRUCTIVE_HINT_KEYS:
        if attributes.get(key) is True:  # false says the writes are additive: no read, no hint either way
            found.append((WRITE, SOURCE_MCP_HINT, f"{key}=true"))
    for key in HTTP_METHOD_KEYS:
        method = attributes.get(key)
        if isinstance(method, str) and method:
            found.append((_method_effect(method), SOURCE_HTTP_METHOD, f"{key}={method}"))
    return found


def _hint(attributes: Mapping[str, Any]) -> tuple[Effect, EffectSource] | MalformedField | None:
    """The effect the span's hints give, and their source; a :class:`MalformedField` (reason
    ``effect_hints_conflict``) when two hints give different effects: contradictory hints are held,
    never resolved by order (docs/DECISIONS.md 189), and (reason ``malformed_effect``) when an MCP hint is not a
    boolean (``"true"``, ``1``); ``None`` without hints."""
    for key in MCP_HINT_KEYS:  # MCP's tool annotations are booleans (MCP specification, ToolAnnotations)
        value = attributes.get(key)
        if value is not None and not isinstance(value, bool):
            return MalformedField("effect", f"effect hint {key} ({described(value)}) is not a boolean: not read as either (docs/DECISIONS.md 287)")
    hints = _hints(attributes)
    if not hints:
        return None
    if any(effect is not hints[0][0] for effect, _, _ in hints):
        said = ", ".join(f"{text} ({effect.value})" for effect, _, text in hints)
        return MalformedField("effect", f"effect hints contradict each other: {said}", reason=reasons.EFFECT_HINTS_CONFLICT)
    disagreement = recorded_method(attributes)[1]
    if disagreement is not None:  # GET beside HEAD, or a method_original: no one method (346, 374), as in time and late
        return MalformedField("effect", f"effect hints contradict each other: the HTTP method keys record no one method ({disagreement})", reason=reasons.EFFECT_HINTS_CONFLICT)
    return hints[0][0], hints[0][1]


def resolve_effect(
    declared: Any, tool: str, attributes: Mapping[str, Any], config: TraceFenceConfig
) -> tuple[Effect, EffectSource, MalformedField | None]:
    """The effect and which source decided it. ``declared`` is ``None`` when the producer said nothing.

    An invalid declaration is malformed and never guessed, and so are hints that contradict each
    other (``effect_hints_conflict``): the effect is then ``unknown``.
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
    if isinstance(hint, MalformedField):
        return EFFECT_UNKNOWN, SOURCE_NONE, hint
    if hint is not None:
        return hint[0], hint[1], None
    return EFFECT_UNKNOWN, SOURCE_NONE, None
