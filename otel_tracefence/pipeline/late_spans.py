"""The late-span rules: what a span of an already decided trace changes in it (the state is
:class:`Remembered`, held by :class:`~otel_tracefence.pipeline.trace_buffer.TraceBuffer`), and what is handed on for
it. A late tool step fails closed (:func:`fail_closed`), a late span never carries a class less restrictive than one
already handed on (:func:`most_restrictive`), a redelivered span is known by its digest (:func:`span_digest`).
The module docstring of :mod:`otel_tracefence.pipeline.trace_buffer` tells the whole rule."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, TypeVar

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import Decision, MalformedField, ReplayClass, StepDecision, ToolStep, TracePlan
from otel_tracefence.normalize import SpanView, span_to_step, unread_activity_step
from otel_tracefence.normalize.dispatches import late_request, untied_request
from otel_tracefence.normalize.request_matching import late_requests
from otel_tracefence.normalize.trace import quiet
from otel_tracefence.pipeline.plan import PlannedTrace
from otel_tracefence.planner.replay_class import replay_class as class_of

P = TypeVar("P")


def fail_closed(plan: TracePlan, late_span_ids: set[str] | frozenset[str], late_call_ids: set[str] | frozenset[str] = frozenset()) -> TracePlan:
    """``plan`` with every step recorded by a span in ``late_span_ids`` fenced, and every requested call no span
    records (``requested_only``) whose call id is in ``late_call_ids``: such a span (or the span requesting the
    call) arrived after its trace was decided, so the trace was decided before it was complete.

    ``decided_before_complete`` ranks as the last review rule, just before ``skip`` and
    ``replay`` (docs/DECISIONS.md 1 and 47): a step another rule already fences keeps its
    decision and gets the code after the fencing codes; a ``replay`` or ``skip`` becomes
    ``review`` with it first. The plan is flagged partial and its class recomputed (``review``).
    """
    if not late_span_ids and not late_call_ids:
        return plan
    decisions: list[StepDecision] = []
    for decision in plan.steps:
        step = decision.step
        late = step.call_id in late_call_ids if step.requested_only else step.span_id in late_span_ids
        if not late or reasons.DECIDED_BEFORE_COMPLETE in decision.reasons:
            decisions.append(decision)
        elif decision.decision in (Decision.REVIEW, Decision.CONFLICT):
            at = next((i for i, code in enumerate(decision.reasons) if code in reasons.NOTES), len(decision.reasons))
            codes = decision.reasons[:at] + (reasons.DECIDED_BEFORE_COMPLETE,) + decision.reasons[at:]
            decisions.append(replace(decision, reasons=codes))
        else:
            codes = (reasons.DECIDED_BEFORE_COMPLETE,) + tuple(c for c in decision.reasons if c not in reasons.NOT_FENCING)
            decisions.append(replace(decision, decision=Decision.REVIEW, reasons=codes))
    return replace(plan, steps=tuple(decisions), replay_class=class_of(decisions), partial=True)


def span_digest(view: SpanView) -> int:
    """A hash of a step's span as planning reads it (1 to 2**30 - 1): every field of its view but its ``sequence``
    (the arrival order), so two views the normalizer takes for one span (a redelivered copy,
    ``normalize.span_tree.same_span``) have the same digest, and a span that differs in name, attributes, status, times,
    events or parent almost surely has another. Remembered for the spans that hold a step (other spans remember 0):
    a late span under a remembered id is a redelivery only when its digest is the remembered one (docs/DECISIONS.md
    357). A value that is not hashable (an OTLP array) counts by its ``repr``."""
    head = (view.name, view.parent_span_id, view.start_time_unix_nano, view.end_time_unix_nano, view.status_code, view.status_message,
            view.kind, view.unreadable, view.dropped_attributes, view.dropped_events)  # fmt: skip
    attributes, events = view.attributes, view.events
    try:  # most values are str, int, float or bool: hashed as they are
        content = hash((head, tuple(attributes.items()) if attributes else (), tuple((e.name, tuple(e.attributes.items())) for e in events) if events else ()))
    except TypeError:  # a list (an OTLP array) or a map: its repr stands for it
        content = hash((head, _hashable(attributes), tuple((e.name, _hashable(e.attributes)) for e in events)))
    return (content & 0x3FFFFFFF) or 1  # never 0: 0 is what a span holding no step remembers


_PLAIN = (str, int, float, bool, bytes, type(None))


def _hashable(attributes: Any) -> tuple:
    return tuple((key, value if type(value) in _PLAIN else repr(value)) for key, value in attributes.items()) if attributes else ()


def most_restrictive(a: str | None, b: str | None) -> str | None:
    """The more restrictive of two replay class values (``None``: no class, a trace without tool steps)."""
    if a is None or b is None:
        return a if b is None else b
    return a if ReplayClass(a).rank >= ReplayClass(b).rank else b




@dataclass(frozen=True, slots=True)
class Late(Generic[P]):
    """A span whose trace was decided before it arrived; ``plan`` is set when it changed the trace's plan.

    ``replay_class`` is never less restrictive than a class already handed on for the trace;
    ``partial``: the trace's latest plan is flagged partial."""

    view: SpanView
    payload: P
    replay_class: str | None
    step_decision: Any | None  # the late span's own StepDecision, when it is a tool step
    plan: TracePlan | None
    partial: bool = False


