"""Tool spans inside tool spans: which are dispatch attempts of an outer step, and what a step takes from its
attempts (docs/DESIGN.md, "Normalized step": attempts; docs/DECISIONS.md 800)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.model import OK, READ, SOURCE_NONE, WRITE, ToolStep, step_order
from otel_tracefence.normalize.conventions import MCP_METHOD_KEY
from otel_tracefence.normalize.status_paths import MCP_SERVER_REPORTS_IS_ERROR
from otel_tracefence.normalize.evidence import MCP_CLIENT_CALL, MCP_IS_ERROR_DROPPED
from otel_tracefence.normalize.span_tree import nearest_tool_ancestor
from otel_tracefence.normalize.span_view import SpanView


@dataclass(slots=True)
class Nesting:
    """The tool steps of a trace with their attempts folded in: ``steps`` (outermost span id -> step),
    ``attempt_of`` (each attempt's span id -> its step's span id) and ``root_of`` (every tool span id -> the span
    id of the step it belongs to, its own for a step)."""

    steps: dict[str, ToolStep] = field(default_factory=dict)
    attempt_of: dict[str, str] = field(default_factory=dict)
    root_of: dict[str, str] = field(default_factory=dict)


def nest(own_steps: dict[str, ToolStep], by_id: dict[str, SpanView]) -> Nesting:
    """Fold each tool span inside another (no agent or model span between) into the outer step as a dispatch
    attempt, unless it is a call of its own (:func:`other_tool`). Every tool span below a step, however deep (a
    retry wrapper's own calls too), is one of its attempts; the innermost ones, the calls actually sent, are the
    attempts counted. ``own_steps``: span id -> the step its span makes alone."""
    tool_ids = set(own_steps)
    nearest = {sid: nearest_tool_ancestor(by_id[sid], by_id, tool_ids) for sid in tool_ids}
    for sid, outer in nearest.items():
        if outer is not None and other_tool(own_steps[sid], own_steps[outer], by_id[sid]):
            nearest[sid] = None  # a tool that calls another tool: the inner call is a step of its own
    nesting = Nesting(root_of={sid: _root(sid, nearest) for sid in tool_ids})
    has_inner = {parent for parent in nearest.values() if parent is not None}
    attempts: dict[str, list[ToolStep]] = {}
    for sid, root in nesting.root_of.items():
        if root != sid:
            attempts.setdefault(root, []).append(own_steps[sid])
    for sid, step in own_steps.items():
        if nesting.root_of[sid] != sid:
            nesting.attempt_of[sid] = nesting.root_of[sid]
            continue
        inner = sorted(attempts.get(sid, []), key=step_order)
        if inner:
            sent_ids = {a.span_id for a in inner if a.span_id not in has_inner}
            step = fill_from_attempts(step, inner, sent_ids, _chains(inner, nearest, sid), by_id)
        nesting.steps[sid] = step
    return nesting


def _root(sid: str, nearest: dict[str, str | None]) -> str:
    """The outermost tool span above ``sid`` through ``nearest``; ``sid`` itself on a parent cycle (corrupt ids)."""
    root, seen = sid, {sid}
    while (parent := nearest[root]) is not None:
        if parent in seen:  # a parent cycle has no outer step: the span is a step of its own
            return sid
        seen.add(parent)
        root = parent
    return root


@cython.ccall
def other_tool(inner: ToolStep, outer: ToolStep, inner_span: SpanView) -> bool:
    """True when a tool span inside another is a call of its own, not a dispatch of the outer call:
    it names a different tool, and it is not an MCP ``tools/call`` span carrying a write or unknown
    step (MCP tool names often differ from the agent's by a prefix). A declared read never holds
    another tool's call as its attempt: its label must not hide a write."""
    if not inner.tool or not outer.tool or inner.tool == outer.tool:
        return False
    return outer.effect is READ or inner_span.attributes.get("mcp.method.name") != "tools/call"


def fill_from_attempts(step: ToolStep, attempts: list[ToolStep], sent_ids: set[str], chain_of: dict[str, str], by_id: dict[str, SpanView]) -> ToolStep:
    """``step`` with its attempts folded in. ``attempts`` are in trace order; ``sent_ids`` are the span ids of the
    innermost ones, the calls actually sent; ``chain_of`` maps each attempt to the attempt right below the step that
    holds it (one dispatch: a client span and the server span it reached); ``by_id`` holds the trace's spans.

    The step counts the calls sent; where its span says ok and the last dispatch that carried it says otherwise,
    the fencing record wins (:func:`_last_dispatch`); its malformed fields gain its attempts' (:func:`_malformed`);
    fields it did not record are taken from its first attempt that did (:func:`_unrecorded_fields`).
    """
    last = [a for a in attempts if chain_of[a.span_id] == chain_of[attempts[-1].span_id]] if attempts else []
    changes: dict = {"attempts": max(1, len(sent_ids))}
    changes.update(_last_dispatch(step, last))
    malformed = _malformed(step, attempts, last, by_id)
    if malformed is not step.malformed:
        changes["malformed"] = malformed
    changes.update(_unrecorded_fields(step, attempts))
    return replace(step, **changes)


def _last_dispatch(step: ToolStep, last: list[ToolStep]) -> dict:
    """The step's status when its span says ok and the last dispatch that carried it says otherwise (an MCP server
    span ended in error under an unset client span; a client span timed out while the cancelled server handler's
    span ended unset): where two records disagree, the fencing one wins. An earlier dispatch that failed and was
    retried shows as the second dispatch instead."""
    failed = [a for a in last if a.status is not OK]
    if failed and step.status is OK:
        return {"status": failed[-1].status, "notes": step.notes + (reasons.DISPATCH_ATTEMPT_FAILED,)}
    if failed and reasons.FAILURE_TEXT_IN_RESULT in step.notes:  # its text only read as a failure: the dispatch says which (1031)
        notes = tuple(note for note in step.notes if note != reasons.FAILURE_TEXT_IN_RESULT)
        return {"status": failed[-1].status, "notes": notes + (reasons.DISPATCH_ATTEMPT_FAILED,)}
    return {}


def _malformed(step: ToolStep, attempts: list[ToolStep], last: list[ToolStep], by_id: dict[str, SpanView]) -> tuple:
    """The step's malformed fields with its attempts'. A step held because its result is MCP content parts alone
    (``evidence.MCP_PARTS_ALONE``), or because it is an MCP client's tools/call span (``evidence.MCP_CLIENT_CALL``,
    988), is not held for it when the last dispatch reached an MCP server whose span of the
    call is in the trace: that span records ``isError`` (``status_paths.MCP_SERVER_REPORTS_IS_ERROR``,
    docs/DECISIONS.md 800). An attempt's malformed fields are the step's too: an invalid ``tracefence.*`` value is
    never dropped because its span is an attempt rather than a step. An attempt that names no tool (an MCP client
    span, say) is not malformed when its step names one. ``step.malformed`` itself when nothing changes."""
    own = step.malformed
    if any(_reports_is_error(by_id.get(a.span_id)) for a in last):
        kept = tuple(m for m in own if not m.message.startswith(MCP_IS_ERROR_DROPPED))
        if len(kept) != len(own):
            own = kept
    bad = tuple(
        replace(m, message=f"dispatch attempt {attempt.span_id}: {m.message}")
        for attempt in attempts
        for m in attempt.malformed
        # the step names the tool its attempts send; an MCP client span below a step is read by the step's own rules (988)
        if not (m.field == "tool" and step.tool) and not m.message.startswith(MCP_CLIENT_CALL)
    )
    return own + bad if bad else own


def _unrecorded_fields(step: ToolStep, attempts: list[ToolStep]) -> dict:
    """Arguments, result, idempotency key and effect the step did not record, each from its first attempt that did;
    an attempt's label that says write wins over the step's that says read."""
    changes: dict = {}
    for attempt in attempts:
        if step.arguments_sha256 is None and attempt.arguments_sha256 is not None and "arguments_sha256" not in changes:
            changes.update(arguments_json=attempt.arguments_json, arguments_sha256=attempt.arguments_sha256, arguments_unavailable=None, argument_tokens=attempt.argument_tokens)
        if not step.result_recorded and attempt.result_recorded and "result_sha256" not in changes:
            changes.update(result_recorded=True, result_sha256=attempt.result_sha256, result_value=attempt.result_value, result_tokens=attempt.result_tokens)
        if step.idempotency_key is None and attempt.idempotency_key is not None and "idempotency_key" not in changes:
            changes["idempotency_key"] = attempt.idempotency_key
        if step.effect_source is SOURCE_NONE and attempt.effect_source is not SOURCE_NONE and "effect" not in changes:
            changes.update(effect=attempt.effect, effect_source=attempt.effect_source)
        elif attempt.effect is WRITE and step.effect is READ and attempt.effect_source is not SOURCE_NONE:
            changes.update(effect=WRITE, effect_source=attempt.effect_source)  # a label that says write wins over one that says read
    return changes


def _reports_is_error(span: SpanView | None) -> bool:
    """True for an MCP server's span of a tools/call (``status_paths.MCP_SERVER_REPORTS_IS_ERROR``)."""
    kind, method = MCP_SERVER_REPORTS_IS_ERROR
    return span is not None and span.kind == kind and span.attributes.get(MCP_METHOD_KEY) == method


def _chains(attempts: list[ToolStep], nearest: dict[str, str | None], step_id: str) -> dict[str, str]:
    """For each attempt, the attempt right below the step ``step_id`` that holds it (itself, if it is one)."""
    chain_of: dict[str, str] = {}
    for attempt in attempts:
        top = attempt.span_id
        for _ in range(len(nearest)):
            parent = nearest.get(top)
            if parent is None or parent == step_id:
                break
            top = parent
        chain_of[attempt.span_id] = top
    return chain_of
