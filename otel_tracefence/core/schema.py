"""The plan as protobuf messages (``proto/tracefence/v1/tracefence.proto``) and as the CLI's JSON.

The CLI's JSON (``tracefence plan --format json``, plan JSON schema ``"2"``) is
``google.protobuf.json_format``'s proto3 JSON mapping of ``TracePlan`` with every
field printed, except that the enum values are the words the span attributes,
tables and ``--fail-on`` use (``"review"``, ``"skip"``, ``"http_method"``; a plan
with no tool step has ``"replayClass": null``), never the protobuf enum names
(``REPLAY_CLASS_REVIEW``, ``DECISION_SKIP``) schema ``"1"`` printed. Its
``schemaVersion`` is that of this JSON layout; the plan's own schema (the
``schema_version`` of the protobuf message, the review API and the spans'
``tracefence.plan.schema_version``) stays ``"1"``. :func:`plan_from_json` reads
both layouts back (docs/DECISIONS.md, 532).
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format

from otel_tracefence.core.value_text import capped
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import SCHEMA_VERSION, Decision, Effect, EffectSource, MalformedField, ReplayClass, StepDecision, ToolStatus, ToolStep, TracePlan

EFFECT = {Effect.READ: pb.EFFECT_READ, Effect.WRITE: pb.EFFECT_WRITE, Effect.UNKNOWN: pb.EFFECT_UNKNOWN}
EFFECT_SOURCE = {
    EffectSource.DECLARED: pb.EFFECT_SOURCE_DECLARED,
    EffectSource.CONFIG: pb.EFFECT_SOURCE_CONFIG,
    EffectSource.MCP_HINT: pb.EFFECT_SOURCE_MCP_HINT,
    EffectSource.HTTP_METHOD: pb.EFFECT_SOURCE_HTTP_METHOD,
    EffectSource.NONE: pb.EFFECT_SOURCE_NONE,
}
STATUS = {
    ToolStatus.OK: pb.TOOL_STATUS_OK,
    ToolStatus.ERROR: pb.TOOL_STATUS_ERROR,
    ToolStatus.TIMEOUT: pb.TOOL_STATUS_TIMEOUT,
    ToolStatus.UNKNOWN: pb.TOOL_STATUS_UNKNOWN,
}
DECISION = {
    Decision.REPLAY: pb.DECISION_REPLAY,
    Decision.SKIP: pb.DECISION_SKIP,
    Decision.REVIEW: pb.DECISION_REVIEW,
    Decision.CONFLICT: pb.DECISION_CONFLICT,
}
REPLAY_CLASS = {
    None: pb.REPLAY_CLASS_UNSPECIFIED,
    ReplayClass.DYNAMIC: pb.REPLAY_CLASS_DYNAMIC,
    ReplayClass.INJECTED: pb.REPLAY_CLASS_INJECTED,
    ReplayClass.STATIC: pb.REPLAY_CLASS_STATIC,
    ReplayClass.REVIEW: pb.REPLAY_CLASS_REVIEW,
}


def step_to_proto(step: ToolStep) -> pb.ToolStep:
    """A normalized step as ``tracefence.v1.ToolStep``; raw values only if the step holds them (opt-in)."""
    message = pb.ToolStep(
        trace_id=step.trace_id,
        call_id=step.call_id,
        span_id=step.span_id,
        tool=step.tool,
        effect=EFFECT[step.effect],
        effect_source=EFFECT_SOURCE[step.effect_source],
        status=STATUS[step.status],
        arguments_sha256=step.arguments_sha256 or "",
        arguments_unavailable=step.arguments_unavailable or "",
        result_recorded=step.result_recorded,
        result_sha256=step.result_sha256 or "",
        attempts=step.attempts,
        start_time_unix_nano=step.start_time_unix_nano,
        requested_only=step.requested_only,
        malformed=[pb.MalformedField(field=f.field, message=capped(f.message)) for f in step.malformed],  # every kept message capped
        arguments_json=step.arguments_json or "",
        result_value=step.result_value or "",
    )
    if step.idempotency_key is not None:
        message.idempotency_key = step.idempotency_key
    return message


def decision_to_proto(decision: StepDecision) -> pb.StepDecision:
    return pb.StepDecision(
        step=step_to_proto(decision.step),
        decision=DECISION[decision.decision],
        reasons=list(decision.reasons),
        related_call_ids=list(decision.related_call_ids),
        related_traces=[pb.RelatedTrace(trace_id=r.trace_id, call_id=r.call_id, reason=r.reason) for r in decision.related_traces],
    )


def plan_to_proto(plan: TracePlan) -> pb.TracePlan:
    """A plan as ``tracefence.v1.TracePlan``."""
    return pb.TracePlan(
        schema_version=plan.schema_version,
        trace_id=plan.trace_id,
        replay_class=REPLAY_CLASS[plan.replay_class],
        steps=[decision_to_proto(d) for d in plan.steps],
        partial=plan.partial,
    )


PLAN_JSON_SCHEMA_VERSION = "2"
"""The layout of the CLI's plan JSON: ``"2"`` spells enum values as words; ``"1"`` (before) as protobuf enum names."""
PLAN_JSON_SCHEMA_VERSIONS = ("1", "2")  # the layouts :func:`plan_from_json` reads


