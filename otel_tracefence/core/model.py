"""The normalized step and the plan, as plain immutable values.

These mirror the protobuf messages in ``proto/tracefence/v1/tracefence.proto``
(``ToolStep``, ``StepDecision``, ``TracePlan``); :mod:`otel_tracefence.core.schema`
converts between the two. The rules work on these dataclasses because they are
cheaper to build and read than protobuf messages in the hot path.

``MalformedField``, ``ToolStep``, ``StepDecision`` and ``TracePlan`` are frozen dataclasses
(``dataclasses.fields``, ``replace``, ``asdict``, ``==`` and ``hash`` by value, ``repr``) declared
with Cython's ``cython.dataclasses.dataclass`` on a ``cython.cclass`` (docs/DECISIONS.md, 142). In the
compiled engine each is an extension type whose fields are set in C: assigning one raises
``AttributeError`` ("not writable"). In the pure-Python engine each is the standard library's frozen
dataclass (``cython``'s pure-Python shadow passes the class to ``dataclasses.dataclass``): assigning
raises ``dataclasses.FrozenInstanceError``, a subclass of ``AttributeError``. Catch ``AttributeError``.
"""

from __future__ import annotations

import enum
from operator import attrgetter

import cython

from otel_tracefence.core.reprs import fields_repr

SCHEMA_VERSION = "1"
"""Version of the plan's schema, written as ``schema_version`` and ``tracefence.plan.schema_version``."""


class Effect(str, enum.Enum):
    """What a tool call does outside the agent (DESIGN.md, normalized step)."""

    READ = "read"
    WRITE = "write"
    UNKNOWN = "unknown"


class EffectSource(str, enum.Enum):
    """Which source decided a step's effect; the first that says anything wins."""

    DECLARED = "declared"
    CONFIG = "config"
    MCP_HINT = "mcp_hint"
    HTTP_METHOD = "http_method"
    NONE = "none"