@dataclass(frozen=True, slots=True)
class LateBatch(Generic[P]):
    """Late spans of one trace handed on together: ``spans`` in arrival order; ``plan`` is the trace's new plan
    when the batch held tool steps (re-planned once for the whole batch), else ``None``."""

    trace_id: str
    spans: list[Late[P]]
    plan: TracePlan | None
    previous_class: str | None = None  # the trace's class before this batch (its review item exists if it needed one)
    overflowing: bool = False  # a chunk of a trace past its bound whose root has not ended: more chunks will follow


@dataclass(slots=True)
class Remembered:
    replay_class: str | None
    steps: list[ToolStep]  # the latest max_spans_per_trace steps at most: what a re-plan sees beside a batch
    plan: TracePlan | None = None  # the trace's latest plan
    span_ids: dict[str, int] = field(default_factory=dict)  # every span seen -> span_digest if it holds a step, else 0: a redelivered one is not a new call
    late_step_span_ids: set[str] = field(default_factory=set)  # steps recorded (or dispatched again) by late spans
    dispatched: set[str] = field(default_factory=set)  # steps (span ids) with dispatch attempt spans seen
    overflow: bool = False  # decided on max_spans_per_trace before its root ended: later spans are held in chunks
    root_ended: bool = False  # its local root span has been seen
    late_call_ids: set[str] = field(default_factory=set)  # requested calls no span records, requested by late spans



def digests(spans: list[tuple[SpanView, Any]], planned: PlannedTrace) -> dict[str, int]:
    """Every span id of a decided trace -> :func:`span_digest` of the span when it holds a step (a plan step or a
    dispatch attempt), else 0: hashing only the few step spans keeps the cost off the many others."""
    holding = {d.step.span_id for d in planned.plan.steps}
    holding.update(planned.normalized.attempt_of)
    return {view.span_id: span_digest(view) if view.span_id in holding else 0 for view, _ in spans}


def fence_step(remembered: Remembered, steps: list[ToolStep], index: int, step: ToolStep, *, dispatch: bool) -> None:
    """Put ``step`` (the remembered ``steps[index]``, maybe changed by a late span below it) in its place, fenced as
    decided before complete; ``dispatch``: the late span dispatched it again. A step's first dispatch span is its
    one dispatch (as the normalizer counts an attempt span), every later one is one more attempt."""
    owner_id = step.span_id
    if dispatch:
        if owner_id in remembered.dispatched:
            step = replace(step, attempts=step.attempts + 1)
        remembered.dispatched.add(owner_id)
    steps[index] = step
    remembered.late_step_span_ids.add(owner_id)