def _words(enum_type: Any, by_model: dict) -> dict[str, str]:
    """A protobuf enum's value names mapped to the model's words (``REPLAY_CLASS_REVIEW`` -> ``review``)."""
    return {enum_type.Name(number): model.value for model, number in by_model.items() if model is not None}


# JSON field (camelCase, as json_format prints it) -> {protobuf enum name: word}, per message.
_ENUM_WORDS = {
    "plan": {"replayClass": _words(pb.ReplayClass, REPLAY_CLASS)},
    "decision": {"decision": _words(pb.Decision, DECISION)},
    "step": {"effect": _words(pb.Effect, EFFECT), "effectSource": _words(pb.EffectSource, EFFECT_SOURCE), "status": _words(pb.ToolStatus, STATUS)},
}
_UNSPECIFIED = {"replayClass": "REPLAY_CLASS_UNSPECIFIED", "decision": "DECISION_UNSPECIFIED", "effect": "EFFECT_UNSPECIFIED",
                "effectSource": "EFFECT_SOURCE_UNSPECIFIED", "status": "TOOL_STATUS_UNSPECIFIED"}


def _respell(data: dict, kind: str, to_words: bool) -> None:
    """Change the enum values of ``data`` (a JSON ``TracePlan``, ``StepDecision`` or ``ToolStep`` of ``kind``) in place:
    names to words (``to_words``), or words to names (names and integers are left for ``json_format`` to read)."""
    for field, words in _ENUM_WORDS[kind].items():
        if field not in data:
            continue
        value = data[field]
        if to_words:
            data[field] = words.get(value) if value != _UNSPECIFIED[field] else None
        elif value is None:
            data[field] = _UNSPECIFIED[field]
        elif isinstance(value, str):
            names = {word: name for name, word in words.items()}
            data[field] = names.get(value, value)


def plan_to_json(plan: TracePlan) -> str:
    """A plan as one line of the CLI's plan JSON (schema :data:`PLAN_JSON_SCHEMA_VERSION`): the proto3 JSON mapping of
    ``TracePlan``, every field printed, enum values as the span attributes' words."""
    data = json_format.MessageToDict(plan_to_proto(plan), always_print_fields_with_no_presence=True)
    data["schemaVersion"] = PLAN_JSON_SCHEMA_VERSION
    _respell(data, "plan", True)
    for decision in data.get("steps", []):
        _respell(decision, "decision", True)
        _respell(decision.get("step", {}), "step", True)
    return json.dumps(data, ensure_ascii=False)