class ToolStatus(str, enum.Enum):
    """How a tool call ended, as far as its trace can show."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"


class Decision(str, enum.Enum):
    """What may be done with one step. No value schedules a write."""

    REPLAY = "replay"
    SKIP = "skip"
    REVIEW = "review"
    CONFLICT = "conflict"


class ReplayClass(str, enum.Enum):
    """What a whole trace allows, from safest (``dynamic``) to most restrictive (``review``)."""

    DYNAMIC = "dynamic"
    INJECTED = "injected"
    STATIC = "static"
    REVIEW = "review"

    @property
    def rank(self) -> int:
        """0 for ``dynamic`` up to 3 for ``review``."""
        return _CLASS_ORDER.index(self)


_CLASS_ORDER = (ReplayClass.DYNAMIC, ReplayClass.INJECTED, ReplayClass.STATIC, ReplayClass.REVIEW)

# Every member as a module constant, for the rules' per-step tests. On Python 3.11 reading a member off its class
# (``Effect.READ``) goes through the hook ``EnumType.__getattr__`` installs on the class, about 1,000 instructions
# each; a module constant is a plain global read. Same objects: ``step.effect is READ`` is ``step.effect is Effect.READ``.
READ, WRITE, EFFECT_UNKNOWN = Effect.READ, Effect.WRITE, Effect.UNKNOWN
SOURCE_DECLARED, SOURCE_CONFIG, SOURCE_MCP_HINT, SOURCE_HTTP_METHOD, SOURCE_NONE = (
    EffectSource.DECLARED, EffectSource.CONFIG, EffectSource.MCP_HINT, EffectSource.HTTP_METHOD, EffectSource.NONE)
OK, ERROR, TIMEOUT, STATUS_UNKNOWN = ToolStatus.OK, ToolStatus.ERROR, ToolStatus.TIMEOUT, ToolStatus.UNKNOWN
REPLAY, SKIP, REVIEW, CONFLICT = Decision.REPLAY, Decision.SKIP, Decision.REVIEW, Decision.CONFLICT
CLASS_DYNAMIC, CLASS_INJECTED, CLASS_STATIC, CLASS_REVIEW = _CLASS_ORDER


@cython.dataclasses.dataclass(repr=False, frozen=True)
@cython.cclass
class MalformedField:
    """A field of a tool span or row that could not be read: never guessed.

    ``reason`` is the reason code the step is held with when ``malformed_<field>``
    would say less than is known (``arguments_truncated``, ``unrecognized_tool_span``).
    """

    field: str
    message: str
    reason: str | None = None

    @property
    def reason_code(self) -> str:
        """The reason code of the ``review`` this field gives its step."""
        return self.reason or "malformed_" + self.field

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


@cython.dataclasses.dataclass(repr=False, frozen=True)
@cython.cclass
class ToolStep:
    """One tool call, normalized from whichever convention recorded it.

    ``arguments_sha256`` is the SHA-256 (hex) of the RFC 8785 canonical JSON in
    ``arguments_json``; both are ``None`` when the arguments are unavailable, and
    ``arguments_unavailable`` then says why (a reason code). ``start_time_unix_nano``
    (nanoseconds) and ``sequence`` (position in the source file) order the steps
    of a trace; the planner never depends on the order of its input list.

    ``result_stable`` is ``False`` for a tool whose results differ between
    executions (a read so labelled is never re-executed: ``unstable_result``).
    ``argument_tokens`` / ``result_tokens`` are the id-like tokens of the
    arguments and the recorded result (``normalize/tokens.py``), each as the
    first 8 bytes of its SHA-256 read as an unsigned big-endian integer, sorted
    and unique: the planner links steps through them (``consumes_result_of``)
    without any raw value. They are never written to a plan, a span or the
    review store.
    """

    trace_id: str
    call_id: str
    tool: str
    effect: Effect
    status: ToolStatus
    effect_source: EffectSource = EffectSource.NONE
    span_id: str = ""
    idempotency_key: str | None = None
    arguments_json: str | None = None
    arguments_sha256: str | None = None
    arguments_unavailable: str | None = "arguments_not_recorded"
    result_recorded: bool = False
    result_sha256: str | None = None
    result_value: str | None = None
    attempts: int = 1
    start_time_unix_nano: int = 0
    sequence: int = 0
    requested_only: bool = False
    call_id_from_span: bool = False
    # The call id a tool span with none of its own records inside its result (a LangChain ToolMessage's
    # tool_call_id, normalize/values.result_call_id): used only to match the model's request to the span.
    result_call_id: str | None = None
    malformed: tuple[MalformedField, ...] = ()
    notes: tuple[str, ...] = ()  # how the normalizer read the span (reason codes that never decide)
    result_stable: bool = True  # False: results differ between executions (tracefence.result_stable, tool rule ``result``)
    argument_tokens: tuple[int, ...] = ()  # hashes of the id-like tokens in the arguments (normalize/tokens.py), sorted
    result_tokens: tuple[int, ...] = ()  # hashes of the id-like tokens in the recorded result, sorted
    producer: str = ""  # which producer recorded the span (conventions.PRODUCER_RESULT_DEFAULTS); "" when not known
    producer_records_results: bool | None = None  # whether that producer records results by default; None: not known (docs/DECISIONS.md 401)

    @property
    def order_key(self) -> tuple[int, int, str, str]:
        """Total order of steps in a trace: start time, then source position, then ids (:data:`step_order`)."""
        return step_order(self)

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


step_order = attrgetter("start_time_unix_nano", "sequence", "call_id", "span_id")
"""``step_order(step)`` is ``step.order_key``, as a C-level key function for sorting many steps."""


@cython.dataclasses.dataclass(repr=False, frozen=True)
@cython.cclass
class RelatedTrace:
    """A call of another trace that a step's decision concerns (the write index, docs/DECISIONS.md 590):
    that trace's id, the call's id there, and the reason code that links them."""

    trace_id: str
    call_id: str
    reason: str

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


@cython.dataclasses.dataclass(repr=False, frozen=True)
@cython.cclass
class StepDecision:
    """The decision for one step, its reason codes, the other calls of its trace it concerns and the
    calls of other traces (``related_traces``: earlier traces planned by the same door, the write index)."""

    step: ToolStep
    decision: Decision
    reasons: tuple[str, ...]
    related_call_ids: tuple[str, ...] = ()
    related_traces: tuple[RelatedTrace, ...] = ()

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


@cython.dataclasses.dataclass(repr=False, frozen=True)
@cython.cclass
class TracePlan:
    """The plan for one trace: ``replay_class`` is ``None`` when it has no tool step."""

    trace_id: str
    replay_class: ReplayClass | None
    steps: tuple[StepDecision, ...] = ()
    partial: bool = False
    schema_version: str = SCHEMA_VERSION

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)
