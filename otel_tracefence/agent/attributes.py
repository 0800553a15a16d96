"""The attributes the agent-side helpers set: the OpenTelemetry GenAI semantic conventions' names (from
``opentelemetry-semantic-conventions`` when installed) and tracefence's producer labels, with the checks of
the values a developer passes for them (a mistake raises :class:`ValueError` where the helper is called)."""

from __future__ import annotations

import json
from typing import Any


try:  # opentelemetry-semantic-conventions, when installed (incubating GenAI attributes).
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
    from opentelemetry.semconv._incubating.attributes import error_attributes as _error

    GEN_AI_OPERATION_NAME: str = _gen_ai.GEN_AI_OPERATION_NAME
    GEN_AI_TOOL_NAME: str = _gen_ai.GEN_AI_TOOL_NAME
    GEN_AI_TOOL_CALL_ID: str = _gen_ai.GEN_AI_TOOL_CALL_ID
    GEN_AI_TOOL_CALL_ARGUMENTS: str = _gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
    GEN_AI_TOOL_CALL_RESULT: str = _gen_ai.GEN_AI_TOOL_CALL_RESULT
    EXECUTE_TOOL: str = _gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
    ERROR_TYPE: str = _error.ERROR_TYPE
except (ImportError, AttributeError):  # pragma: no cover - older or absent semantic-conventions package
    GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
    GEN_AI_TOOL_NAME = "gen_ai.tool.name"
    GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
    GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
    GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
    EXECUTE_TOOL = "execute_tool"
    ERROR_TYPE = "error.type"

# The producer's own labels (DESIGN.md, "Normalized step"); the same strings as
# otel_tracefence.normalize.conventions.TRACEFENCE_*, spelled here so that an agent
# importing this module does not load the normalizer (pydantic, protobuf).
TRACEFENCE_EFFECT = "tracefence.effect"
TRACEFENCE_STATUS = "tracefence.status"
TRACEFENCE_IDEMPOTENCY_KEY = "tracefence.idempotency_key"
TRACEFENCE_RESULT_STABLE = "tracefence.result_stable"

EFFECTS = ("read", "write")
"""The effects a producer may declare; ``None`` leaves the effect to the operator's rules."""


def _check_effect(effect: Any) -> str | None:
    if effect is not None and (not isinstance(effect, str) or effect not in EFFECTS):
        raise ValueError(f"effect must be 'read', 'write' or None, not {effect!r}")
    return effect


def _check_key(key: Any) -> str | None:
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError(f"idempotency_key must be a non-empty string or None, not {key!r}")
    return key


def _check_stable(result_stable: Any) -> bool | None:
    if result_stable is not None and not isinstance(result_stable, bool):
        raise ValueError(f"result_stable must be True, False or None, not {result_stable!r}")
    return result_stable


def _check_call_id(call_id: Any) -> str | None:
    if call_id is None:
        return None
    if isinstance(call_id, bool) or not isinstance(call_id, (str, int)) or not str(call_id):
        raise ValueError(f"call_id must be a non-empty string (or an integer) or None, not {call_id!r}")
    return str(call_id)


def _to_json(value: Any) -> str | None:
    """``value`` as JSON text, objects that JSON lacks as their ``str()``; ``None`` if it cannot be encoded.

    Never raises. NaN and infinities are refused (``allow_nan=False``): they are not
    JSON, and the normalizer would read the text as malformed. The text is ASCII.
    """
    try:
        return json.dumps(value, default=str, allow_nan=False)
    except Exception:  # noqa: BLE001 - circular data, bad keys, a failing __str__: leave it out
        return None