def plan_from_json(text: str | dict) -> pb.TracePlan:
    """One plan as ``tracefence plan --format json`` wrote it, in either layout (schema ``"2"``: words; ``"1"``:
    protobuf enum names; either spelling is taken in both), as ``tracefence.v1.TracePlan`` (its
    ``schema_version`` the plan's schema, :data:`~otel_tracefence.core.model.SCHEMA_VERSION`).

    Raises :class:`ValueError` naming what is wrong: not a JSON object, a ``schemaVersion`` this version does not
    read, or a field ``json_format`` refuses (an unknown enum word, a wrong type). Unknown fields are refused too:
    a plan that says more than this version knows is not read as if it said less."""
    data = json.loads(text) if isinstance(text, str) else text
    if not isinstance(data, dict):
        raise ValueError(f"a plan is a JSON object, not {type(data).__name__}")
    data = json.loads(json.dumps(data))  # a copy, changed below
    version = data.get("schemaVersion")
    if version not in PLAN_JSON_SCHEMA_VERSIONS:
        raise ValueError(f"schemaVersion: {version!r} is not a plan JSON schema this version reads ({', '.join(PLAN_JSON_SCHEMA_VERSIONS)})")
    data["schemaVersion"] = SCHEMA_VERSION
    _respell(data, "plan", False)
    for decision in data.get("steps", []) if isinstance(data.get("steps"), list) else []:
        if isinstance(decision, dict):
            _respell(decision, "decision", False)
            if isinstance(decision.get("step"), dict):
                _respell(decision["step"], "step", False)
    try:
        return json_format.ParseDict(data, pb.TracePlan())
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from None


PLAN_JSON_KEYS = frozenset({"schemaVersion", "traceId", "replayClass", "steps"})  # what every plan JSON line holds


def looks_like_plan_json(line: str) -> bool:
    """True when ``line`` is a JSON object with the keys every line of ``tracefence plan --format json`` has
    (either layout): the first line of a file of saved plans."""
    if not line.lstrip().startswith('{"schemaVersion"'):  # as plan_to_json and json_format print it: no parse of other inputs
        return False
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and PLAN_JSON_KEYS <= data.keys()


def _model(by_model: dict, number: int, what: str) -> Any:
    for model, value in by_model.items():
        if value == number:
            return model
    raise ValueError(f"{what}: {number} is no value this version knows")


def plan_from_proto(message: pb.TracePlan) -> TracePlan:
    """``tracefence.v1.TracePlan`` as the model's :class:`~otel_tracefence.core.model.TracePlan` (what
    ``plan_to_proto`` wrote: the steps' tokens and notes, never written, are empty). Raises :class:`ValueError`
    for an enum value that is unspecified where the model needs one (a step's effect, status or decision)."""
    steps = []
    for d in message.steps:
        step = d.step
        steps.append(StepDecision(
            step=ToolStep(
                trace_id=step.trace_id, call_id=step.call_id, tool=step.tool,
                effect=_model(EFFECT, step.effect, "effect"), status=_model(STATUS, step.status, "status"),
                effect_source=_model(EFFECT_SOURCE, step.effect_source, "effectSource"), span_id=step.span_id,
                idempotency_key=step.idempotency_key if step.HasField("idempotency_key") else None,
                arguments_json=step.arguments_json or None, arguments_sha256=step.arguments_sha256 or None,
                arguments_unavailable=step.arguments_unavailable or None, result_recorded=step.result_recorded,
                result_sha256=step.result_sha256 or None, result_value=step.result_value or None, attempts=step.attempts,
                start_time_unix_nano=step.start_time_unix_nano, requested_only=step.requested_only,
                malformed=tuple(MalformedField(field=m.field, message=m.message) for m in step.malformed),
            ),
            decision=_model(DECISION, d.decision, "decision"),
            reasons=tuple(d.reasons),
            related_call_ids=tuple(d.related_call_ids),
        ))
    return TracePlan(
        trace_id=message.trace_id, replay_class=_model(REPLAY_CLASS, message.replay_class, "replayClass"),
        steps=tuple(steps), partial=message.partial, schema_version=message.schema_version or SCHEMA_VERSION,
    )
