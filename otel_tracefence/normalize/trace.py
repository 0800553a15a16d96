"""A whole trace's spans to its tool steps: nesting, dispatch attempts, requested calls."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Sequence

from otel_tracefence import reasons
from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.model import EffectSource, MalformedField, ToolStatus, ToolStep
from otel_tracefence.normalize import conventions as cv
from otel_tracefence.normalize.effect import resolve_effect
from otel_tracefence.normalize.requested import RequestedCall, requested_calls
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.step import span_to_step
from otel_tracefence.normalize.values import kept_arguments


@dataclass(slots=True)
class NormalizedTrace:
    """A trace's steps, and for each dispatch-attempt span the span id of the step it belongs to."""

    steps: list[ToolStep] = field(default_factory=list)
    attempt_of: dict[str, str] = field(default_factory=dict)


def _nearest_tool_ancestor(span: SpanView, by_id: dict[str, SpanView], tool_ids: set[str]) -> str | None:
    """The closest enclosing tool span, stopping at an agent or model span (a sub-agent's steps are its own)."""
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):  # bounded: a malformed parent cycle cannot loop forever
        parent = by_id.get(parent_id) if parent_id else None
        if parent is None:
            return None
        if parent.span_id in tool_ids:
            return parent.span_id
        if cv.is_agent_boundary(parent.attributes):
            return None
        parent_id = parent.parent_span_id
    return None


def _fill_from_attempts(step: ToolStep, attempts: list[ToolStep], sent: int) -> ToolStep:
    """Fields the outer step did not record, taken from its first attempt that did; ``sent`` attempts.

    An attempt's malformed fields are the step's too: an invalid ``tracefence.*`` value is
    never dropped because its span is an attempt rather than a step.
    """
    changes: dict = {"attempts": max(1, sent)}
    bad = tuple(
        MalformedField(m.field, f"dispatch attempt {attempt.span_id}: {m.message}") for attempt in attempts for m in attempt.malformed
    )
    if bad:
        changes["malformed"] = step.malformed + bad
    for attempt in attempts:
        if step.arguments_sha256 is None and attempt.arguments_sha256 is not None and "arguments_sha256" not in changes:
            changes.update(arguments_json=attempt.arguments_json, arguments_sha256=attempt.arguments_sha256, arguments_unavailable=None)
        if not step.result_recorded and attempt.result_recorded and "result_sha256" not in changes:
            changes.update(result_recorded=True, result_sha256=attempt.result_sha256, result_value=attempt.result_value)
        if step.idempotency_key is None and attempt.idempotency_key is not None and "idempotency_key" not in changes:
            changes["idempotency_key"] = attempt.idempotency_key
        if step.effect_source is EffectSource.NONE and attempt.effect_source is not EffectSource.NONE and "effect" not in changes:
            changes.update(effect=attempt.effect, effect_source=attempt.effect_source)
    return replace(step, **changes)


def _unrecorded_requests(steps: list[ToolStep], requests: list[RequestedCall], config: TraceFenceConfig) -> list[ToolStep]:
    """Requested calls no tool span records: matched by call id, else by tool name and canonical arguments."""
    known_ids = {s.call_id for s in steps if not s.call_id_from_span}
    by_content = Counter((s.tool, s.arguments_sha256) for s in steps if s.arguments_sha256 is not None)
    unlabeled = Counter((s.tool, s.arguments_sha256) for s in steps if s.call_id_from_span and s.arguments_sha256 is not None)
    seen: set[str] = set()
    extra = []
    for request in requests:
        if request.call_id is not None and (request.call_id in known_ids or request.call_id in seen):
            continue
        content = (request.tool, request.arguments.sha256)
        pool = unlabeled if request.call_id is not None else by_content
        if request.arguments.sha256 is not None and pool[content] > 0:
            pool[content] -= 1
            continue
        call_id = request.call_id or f"{request.span.span_id}/{request.index}"
        seen.add(call_id)
        effect, source, _ = resolve_effect(None, request.tool, {}, config)
        when = request.span.end_time_unix_nano or request.span.start_time_unix_nano
        extra.append(
            ToolStep(
                trace_id=request.span.trace_id,
                call_id=call_id,
                tool=request.tool,
                effect=effect,
                effect_source=source,
                status=ToolStatus.UNKNOWN,
                arguments_json=kept_arguments(request.arguments, config),
                arguments_sha256=request.arguments.sha256,
                arguments_unavailable=request.arguments.unavailable
                if request.arguments.malformed is None
                else reasons.ARGUMENTS_NOT_RECORDED,
                start_time_unix_nano=when,
                sequence=request.span.sequence,
                requested_only=True,
            )
        )
    return extra