def _attempt_owner(parent_span_id: str | None, by_span: dict[str, int], steps: list[ToolStep]) -> int | None:
    """The index in ``steps`` of the remembered step a late tool span below ``parent_span_id`` is a dispatch attempt
    of, or ``None``. A step standing for the calls an agent run or a model span asked for that could not be read
    (``requested_call_unread``) is no tool span: a tool span below it is a call of its own, as in time
    (``normalize.attempts.nest`` nests only tool spans; docs/DECISIONS.md 1010)."""
    owner = by_span.get(parent_span_id) if parent_span_id else None
    if owner is None or any(m.reason == reasons.REQUESTED_CALL_UNREAD for m in steps[owner].malformed):
        return None
    return owner


def read_late(
    spans: list[tuple[SpanView, P]], remembered: Remembered, config: TraceFenceConfig, read_view: Callable[[SpanView, P], SpanView] | None
) -> tuple[list[tuple[SpanView, P, str, Any]], list[ToolStep], bool]:
    """What each late span of a batch is to its decided trace, as ``(view, payload, kind, step or known decision)``
    (kind: ``again`` a redelivery, ``step``, ``attempt``, ``request`` or ``plain``), the steps the batch added, and
    whether the trace must be re-planned; ``remembered`` is changed in place (its steps fenced, ids recorded)."""
    known = {d.step.span_id: d for d in remembered.plan.steps} if remembered.plan is not None else {}
    steps = remembered.steps
    by_span = {s.span_id: i for i, s in enumerate(steps) if s.span_id}
    added: list[ToolStep] = []
    changed = False  # a step added or dispatched again: the trace is re-planned, once for the batch
    kinds: list[tuple[SpanView, P, str, Any]] = []  # (view, payload, kind, step or known decision)
    talking: list[tuple[int, SpanView]] = []  # (index in kinds, view read) of spans read after the batch's steps
    for view, payload in spans:
        read = view if read_view is None else read_view(view, payload)
        # Tool activity no convention reads fails closed when late too.
        step = span_to_step(read, config) or unread_activity_step(read, config)
        seen = remembered.span_ids.get(view.span_id)
        # Hashed when it holds a step, or its id's span did (a model span standing for calls it could not read).
        digest = span_digest(read) if step is not None or seen else 0
        if seen == digest:
            # Redelivered (a client or collector retry): the same call, never a second execution.
            kinds.append((view, payload, "again", known.get(view.span_id)))
            continue
        remembered.span_ids[view.span_id] = digest
        if seen is not None:  # another span under a decided span's id: not a redelivery (DECISIONS 357)
            step, clashed = clash(view.span_id, step, remembered, steps, by_span)
            if step is None:
                kinds.append((view, payload, "attempt" if clashed else "plain", None))
                changed = changed or clashed
                continue
        elif step is None:  # a request below a step, or a model span asking for calls, may change the plan too
            if not quiet(read):
                talking.append((len(kinds), read))
            kinds.append((view, payload, "plain", None))
            continue
        # A stand-in for a refused span is a step of its own, never an attempt: what it was is not known (296);
        # so is a step under a clashing id, as in time (normalize_trace, DECISIONS 357).
        # A span that dropped data is held as its own step wherever it is, as in time (DECISIONS 252, 358).
        whole = read.unreadable is None and seen is None and not read.dropped_attributes and not read.dropped_events
        owner = _attempt_owner(view.parent_span_id if whole else None, by_span, steps)
        if owner is not None:  # a dispatch attempt of a step already planned: that step was decided too soon
            fence_step(remembered, steps, owner, steps[owner], dispatch=True)
            kinds.append((view, payload, "attempt", None))
            changed = True
            continue
        if step.span_id:
            by_span[step.span_id] = len(steps)
        steps.append(step)
        added.append(step)
        remembered.late_step_span_ids.add(step.span_id)
        kinds.append((view, payload, "step", step))
    # After the batch's steps: children end (and come) before the step they belong to.
    changed = _read_talking(talking, kinds, remembered, steps, by_span, added, config) or changed
    return kinds, added, changed


def _read_talking(
    talking: list[tuple[int, SpanView]], kinds: list, remembered: Remembered, steps: list[ToolStep], by_span: dict[str, int],
    added: list[ToolStep], config: TraceFenceConfig,
) -> bool:
    """:func:`late_activity` of each late span that records no step but may change the plan (``kinds`` changed in
    place); whether any did."""
    changed = False
    for at, read in talking:
        kind, what = late_activity(read, remembered, steps, by_span, added, config)
        if kind != "plain":
            kinds[at] = (*kinds[at][:2], kind, what)
            changed = True
    return changed


