"""The plan as protobuf messages (``proto/tracefence/v1/tracefence.proto``) and their canonical JSON.

The CLI's JSON is ``google.protobuf.json_format``'s canonical proto3 JSON
mapping of ``TracePlan``, with every field printed, so scripts and the gRPC API
read one schema.
"""

from __future__ import annotations

from google.protobuf import json_format

from otel_tracefence.core.value_text import capped
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, StepDecision, ToolStatus, ToolStep, TracePlan

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


def plan_to_json(plan: TracePlan) -> str:
    """A plan as one line of canonical proto3 JSON, every field printed."""
    return json_format.MessageToJson(plan_to_proto(plan), indent=None, always_print_fields_with_no_presence=True)