def _request_order(request: RequestedCall) -> tuple:
    span = request.span
    when = span.end_time_unix_nano or span.start_time_unix_nano  # the requested-only step's start time
    return (when, span.sequence, span.span_id, request.index, request.call_id or "", request.tool, request.arguments.sha256 or "")


def _distinct_spans(spans: Sequence[SpanView]) -> tuple[Sequence[SpanView], dict[str, int]]:
    """The spans with each span id once, and the ids that name several different spans (how many).

    A span delivered twice (an OTLP client retrying an export that did arrive) is one span: the
    copy first in the source is kept. Two different spans under one id (corrupt or colliding ids)
    are both kept, whatever the order they came in: neither may hide the other's tool call.
    """
    by_id: dict[str, list[SpanView]] = {}
    for span in spans:
        by_id.setdefault(span.span_id, []).append(span)
    if len(by_id) == len(spans):
        return spans, {}
    kept: list[SpanView] = []
    clashing: dict[str, int] = {}
    for span_id, group in by_id.items():
        if len(group) > 1:
            group.sort(key=lambda s: (s.sequence, s.start_time_unix_nano, repr(s)))  # by content: any input order
            group = [s for i, s in enumerate(group) if not any(_same_span(s, earlier) for earlier in group[:i])]
            if len(group) > 1:
                clashing[span_id] = len(group)
        kept.extend(group)
    return kept, clashing


def _same_span(a: SpanView, b: SpanView) -> bool:
    return replace(a, sequence=0) == replace(b, sequence=0)


def normalize_trace(spans: Sequence[SpanView], config: TraceFenceConfig) -> NormalizedTrace:
    """The tool steps of one trace's spans (DESIGN.md, "Normalized step").

    A tool span inside another tool span (no agent or model span between) is a
    dispatch attempt of the outer step, which counts its attempts. Never raises
    for any span; the order of ``spans`` does not matter. A span given twice counts
    once; different spans sharing one span id each become a step of their own,
    malformed (field ``span_id``), neither an attempt nor holding any.
    """
    spans, clashing = _distinct_spans(spans)
    by_id = {s.span_id: s for s in spans}  # for a clashing id, the last of its spans in content order
    own_steps = {}
    clashing_steps: list[ToolStep] = []
    stepless: list[SpanView] = []  # where requested calls are looked for
    for span in spans:
        step = span_to_step(span, config)
        if step is None:
            stepless.append(span)
        elif span.span_id in clashing:
            bad = MalformedField("span_id", f"span id {span.span_id} is shared by {clashing[span.span_id]} different spans of the trace")
            clashing_steps.append(replace(step, malformed=step.malformed + (bad,)))
        else:
            own_steps[span.span_id] = step
    # No early return when no span is a tool span: a call the model requested is a step
    # even when no tool span records it (the process may have died before exporting one).
    tool_ids = set(own_steps)
    nearest = {sid: _nearest_tool_ancestor(by_id[sid], by_id, tool_ids) for sid in tool_ids}
    root_of: dict[str, str] = {}
    for sid in tool_ids:
        root, seen = sid, {sid}
        while nearest[root] is not None:
            root = nearest[root]
            if root in seen:  # a parent cycle (corrupt ids) has no outer step: the span is a step of its own
                root = sid
                break
            seen.add(root)
        root_of[sid] = root
    # Every tool span below a step, however deep (a retry wrapper's own calls too), is one of its
    # dispatch attempts; the innermost ones, the calls actually sent, are the attempts counted.
    has_inner = {parent for parent in nearest.values() if parent is not None}
    attempts: dict[str, list[ToolStep]] = {}
    for sid, root in root_of.items():
        if root != sid:
            attempts.setdefault(root, []).append(own_steps[sid])
    result = NormalizedTrace()
    for sid, step in own_steps.items():
        if root_of[sid] != sid:
            result.attempt_of[sid] = root_of[sid]
            continue
        inner = sorted(attempts.get(sid, []), key=lambda s: s.order_key)
        sent = sum(a.span_id not in has_inner for a in inner)
        result.steps.append(_fill_from_attempts(step, inner, sent) if inner else step)
    result.steps.extend(clashing_steps)
    requests = [call for span in stepless for call in requested_calls(span, config.limits)]
    if requests:
        # In trace order, not input order: the first request of a call id is the one that becomes its step.
        requests.sort(key=_request_order)
        result.steps.extend(_unrecorded_requests(result.steps, requests, config))
    result.steps.sort(key=lambda s: s.order_key)
    return result