def clash(
    span_id: str, step: ToolStep | None, remembered: Remembered, steps: list[ToolStep], by_span: dict[str, int]
) -> tuple[ToolStep | None, bool]:
    """A late span under the id of a span seen before that is not that span: as in time (``normalize_trace``,
    ``distinct_spans``), the remembered step with that id, if any, is malformed at ``span_id`` (fenced), and so
    is the late span's own ``step``, if any; returns that step and whether a remembered step was changed."""
    bad = MalformedField("span_id", f"span id {span_id} is carried by a span that came after its trace was decided and is not the span "
                                    "seen before under that id (not a redelivery): which call the id names cannot be known")  # fmt: skip
    at = by_span.get(span_id)
    if at is not None:
        fence_step(remembered, steps, at, replace(steps[at], malformed=steps[at].malformed + (bad,)), dispatch=False)
    return (replace(step, malformed=step.malformed + (bad,)) if step is not None else None), at is not None

def late_activity(
    read: SpanView, remembered: Remembered, steps: list[ToolStep], by_span: dict[str, int], added: list[ToolStep], config: TraceFenceConfig
) -> tuple[str, ToolStep | None]:
    """What a late span that records no tool step changes in its trace (``steps`` and ``added`` changed in place),
    as ``(kind, its own step or None)``: an HTTP request right below a step that is a dispatch or failed fences
    that step (``"attempt"``, counted as :func:`fence_step` counts); one tied to no step is a ``review`` step of
    its own (``"step"``, ``late_request_untied``) in a trace with tool steps; requested calls no step records are steps
    of their own (``"request"``; ``"step"`` when the span's output holds calls that cannot be read: the step
    standing for them is the span's). ``("plain", None)`` when it changes nothing (docs/DECISIONS.md 270)."""
    owner = by_span.get(read.parent_span_id) if read.parent_span_id else None
    sent = late_request(read, steps[owner]) if owner is not None else None
    if sent is not None:
        step, dispatch = sent
        if not dispatch and step is steps[owner]:
            return "plain", None  # a safe request that did not fail changes nothing
        fence_step(remembered, steps, owner, step, dispatch=dispatch)
        return "attempt", None
    # A dispatch or failed request tied to no step (spans in between are not remembered): its own step, fenced,
    # unless the trace has no tool step it could belong to (docs/DECISIONS.md 295).
    untied = untied_request(read, config) if owner is None and remembered.replay_class is not None else None
    if untied is not None:
        steps.append(untied)
        added.append(untied)
        remembered.late_step_span_ids.add(untied.span_id)
        return "step", untied
    requested = late_requests(read, steps, config)
    for step in requested:
        steps.append(step)
        added.append(step)
        if step.requested_only:
            remembered.late_call_ids.add(step.call_id)
        else:
            remembered.late_step_span_ids.add(step.span_id)
    if not requested:
        return "plain", None
    own = next((step for step in requested if step.span_id == read.span_id), None)
    return ("step", own) if own is not None else ("request", None)


def late_results(
    trace_id: str, kinds: list[tuple[SpanView, P, str, Any]], remembered: Remembered, plan: TracePlan | None, kept: str | None, previous: str | None, partial: bool
) -> LateBatch[P]:
    """The batch handed on: each late span with the class, its own decision and plan as :func:`read_late` found it."""
    mine = {id(d.step): d for d in plan.steps} if plan is not None else {}
    out = []
    for view, payload, kind, what in kinds:
        if kind == "again":
            out.append(Late(view, payload, remembered.replay_class, what, None, partial))
        elif kind in ("step", "attempt", "request"):
            out.append(Late(view, payload, kept, mine.get(id(what)) if what is not None else None, plan, True))
        else:
            out.append(Late(view, payload, kept, None, None, partial))
    return LateBatch(trace_id, out, plan, previous, remembered.overflow)
