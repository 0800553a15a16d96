import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Effect(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EFFECT_UNSPECIFIED: _ClassVar[Effect]
    EFFECT_READ: _ClassVar[Effect]
    EFFECT_WRITE: _ClassVar[Effect]
    EFFECT_UNKNOWN: _ClassVar[Effect]

class EffectSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EFFECT_SOURCE_UNSPECIFIED: _ClassVar[EffectSource]
    EFFECT_SOURCE_DECLARED: _ClassVar[EffectSource]
    EFFECT_SOURCE_CONFIG: _ClassVar[EffectSource]
    EFFECT_SOURCE_MCP_HINT: _ClassVar[EffectSource]
    EFFECT_SOURCE_HTTP_METHOD: _ClassVar[EffectSource]
    EFFECT_SOURCE_NONE: _ClassVar[EffectSource]

class ToolStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_STATUS_UNSPECIFIED: _ClassVar[ToolStatus]
    TOOL_STATUS_OK: _ClassVar[ToolStatus]
    TOOL_STATUS_ERROR: _ClassVar[ToolStatus]
    TOOL_STATUS_TIMEOUT: _ClassVar[ToolStatus]
    TOOL_STATUS_UNKNOWN: _ClassVar[ToolStatus]

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_REPLAY: _ClassVar[Decision]
    DECISION_SKIP: _ClassVar[Decision]
    DECISION_REVIEW: _ClassVar[Decision]
    DECISION_CONFLICT: _ClassVar[Decision]

class ReplayClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLAY_CLASS_UNSPECIFIED: _ClassVar[ReplayClass]
    REPLAY_CLASS_DYNAMIC: _ClassVar[ReplayClass]
    REPLAY_CLASS_INJECTED: _ClassVar[ReplayClass]
    REPLAY_CLASS_STATIC: _ClassVar[ReplayClass]
    REPLAY_CLASS_REVIEW: _ClassVar[ReplayClass]

class ReviewState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVIEW_STATE_UNSPECIFIED: _ClassVar[ReviewState]
    REVIEW_STATE_OPEN: _ClassVar[ReviewState]
    REVIEW_STATE_RESOLVED: _ClassVar[ReviewState]

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_FOUND_ONCE: _ClassVar[Verdict]
    VERDICT_ABSENT: _ClassVar[Verdict]
    VERDICT_FOUND_TWICE: _ClassVar[Verdict]
    VERDICT_UNDETERMINED: _ClassVar[Verdict]

class ReviewEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVIEW_EVENT_KIND_UNSPECIFIED: _ClassVar[ReviewEventKind]
    REVIEW_EVENT_KIND_PLAN_WRITTEN: _ClassVar[ReviewEventKind]
    REVIEW_EVENT_KIND_PLAN_UPDATED: _ClassVar[ReviewEventKind]
    REVIEW_EVENT_KIND_RESOLVED: _ClassVar[ReviewEventKind]
    REVIEW_EVENT_KIND_REOPENED: _ClassVar[ReviewEventKind]
    REVIEW_EVENT_KIND_VERDICT: _ClassVar[ReviewEventKind]
EFFECT_UNSPECIFIED: Effect
EFFECT_READ: Effect
EFFECT_WRITE: Effect
EFFECT_UNKNOWN: Effect
EFFECT_SOURCE_UNSPECIFIED: EffectSource
EFFECT_SOURCE_DECLARED: EffectSource
EFFECT_SOURCE_CONFIG: EffectSource
EFFECT_SOURCE_MCP_HINT: EffectSource
EFFECT_SOURCE_HTTP_METHOD: EffectSource
EFFECT_SOURCE_NONE: EffectSource
TOOL_STATUS_UNSPECIFIED: ToolStatus
TOOL_STATUS_OK: ToolStatus
TOOL_STATUS_ERROR: ToolStatus
TOOL_STATUS_TIMEOUT: ToolStatus
TOOL_STATUS_UNKNOWN: ToolStatus
DECISION_UNSPECIFIED: Decision
DECISION_REPLAY: Decision
DECISION_SKIP: Decision
DECISION_REVIEW: Decision
DECISION_CONFLICT: Decision
REPLAY_CLASS_UNSPECIFIED: ReplayClass
REPLAY_CLASS_DYNAMIC: ReplayClass
REPLAY_CLASS_INJECTED: ReplayClass
REPLAY_CLASS_STATIC: ReplayClass
REPLAY_CLASS_REVIEW: ReplayClass
REVIEW_STATE_UNSPECIFIED: ReviewState
REVIEW_STATE_OPEN: ReviewState
REVIEW_STATE_RESOLVED: ReviewState
VERDICT_UNSPECIFIED: Verdict
VERDICT_FOUND_ONCE: Verdict
VERDICT_ABSENT: Verdict
VERDICT_FOUND_TWICE: Verdict
VERDICT_UNDETERMINED: Verdict
REVIEW_EVENT_KIND_UNSPECIFIED: ReviewEventKind
REVIEW_EVENT_KIND_PLAN_WRITTEN: ReviewEventKind
REVIEW_EVENT_KIND_PLAN_UPDATED: ReviewEventKind
REVIEW_EVENT_KIND_RESOLVED: ReviewEventKind
REVIEW_EVENT_KIND_REOPENED: ReviewEventKind
REVIEW_EVENT_KIND_VERDICT: ReviewEventKind

class MalformedField(_message.Message):
    __slots__ = ("field", "message")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    field: str
    message: str
    def __init__(self, field: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ToolStep(_message.Message):
    __slots__ = ("trace_id", "call_id", "span_id", "tool", "effect", "effect_source", "status", "idempotency_key", "arguments_sha256", "arguments_unavailable", "result_recorded", "result_sha256", "attempts", "start_time_unix_nano", "requested_only", "malformed", "arguments_json", "result_value")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    EFFECT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_SHA256_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    RESULT_RECORDED_FIELD_NUMBER: _ClassVar[int]
    RESULT_SHA256_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_ONLY_FIELD_NUMBER: _ClassVar[int]
    MALFORMED_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    RESULT_VALUE_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    call_id: str
    span_id: str
    tool: str
    effect: Effect
    effect_source: EffectSource
    status: ToolStatus
    idempotency_key: str
    arguments_sha256: str
    arguments_unavailable: str
    result_recorded: bool
    result_sha256: str
    attempts: int
    start_time_unix_nano: int
    requested_only: bool
    malformed: _containers.RepeatedCompositeFieldContainer[MalformedField]
    arguments_json: str
    result_value: str
    def __init__(self, trace_id: _Optional[str] = ..., call_id: _Optional[str] = ..., span_id: _Optional[str] = ..., tool: _Optional[str] = ..., effect: _Optional[_Union[Effect, str]] = ..., effect_source: _Optional[_Union[EffectSource, str]] = ..., status: _Optional[_Union[ToolStatus, str]] = ..., idempotency_key: _Optional[str] = ..., arguments_sha256: _Optional[str] = ..., arguments_unavailable: _Optional[str] = ..., result_recorded: _Optional[bool] = ..., result_sha256: _Optional[str] = ..., attempts: _Optional[int] = ..., start_time_unix_nano: _Optional[int] = ..., requested_only: _Optional[bool] = ..., malformed: _Optional[_Iterable[_Union[MalformedField, _Mapping]]] = ..., arguments_json: _Optional[str] = ..., result_value: _Optional[str] = ...) -> None: ...

class StepDecision(_message.Message):
    __slots__ = ("step", "decision", "reasons", "related_call_ids", "related_traces")
    STEP_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    RELATED_CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    RELATED_TRACES_FIELD_NUMBER: _ClassVar[int]
    step: ToolStep
    decision: Decision
    reasons: _containers.RepeatedScalarFieldContainer[str]
    related_call_ids: _containers.RepeatedScalarFieldContainer[str]
    related_traces: _containers.RepeatedCompositeFieldContainer[RelatedTrace]
    def __init__(self, step: _Optional[_Union[ToolStep, _Mapping]] = ..., decision: _Optional[_Union[Decision, str]] = ..., reasons: _Optional[_Iterable[str]] = ..., related_call_ids: _Optional[_Iterable[str]] = ..., related_traces: _Optional[_Iterable[_Union[RelatedTrace, _Mapping]]] = ...) -> None: ...

class RelatedTrace(_message.Message):
    __slots__ = ("trace_id", "call_id", "reason")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    call_id: str
    reason: str
    def __init__(self, trace_id: _Optional[str] = ..., call_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class TracePlan(_message.Message):
    __slots__ = ("schema_version", "trace_id", "replay_class", "steps", "partial")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    REPLAY_CLASS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    schema_version: str
    trace_id: str
    replay_class: ReplayClass
    steps: _containers.RepeatedCompositeFieldContainer[StepDecision]
    partial: bool
    def __init__(self, schema_version: _Optional[str] = ..., trace_id: _Optional[str] = ..., replay_class: _Optional[_Union[ReplayClass, str]] = ..., steps: _Optional[_Iterable[_Union[StepDecision, _Mapping]]] = ..., partial: _Optional[bool] = ...) -> None: ...

class ReviewItem(_message.Message):
    __slots__ = ("trace_id", "plan", "state", "service_name", "created_time", "updated_time", "resolved_by", "resolution_note", "resolved_time", "verdict", "verdict_by", "verdict_evidence", "duplicate_effect_found", "later_traces")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATED_TIME_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_NOTE_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_TIME_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    VERDICT_BY_FIELD_NUMBER: _ClassVar[int]
    VERDICT_EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_EFFECT_FOUND_FIELD_NUMBER: _ClassVar[int]
    LATER_TRACES_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    plan: TracePlan
    state: ReviewState
    service_name: str
    created_time: _timestamp_pb2.Timestamp
    updated_time: _timestamp_pb2.Timestamp
    resolved_by: str
    resolution_note: str
    resolved_time: _timestamp_pb2.Timestamp
    verdict: Verdict
    verdict_by: str
    verdict_evidence: str
    duplicate_effect_found: bool
    later_traces: _containers.RepeatedCompositeFieldContainer[RelatedTrace]
    def __init__(self, trace_id: _Optional[str] = ..., plan: _Optional[_Union[TracePlan, _Mapping]] = ..., state: _Optional[_Union[ReviewState, str]] = ..., service_name: _Optional[str] = ..., created_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., resolved_by: _Optional[str] = ..., resolution_note: _Optional[str] = ..., resolved_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., verdict_by: _Optional[str] = ..., verdict_evidence: _Optional[str] = ..., duplicate_effect_found: _Optional[bool] = ..., later_traces: _Optional[_Iterable[_Union[RelatedTrace, _Mapping]]] = ...) -> None: ...

class ReviewSpans(_message.Message):
    __slots__ = ("trace_id", "spans", "spans_left_out", "steps")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPANS_FIELD_NUMBER: _ClassVar[int]
    SPANS_LEFT_OUT_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    spans: _containers.RepeatedCompositeFieldContainer[ReviewSpan]
    spans_left_out: int
    steps: _containers.RepeatedCompositeFieldContainer[ReviewStepTimes]
    def __init__(self, trace_id: _Optional[str] = ..., spans: _Optional[_Iterable[_Union[ReviewSpan, _Mapping]]] = ..., spans_left_out: _Optional[int] = ..., steps: _Optional[_Iterable[_Union[ReviewStepTimes, _Mapping]]] = ...) -> None: ...

class ReviewSpan(_message.Message):
    __slots__ = ("span_id", "parent_span_id", "name", "kind", "start_time_unix_nano", "end_time_unix_nano", "status", "call_id")
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    START_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    END_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    status: str
    call_id: str
    def __init__(self, span_id: _Optional[str] = ..., parent_span_id: _Optional[str] = ..., name: _Optional[str] = ..., kind: _Optional[str] = ..., start_time_unix_nano: _Optional[int] = ..., end_time_unix_nano: _Optional[int] = ..., status: _Optional[str] = ..., call_id: _Optional[str] = ...) -> None: ...

class ReviewStepTimes(_message.Message):
    __slots__ = ("call_id", "span_id", "start_time_unix_nano", "end_time_unix_nano", "fields", "fields_unavailable")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    END_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    span_id: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    fields: _containers.RepeatedCompositeFieldContainer[ArgumentField]
    fields_unavailable: bool
    def __init__(self, call_id: _Optional[str] = ..., span_id: _Optional[str] = ..., start_time_unix_nano: _Optional[int] = ..., end_time_unix_nano: _Optional[int] = ..., fields: _Optional[_Iterable[_Union[ArgumentField, _Mapping]]] = ..., fields_unavailable: _Optional[bool] = ...) -> None: ...

class ArgumentField(_message.Message):
    __slots__ = ("name", "sha256", "value_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    sha256: str
    value_json: str
    def __init__(self, name: _Optional[str] = ..., sha256: _Optional[str] = ..., value_json: _Optional[str] = ...) -> None: ...

class ReviewEvent(_message.Message):
    __slots__ = ("kind", "time", "actor", "note", "state", "replay_class", "verdict", "evidence")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_CLASS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    kind: ReviewEventKind
    time: _timestamp_pb2.Timestamp
    actor: str
    note: str
    state: ReviewState
    replay_class: ReplayClass
    verdict: Verdict
    evidence: str
    def __init__(self, kind: _Optional[_Union[ReviewEventKind, str]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., note: _Optional[str] = ..., state: _Optional[_Union[ReviewState, str]] = ..., replay_class: _Optional[_Union[ReplayClass, str]] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., evidence: _Optional[str] = ...) -> None: ...

class ListReviewItemsRequest(_message.Message):
    __slots__ = ("state", "replay_classes", "service_name", "page_size", "page_token")
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_CLASSES_FIELD_NUMBER: _ClassVar[int]
    SERVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    state: ReviewState
    replay_classes: _containers.RepeatedScalarFieldContainer[ReplayClass]
    service_name: str
    page_size: int
    page_token: str
    def __init__(self, state: _Optional[_Union[ReviewState, str]] = ..., replay_classes: _Optional[_Iterable[_Union[ReplayClass, str]]] = ..., service_name: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListReviewItemsResponse(_message.Message):
    __slots__ = ("items", "next_page_token")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ReviewItem]
    next_page_token: str
    def __init__(self, items: _Optional[_Iterable[_Union[ReviewItem, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetReviewItemRequest(_message.Message):
    __slots__ = ("trace_id",)
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    def __init__(self, trace_id: _Optional[str] = ...) -> None: ...

class GetReviewHistoryRequest(_message.Message):
    __slots__ = ("trace_id",)
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    def __init__(self, trace_id: _Optional[str] = ...) -> None: ...

class GetReviewHistoryResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ReviewEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[ReviewEvent, _Mapping]]] = ...) -> None: ...

class ResolveReviewItemRequest(_message.Message):
    __slots__ = ("trace_id", "resolved_by", "note", "verdict")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    resolved_by: str
    note: str
    verdict: Verdict
    def __init__(self, trace_id: _Optional[str] = ..., resolved_by: _Optional[str] = ..., note: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ...) -> None: ...

class RecordReviewVerdictRequest(_message.Message):
    __slots__ = ("trace_id", "actor", "verdict", "evidence")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    actor: str
    verdict: Verdict
    evidence: str
    def __init__(self, trace_id: _Optional[str] = ..., actor: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., evidence: _Optional[str] = ...) -> None: ...
