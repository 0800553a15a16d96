"""A whole trace's spans to its tool steps: nesting, dispatch attempts, requested calls."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import (
    ERROR, OK, READ, SOURCE_CONFIG, SOURCE_HTTP_METHOD, SOURCE_MCP_HINT, SOURCE_NONE, STATUS_UNKNOWN, WRITE, MalformedField, ToolStatus, ToolStep,
    step_order,
)
from otel_tracefence.normalize.conventions import (
    EXECUTE_TOOL, GEN_AI_OPERATION, HANDOFF_OPERATION, HANDOFF_TOOL_PREFIX, MCP_METHOD_KEY, MCP_SERVER_REPORTS_IS_ERROR, OUTPUT_TOOLS_KEY, RPC_METHOD, TOOL_MARKER_KEYS, agent_name,
    call_id as tool_call_id,
    is_agent_boundary, is_tool_invoker, misread_message, misread_own_key, tool_name,
)
from otel_tracefence.normalize import haystack
from otel_tracefence.normalize.config_reading import ConfigReading, read_config
from otel_tracefence.normalize.effect import resolve_effect
from otel_tracefence.normalize.evidence import MCP_PARTS_ALONE
from otel_tracefence.normalize.requested import (
    REQUEST_KEYS as REQUESTED_KEYS, RequestedCall, Unread, has_indexed_call_keys, output_tools, recorded_output, requested_calls,
)
from otel_tracefence.normalize.span_view import KIND_SERVER, SpanView
from otel_tracefence.normalize.activity import asked_for_tools, tool_activity_sign
from otel_tracefence.normalize.http import REQUEST_KEYS as HTTP_REQUEST_KEYS, HttpRequest, KeyEvidence, http_request, key_evidence, reconciled_key
from otel_tracefence.normalize.status import span_status
from otel_tracefence.normalize.summary import summary_spans
from otel_tracefence.normalize.pending import folded, superseded
from otel_tracefence.normalize.step import SERVER_ERROR_RESULT, dropped_data, result_status, span_to_step
from otel_tracefence.normalize.tokens import value_tokens
from otel_tracefence.normalize.values import bare_value_sha256, kept_arguments, span_arguments
from otel_tracefence.core.textfold import folded_word
from otel_tracefence.core.value_text import showing_values, stop_showing


@dataclass(slots=True)
class NormalizedTrace:
    """A trace's steps, and for each dispatch-attempt span the span id of the step it belongs to."""

    steps: list[ToolStep] = field(default_factory=list)
    attempt_of: dict[str, str] = field(default_factory=dict)


@cython.ccall
def _nearest_tool_ancestor(span: SpanView, by_id: dict[str, SpanView], tool_ids: set[str]) -> str | None:
    """The closest enclosing tool span, stopping at an agent or model span (a sub-agent's steps are its own)."""
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):  # bounded: a malformed parent cycle cannot loop forever
        parent = by_id.get(parent_id) if parent_id else None
        if parent is None:
            return None
        if parent.span_id in tool_ids:
            return parent.span_id
        if is_agent_boundary(parent.attributes):
            return None
        parent_id = parent.parent_span_id
    return None


@cython.ccall
def _other_tool(inner: ToolStep, outer: ToolStep, inner_span: SpanView) -> bool:
    """True when a tool span inside another is a call of its own, not a dispatch of the outer call:
    it names a different tool, and it is not an MCP ``tools/call`` span carrying a write or unknown
    step (MCP tool names often differ from the agent's by a prefix). A declared read never holds
    another tool's call as its attempt: its label must not hide a write."""
    if not inner.tool or not outer.tool or inner.tool == outer.tool:
        return False
    return outer.effect is READ or inner_span.attributes.get("mcp.method.name") != "tools/call"


def _fill_from_attempts(step: ToolStep, attempts: list[ToolStep], sent_ids: set[str], chain_of: dict[str, str], by_id: dict[str, SpanView]) -> ToolStep:
    """Fields the outer step did not record, taken from its first attempt that did. ``attempts`` are
    in trace order; ``sent_ids`` are the span ids of the innermost ones, the calls actually sent;
    ``chain_of`` maps each attempt to the attempt right below the step that holds it (one dispatch:
    a client span and the server span it reached); ``by_id`` holds the trace's spans.

    A step held because its result is MCP content parts alone (``evidence.MCP_PARTS_ALONE``) is not held for it
    when the last dispatch reached an MCP server whose span of the call is in the trace: that span records ``isError``
    (``conventions.MCP_SERVER_REPORTS_IS_ERROR``, docs/DECISIONS.md 800).

    An attempt's malformed fields are the step's too: an invalid ``tracefence.*`` value is
    never dropped because its span is an attempt rather than a step. An attempt that names
    no tool (an MCP client span, say) is not malformed when its step names one.
    """
    changes: dict = {"attempts": max(1, len(sent_ids))}
    last = [a for a in attempts if chain_of[a.span_id] == chain_of[attempts[-1].span_id]] if attempts else []
    failed = [a for a in last if a.status is not OK]
    if step.status is OK and failed:
        # The step's span says ok, the last dispatch that carried it says otherwise (an MCP server span
        # ended in error under an unset client span; a client span timed out while the cancelled server
        # handler's span ended unset): where two records disagree, the fencing one wins. An earlier
        # dispatch that failed and was retried shows as the second dispatch instead.
        changes.update(status=failed[-1].status, notes=step.notes + (reasons.DISPATCH_ATTEMPT_FAILED,))
    own = step.malformed
    if any(_reports_is_error(by_id.get(a.span_id)) for a in last):
        own = tuple(m for m in own if not m.message.startswith(MCP_PARTS_ALONE))
        if len(own) != len(step.malformed):
            changes["malformed"] = own
    bad = tuple(
        replace(m, message=f"dispatch attempt {attempt.span_id}: {m.message}")
        for attempt in attempts
        for m in attempt.malformed
        if not (m.field == "tool" and step.tool)  # the step names the tool its attempts send
    )
    if bad:
        changes["malformed"] = own + bad
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
    return replace(step, **changes)


def _reports_is_error(span: SpanView | None) -> bool:
    """True for an MCP server's span of a tools/call (``conventions.MCP_SERVER_REPORTS_IS_ERROR``)."""
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


def _requested_step(request: RequestedCall, call_id: str, config: TraceFenceConfig) -> ToolStep:
    effect, source, _ = resolve_effect(None, request.tool, {}, config)
    when = request.span.end_time_unix_nano or request.span.start_time_unix_nano
    return ToolStep(
        trace_id=request.span.trace_id,
        call_id=call_id,
        tool=request.tool,
        effect=effect,
        effect_source=source,
        status=STATUS_UNKNOWN,
        arguments_json=kept_arguments(request.arguments, config),
        arguments_sha256=request.arguments.sha256,
        arguments_unavailable=request.arguments.unavailable if request.arguments.malformed is None else reasons.ARGUMENTS_NOT_RECORDED,
        start_time_unix_nano=when,
        sequence=request.span.sequence,
        requested_only=True,
        argument_tokens=value_tokens(request.arguments.value, config.limits.max_tokens_per_value),
    )


def _unrecorded_requests(
    steps: list[ToolStep], requests: list[RequestedCall], config: TraceFenceConfig, agents: dict[str, list[str]], spans_by_id: dict[str, SpanView],
    handoffs: list[int] | None = None,
) -> list[ToolStep]:
    """Requested calls no tool span records, each a step of its own (``requested_not_recorded``).

    ``requests`` are in trace order. One request recorded in several spans (a model span and
    the agent span that echoes its output) is one request: same call id, tool and arguments.
    A request is matched to one tool span: by call id and tool (the same arguments first),
    else, where tool spans carry no call id, by tool name and canonical arguments. Two
    requests sharing one call id need two spans: the one left over stays a step. A request
    no tool span ran, named after an agent whose span the trace holds (``agents``: agent name
    to its spans' ids; a smolagents managed agent called as a tool), was run by that agent:
    the sub-agent's own tool calls are steps of the trace. An agent span that is the requesting
    span or one of its ancestors cannot have run the request (it was running when the model
    asked): it never accounts for one (docs/DECISIONS.md 187). A request named ``transfer_to_<agent>`` (openai-agents'
    handoff tool) was run as a handoff when the trace holds a handoff span not matched yet (``handoffs``: a
    one-element count, decremented) and a span of that agent that may have run it (docs/DECISIONS.md 347).
    """
    distinct: list[RequestedCall] = []
    seen: set[tuple] = set()
    answers: dict[int, frozenset] = {}  # per requesting span: the output tools it declares (DECISIONS 444)
    for request in requests:
        if OUTPUT_TOOLS_KEY in request.span.attributes:
            declared = answers.get(id(request.span))
            if declared is None:
                declared = answers[id(request.span)] = output_tools(request.span)
            if request.tool in declared:  # the model's structured answer: no tool runs for it
                continue
        if request.call_id is not None:
            identity = (request.call_id, request.tool, request.arguments.sha256)
            if identity in seen:
                continue
            seen.add(identity)
        distinct.append(request)
    recorded = [s for s in steps if not s.requested_only]
    exact = Counter((s.call_id, s.tool, s.arguments_sha256) for s in recorded if not s.call_id_from_span)
    by_id = Counter((s.call_id, s.tool) for s in recorded if not s.call_id_from_span)
    unlabeled = Counter((s.tool, s.arguments_sha256) for s in recorded if s.call_id_from_span and s.arguments_sha256 is not None)
    by_content = Counter((s.tool, s.arguments_sha256) for s in recorded if s.arguments_sha256 is not None)
    ran = Counter(s.tool for s in recorded)
    blank = Counter(s.tool for s in recorded if s.call_id_from_span and s.arguments_sha256 is None)  # no way to match them but by tool
    by_result: dict[tuple, list] = {}  # (call id its result names, tool) -> the arguments' SHA-256 of such spans
    for s in recorded:
        if s.call_id_from_span and s.result_call_id is not None:
            by_result.setdefault((s.result_call_id, s.tool), []).append(s.arguments_sha256)
    left: list[RequestedCall] = []
    matched: Counter = Counter()  # requests matched to a tool span, by tool
    for request in distinct:  # first pass: the span that ran exactly this call
        key = (request.call_id, request.tool, request.arguments.sha256)
        if request.call_id is not None and exact[key] > 0:
            exact[key] -= 1
            by_id[(request.call_id, request.tool)] -= 1
            matched[request.tool] += 1
        elif request.call_id is not None and by_result.get((request.call_id, request.tool)):
            # A span of no call id whose result names this call (DECISIONS 443): taken out of the pools of content too.
            sha = by_result[(request.call_id, request.tool)].pop()
            if sha is None:
                blank[request.tool] -= 1
            else:
                unlabeled[(request.tool, sha)] -= 1
                by_content[(request.tool, sha)] -= 1
            matched[request.tool] += 1
        else:
            left.append(request)
    extra = []
    uncompared: list[RequestedCall] = []  # matched last, by tool only, where one side recorded no arguments
    for request in left:
        content = (request.tool, request.arguments.sha256)
        bare = bare_value_sha256(request.arguments, config.limits) if request.arguments.sha256 is not None else None
        if request.call_id is not None:
            if by_id[(request.call_id, request.tool)] > 0:
                by_id[(request.call_id, request.tool)] -= 1
                matched[request.tool] += 1
                continue
            if request.arguments.sha256 is not None and unlabeled[content] > 0:
                unlabeled[content] -= 1
                matched[request.tool] += 1
                continue
            if bare is not None and unlabeled[(request.tool, bare)] > 0:  # its one argument recorded bare (DECISIONS 442)
                unlabeled[(request.tool, bare)] -= 1
                matched[request.tool] += 1
                continue
        elif request.arguments.sha256 is not None and by_content[content] > 0:
            by_content[content] -= 1
            matched[request.tool] += 1
            continue
        elif bare is not None and by_content[(request.tool, bare)] > 0:
            by_content[(request.tool, bare)] -= 1
            matched[request.tool] += 1
            continue
        runner = _agent_that_may_have_run(request, agents.get(request.tool), spans_by_id)
        if runner is not None:
            agents[request.tool].remove(runner)
            continue
        target = _handoff_target(request.tool, agents) if handoffs and handoffs[0] > 0 else None
        runner = _agent_that_may_have_run(request, agents[target], spans_by_id) if target is not None else None
        if runner is not None:
            agents[target].remove(runner)
            handoffs[0] -= 1
            continue
        if request.tool in ran:
            uncompared.append(request)
            continue
        extra.append(_requested_step(request, request.call_id or f"{request.span.span_id}/{request.index}", config))
    # After every other match (DECISIONS 443): a request whose arguments were not recorded was run by a span of its
    # tool no request took; one whose arguments were, by such a span that recorded none and no call id either.
    for request in uncompared:
        if ran[request.tool] > matched[request.tool] and (request.arguments.sha256 is None or blank[request.tool] > 0):
            matched[request.tool] += 1
            if request.arguments.sha256 is not None:
                blank[request.tool] -= 1
            continue
        extra.append(_requested_step(request, request.call_id or f"{request.span.span_id}/{request.index}", config))
    return extra


def _handoff_target(tool: str, agents: dict[str, list[str]]) -> str | None:
    """The agent a requested ``transfer_to_<agent>`` hands off to, among ``agents`` (names compared as
    ``textfold.folded_word`` compares them: openai-agents writes the name in snake case), or ``None``."""
    if not tool.lower().startswith(HANDOFF_TOOL_PREFIX):
        return None
    folded = folded_word(tool)
    return next((name for name in agents if folded_word(HANDOFF_TOOL_PREFIX + name) == folded), None)


def _agent_that_may_have_run(request: RequestedCall, candidates: list[str] | None, by_id: dict[str, SpanView]) -> str | None:
    """The first of ``candidates`` (agent span ids) that is neither the requesting span nor above it, or ``None``."""
    if not candidates:
        return None
    enclosing = _ancestors_of((request.span.span_id,), by_id) | {request.span.span_id}
    return next((span_id for span_id in candidates if span_id not in enclosing), None)


def _request_order(request: RequestedCall) -> tuple:
    span = request.span
    when = span.end_time_unix_nano or span.start_time_unix_nano  # the requested-only step's start time
    return (when, span.sequence, span.span_id, request.index, request.call_id or "", request.tool, request.arguments.sha256 or "")


def _distinct_spans(spans: Sequence[SpanView]) -> tuple[Sequence[SpanView], dict[str, int]]:
    """The spans with each span id once, and the ids that name several different spans (how many spans
    carry the id, copies included).

    A span delivered twice (an OTLP client retrying an export that did arrive) is one span: the
    copy first in the source is kept. Two different spans under one id (corrupt or colliding ids)
    are both kept, whatever the order they came in: neither may hide the other's tool call.
    The count is of every span carrying the id, not of the different ones: whether two spans
    that differ only in attributes no convention reads are "different" depends on whether the
    view read those attributes (the service's light views do not), and the message must not.
    """
    by_id: dict[str, list[SpanView]] = {}
    for span in spans:
        by_id.setdefault(span.span_id, []).append(span)
    kept: list[SpanView] = []
    clashing: dict[str, int] = {}
    for span_id, group in by_id.items():
        if len(group) > 1:
            carrying = len(group)
            group.sort(key=lambda s: (s.sequence, s.start_time_unix_nano, repr(s)))  # by content: any input order
            group = [s for i, s in enumerate(group) if not any(_same_span(s, earlier) for earlier in group[:i])]
            if len(group) > 1:
                clashing[span_id] = carrying
        kept.extend(group)
    return kept, clashing


def _same_span(a: SpanView, b: SpanView) -> bool:
    return replace(a, sequence=0) == replace(b, sequence=0)


@cython.ccall
def _ancestors_of(span_ids: Iterable[str], by_id: dict[str, SpanView]) -> set[str]:
    """Every span above any of ``span_ids`` (linear: a walk stops where an earlier one passed)."""
    above: set[str] = set()
    for span_id in span_ids:
        parent_id = by_id[span_id].parent_span_id if span_id in by_id else None
        while parent_id and parent_id in by_id and parent_id not in above:
            above.add(parent_id)
            parent_id = by_id[parent_id].parent_span_id
    return above


@cython.ccall
def _below_any(span: SpanView, by_id: dict[str, SpanView], span_ids: set[str]) -> bool:
    """True when one of ``span_ids`` is an ancestor of ``span``."""
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):  # bounded: a parent cycle cannot loop forever
        if not parent_id or parent_id not in by_id:
            return False
        if parent_id in span_ids:
            return True
        parent_id = by_id[parent_id].parent_span_id
    return False


def _unread_requests(span: SpanView, lost: Sequence[str], read_any: bool) -> str | None:
    """Why a span's requested calls were not all read, or ``None``: ``lost`` describes the calls its
    output holds that could not be read (``requested.py``); with none lost and none read, a finish
    reason that says the model asked for tool calls, where the span recorded its output, is one
    (docs/DECISIONS.md 188)."""
    if lost:
        more = f" (and {len(lost) - 1} more call(s) not read)" if len(lost) > 1 else ""
        return f"its recorded output holds {lost[0]}{more}"
    if not read_any and recorded_output(span) and asked_for_tools(span):  # the cheaper test first: most spans recorded no output
        return "its finish reason says the model asked for tool calls, and none could be read from its recorded output"
    return None


def _unrecognized_step(span: SpanView, sign: str, config: TraceFenceConfig, reason: str = reasons.UNRECOGNIZED_TOOL_SPAN) -> ToolStep:
    """The ``review`` step standing for tool activity no convention reads (``activity.py``), or, with
    ``reason`` ``requested_call_unread``, for requested calls that could not be read."""
    tool = tool_name(span.attributes, span.name) or span.name
    effect, source, _ = resolve_effect(None, tool, span.attributes, config)
    status = span_status(span)
    if reason == reasons.REQUESTED_CALL_UNREAD:
        why = f"span {span.span_id} ({span.name!r}) requested tool calls that could not be read: {sign}"
    elif reason in (reasons.SPAN_DATA_DROPPED, reasons.LATE_REQUEST_UNTIED):
        why = sign
    else:
        why = f"span {span.span_id} ({span.name!r}) looks like tool activity ({sign}), but no known convention reads it"
    return ToolStep(
        trace_id=span.trace_id,
        call_id=span.span_id,
        call_id_from_span=True,
        span_id=span.span_id,
        tool=tool,
        effect=effect,
        effect_source=source,
        status=status if isinstance(status, ToolStatus) else STATUS_UNKNOWN,
        start_time_unix_nano=span.start_time_unix_nano,
        sequence=span.sequence,
        malformed=(MalformedField("span", why, reason=reason),),
    )


# The keys the tool-span, Haystack ToolInvoker, requested-call and HTTP readers look for first (each reader's own set).
_READER_KEYS = TOOL_MARKER_KEYS | REQUESTED_KEYS | HTTP_REQUEST_KEYS


@cython.ccall
def quiet(span: SpanView) -> bool:
    """True when none of the readers that look for tool calls and requests can find anything in ``span``:
    it is readable, has no events, its operation is not ``execute_tool``, no key of it is an indexed key that may
    hold a call (``requested.has_indexed_call_keys``), and it holds none of the keys those readers look for first
    (``conventions.is_tool_span`` and ``is_tool_invoker``,
    ``requested.requested_calls``, ``http.http_request``, each returning at its first test on such a span).
    Such a span is no step, no ToolInvoker, asks for no call and is no request: :func:`normalize_trace`
    reads it only as every stepless span is read beside those (its name and kind, its parents), without
    calling them. Most spans of an agent trace (chat, agent, plain spans) are quiet.
    tests/normalize/test_quiet_spans.py checks each reader on every span of every OTLP case against it."""
    if span.unreadable is not None or span.events:
        return False
    attributes = span.attributes
    # ``in`` then ``[]``: two C-level mapping operations, cheaper than a ``get`` method call
    if (GEN_AI_OPERATION in attributes and attributes[GEN_AI_OPERATION] == EXECUTE_TOOL) or not _READER_KEYS.isdisjoint(attributes):
        return False
    return not has_indexed_call_keys(attributes)  # calls in indexed keys, on a span of any kind (DECISIONS 440)


def unread_activity_step(span: SpanView, config: TraceFenceConfig) -> ToolStep | None:
    """For a span seen alone (one that arrived after its trace was decided): the ``review`` step
    standing for it when it dropped attributes or events (:func:`dropped_step`, as in its trace), or looks like
    tool activity no convention reads (``activity.py``)."""
    held = dropped_step(span, config)
    if held is not None:
        return held
    sign = tool_activity_sign(span)
    return _unrecognized_step(span, sign, config) if sign is not None else None


def dropped_step(span: SpanView, config: TraceFenceConfig | ConfigReading) -> ToolStep | None:
    """The ``review`` step (``span_data_dropped``) standing for a span that is no step and says it dropped attributes
    or events, wherever it is in its trace and whenever it comes: what it lost may be what made it a tool span
    (docs/DECISIONS.md 252, 358); ``None`` for a span that dropped nothing."""
    dropped = dropped_data(span) if span.dropped_attributes or span.dropped_events or span.events else None
    if dropped is None:
        return None
    return _unrecognized_step(span, dropped.message, config, reasons.SPAN_DATA_DROPPED)


@cython.ccall
def _http_dispatches(
    steps: dict[str, ToolStep], stepless: list[SpanView], by_id: dict[str, SpanView], tool_ids: set[str], root_of: dict[str, str]
) -> None:
    """Count the HTTP requests below each step (``http.py``): the most unsafe requests with one
    method and URL are its dispatch attempts, and a 5xx response is an error in its result.
    Updates ``steps`` (root span id -> step) in place."""
    sent: Counter = Counter()
    failed: set[str] = set()
    lost: dict[str, ToolStatus] = {}  # a request that ended in error with no response: its outcome is unknown
    below: dict[str, list[tuple[SpanView, HttpRequest | None, KeyEvidence | None]]] = {}  # root -> its requests with evidence
    for span in stepless:
        request = http_request(span)
        owner = _nearest_tool_ancestor(span, by_id, tool_ids) if request is not None else None
        if owner is None:
            continue
        root = root_of[owner]
        if request.unsafe:
            sent[(root, request.method, request.url)] += 1
        if request.server_error:
            failed.add(root)
        if request.failed:
            lost[root] = _lost_status(span)
        evidence = key_evidence(span.attributes)
        contradicts = _contradicts(request) and _contradictable(steps[root]) and not _mcp_transport(span, by_id, root)
        if evidence is not None or contradicts:
            below.setdefault(root, []).append((span, request if contradicts else None, evidence))
    most: dict[str, int] = {}
    for (root, _, _), count in sent.items():
        most[root] = max(most.get(root, 0), count)
    for root in set(most) | failed | set(lost) | set(below):
        step = steps[root]
        changes = _request_failure(step, root in failed, lost.get(root))
        if most.get(root, 0) > step.attempts:
            changes["attempts"] = most[root]
        if root in below:
            changes.update(request_evidence(step, below[root], changes.get("notes", step.notes)))
        if changes:
            steps[root] = replace(step, **changes)


# The effect sources a dispatch below the step can contradict: MCP's tool annotations are untrusted hints (MCP
# specification, ToolAnnotations), an HTTP method is a hint too, and the operator's tool rule is matched by name. The
# producer's own tracefence.effect declaration is not: a read may be sent as a POST (GraphQL, search APIs), and the
# producer who declared it knows (docs/DECISIONS.md 424).
_CONTRADICTABLE_SOURCES = (SOURCE_MCP_HINT, SOURCE_HTTP_METHOD, SOURCE_CONFIG)


def _contradicts(request: HttpRequest) -> bool:
    """True for an HTTP request whose method is not safe (RFC 9110 section 9.2.1): an RPC request's method says nothing
    of safety, so it contradicts no read."""
    return request.unsafe and request.method != RPC_METHOD


@cython.ccall
def _contradictable(step: ToolStep) -> bool:
    """True for a read whose effect came from a hint or the operator's tool rule (:data:`_CONTRADICTABLE_SOURCES`)."""
    return step.effect is READ and step.effect_source in _CONTRADICTABLE_SOURCES


def _mcp_transport(span: SpanView, by_id: dict[str, SpanView], root: str) -> bool:
    """True when the first span above ``span`` (up to the step ``root``) that carries ``mcp.method.name`` is an MCP
    client's (any kind but SERVER): ``span`` is then the MCP client's transport (streamable HTTP sends every JSON-RPC
    message as a POST), not the tool's effect. Below an MCP server span, a request is the handler's own."""
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):
        parent = by_id.get(parent_id) if parent_id else None
        if parent is None or parent.span_id == root and MCP_METHOD_KEY not in parent.attributes:
            return False
        if MCP_METHOD_KEY in parent.attributes:
            return parent.kind != KIND_SERVER
        parent_id = parent.parent_span_id
    return False


def _span_words(span: SpanView) -> str:
    return f"span {span.span_id} ({span.name!r})"


def request_evidence(step: ToolStep, below: Sequence[tuple[SpanView, HttpRequest | None, KeyEvidence | None]], notes: tuple) -> dict:
    """The changes to ``step`` of what the requests below it (``below``: each span, its request when it is one that
    may contradict a read, i.e. :func:`_contradicts` and no MCP client's transport, and its header evidence) show beyond failures and dispatch counts, ``notes`` being the step's notes so far (docs/DECISIONS.md
    420-425):

    * the idempotency key their headers sent is the step's when it records none (``http.reconciled_key``); records
      that give no one key hold it (``malformed_idempotency_key``, naming the span);
    * a response the server says it replayed (``Idempotent-Replayed: true``) is noted ``response_replayed``: that
      request made no new effect; the note never decides;
    * an HTTP request with a method that is not safe (RFC 9110 section 9.2.1) below a read whose effect came from a
      hint or a tool rule contradicts it: held (``effect_contradicted_by_dispatch``, naming the first such span).
      RPC requests say nothing of safety and contradict nothing; an MCP client's own transport requests neither.

    The one rule for requests in time and late (:func:`late_request`). ``{}`` when nothing changes."""
    ordered = sorted(below, key=lambda item: (item[0].start_time_unix_nano, item[0].span_id))
    changes: dict = {}
    found = [(_span_words(span), evidence) for span, _, evidence in ordered if evidence is not None]
    malformed = step.malformed
    if found:
        key, why = reconciled_key(step.idempotency_key, found)
        if why is not None:
            malformed = malformed + (MalformedField("idempotency_key", why),)
        elif key != step.idempotency_key:
            changes["idempotency_key"] = key
        if any(evidence.replayed for _, evidence in found) and reasons.RESPONSE_REPLAYED not in notes:
            changes["notes"] = notes + (reasons.RESPONSE_REPLAYED,)
    if _contradictable(step):
        writes = [(span, request) for span, request, _ in ordered if request is not None]
        if writes:
            span, request = writes[0]
            more = f" (and {len(writes) - 1} more request(s) with a method that is not safe)" if len(writes) > 1 else ""
            why = (
                f"the step's effect is read by {step.effect_source.value}, but {_span_words(span)} below it sent "
                f"{request.method} {request.url or '(URL not recorded)'}{more}: a method that is not safe is evidence the tool writes"
            )
            malformed = malformed + (MalformedField("effect", why, reason=reasons.EFFECT_CONTRADICTED_BY_DISPATCH),)
    if malformed is not step.malformed:
        changes["malformed"] = malformed
    return changes


def _request_failure(step: ToolStep, server_error: bool, lost: ToolStatus | None) -> dict:
    """The changes to ``step`` of a request below it that failed: a 5xx response (``server_error``) is an error in
    its result; a request that ended in error with no response (``lost``: its span's status) leaves an ok step's
    outcome unknown. ``{}`` when nothing changes."""
    if server_error:
        status, notes = result_status(step.status, SERVER_ERROR_RESULT)
        return {"status": status, "notes": step.notes + notes} if notes else {}
    if lost is not None and step.status is OK:
        return {"status": lost, "notes": step.notes + (reasons.DISPATCH_ATTEMPT_FAILED,)}
    return {}


def _lost_status(span: SpanView) -> ToolStatus:
    """The outcome of a request whose client span ended in error with no response."""
    status = span_status(span)
    return status if isinstance(status, ToolStatus) and status is not OK else ERROR


def late_request(span: SpanView, step: ToolStep) -> tuple[ToolStep, bool] | None:
    """For a span directly below ``step``'s span that arrived after its trace was decided: ``None`` when it records
    no HTTP (or RPC) request (``http.py``), else ``(step as the request changes it, whether it is a dispatch)``: a
    5xx response or a request lost without one changes the step's status as :func:`normalize_trace` does; an
    unsafe request is a dispatch of the step. Counting dispatches is the caller's (it knows the earlier ones)."""
    request = http_request(span)
    if request is None:
        return None
    changes = _request_failure(step, request.server_error, _lost_status(span) if request.failed else None)
    # Its idempotency evidence is read as in time. A late unsafe request is a dispatch, which holds the step anyway
    # (decided_before_complete): whether it contradicts a hinted read is not asked (the step's span, which may be an
    # MCP client's whose transport it is, is not remembered).
    evidence = key_evidence(span.attributes)
    if evidence is not None:
        changes.update(request_evidence(step, ((span, None, evidence),), changes.get("notes", step.notes)))
    return (replace(step, **changes) if changes else step), request.unsafe


def untied_request(span: SpanView, config: TraceFenceConfig | ConfigReading) -> ToolStep | None:
    """For a span that arrived after its trace was decided and whose parent is no remembered step span: the
    ``review`` step standing for it (``late_request_untied``) when it records an HTTP (or RPC) request that is a
    dispatch (an unsafe method) or failed (a 5xx, or no response), else ``None``. The request may belong to a step
    through spans in between, which the buffer does not remember: it cannot be tied, so it is not passed
    (docs/DECISIONS.md 295)."""
    request = http_request(span)
    if request is None or not (request.unsafe or request.server_error or request.failed):
        return None
    what = "dispatched" if request.unsafe else "failed"
    why = (
        f"span {span.span_id} ({span.name!r}) came after its trace was decided and {what} a request "
        f"({request.method} {request.url or 'to a URL not recorded'}) that could not be tied to a step: "
        f"its parent {span.parent_span_id or '(none)'} is no step span remembered"
    )
    return _unrecognized_step(span, why, read_config(config), reasons.LATE_REQUEST_UNTIED)


def late_requests(span: SpanView, steps: Sequence[ToolStep], config: TraceFenceConfig | ConfigReading) -> list[ToolStep]:
    """For a span that arrived after its trace was decided: the steps its requested calls add beside ``steps`` (the
    trace's remembered ones), as :func:`normalize_trace` makes them: each requested call no step records (nor
    requests already), ``requested_only``; and the ``requested_call_unread`` step when its recorded output holds
    calls that cannot be read. The trace's agent spans are not known here: a request named after a sub-agent that
    ran it stays a step (fail closed). ``[]`` for a span that requests nothing new."""
    config = read_config(config)
    lost: list[Unread] = []
    requests = sorted(requested_calls(span, config.limits, lost), key=_request_order)
    known = {(s.call_id, s.tool, s.arguments_sha256) for s in steps if s.requested_only}
    added = [s for s in _unrecorded_requests(list(steps), requests, config, {}, {span.span_id: span}) if (s.call_id, s.tool, s.arguments_sha256) not in known]
    why = _unread_requests(span, lost, bool(requests))
    if why is not None:
        added.append(_unrecognized_step(span, why, config, reasons.REQUESTED_CALL_UNREAD))
    return added


def normalize_trace(spans: Sequence[SpanView], config: TraceFenceConfig | ConfigReading) -> NormalizedTrace:
    """The tool steps of one trace's spans (DESIGN.md, "Normalized step"; docs/CONVENTIONS.md).

    A tool span inside another tool span (no agent or model span between) is a
    dispatch attempt of the outer step, which counts its attempts; so are HTTP
    client requests with one unsafe method and URL below a step. A Haystack
    ``ToolInvoker`` span gives one step per call it ran. Requested calls no span
    records are steps, and so is tool activity no convention reads
    (``unrecognized_tool_span``). A pending record a later run of its call supersedes
    (``pending.py``) is no step. Never raises for any span; the order of ``spans``
    does not matter. A span given twice counts once; different spans sharing one
    span id each become a step of their own, malformed (field ``span_id``), neither
    an attempt nor holding any. ``config`` is read once, for the whole trace (``config_reading.py``).
    """
    config = read_config(config)  # read once for the whole trace (config_reading.py)
    # The values its messages quote: described, unless the redaction policy keeps raw values (core/value_text.py).
    token = showing_values(config.redaction if config.store_raw_values else None)
    try:
        return _normalize_trace(spans, config)
    finally:
        stop_showing(token)


def _normalize_trace(spans: Sequence[SpanView], config: ConfigReading) -> NormalizedTrace:
    by_id = {s.span_id: s for s in spans}  # for a clashing id, the last of its spans in content order
    clashing: dict[str, int] = {}
    if len(by_id) != len(spans):  # not the common case of every id once
        spans, clashing = _distinct_spans(spans)
        by_id = {s.span_id: s for s in spans}
    own_steps = {}
    clashing_steps: list[ToolStep] = []
    stepless: list[SpanView] = []  # where unread tool activity is looked for
    talking: list[SpanView] = []  # the stepless spans that are not quiet: where requested calls and HTTP requests are looked for
    invokers: list[SpanView] = []
    for span in spans:
        if quiet(span):
            stepless.append(span)
            continue
        if is_tool_invoker(span.attributes):
            invokers.append(span)
            continue
        step = span_to_step(span, config)
        if step is None:
            stepless.append(span)
            talking.append(span)
        elif span.span_id in clashing:
            bad = MalformedField("span_id", f"span id {span.span_id} is carried by {clashing[span.span_id]} spans of the trace that are not all the same")
            clashing_steps.append(replace(step, malformed=step.malformed + (bad,)))
        else:
            own_steps[span.span_id] = step
    if own_steps:  # a framework's summary of parallel calls is no call (summary.py, docs/DECISIONS.md 441)
        for sid in summary_spans(own_steps, by_id, config):
            del own_steps[sid]
    # No early return when no span is a tool span: a call the model requested is a step
    # even when no tool span records it (the process may have died before exporting one).
    tool_ids = set(own_steps)
    nearest = {sid: _nearest_tool_ancestor(by_id[sid], by_id, tool_ids) for sid in tool_ids}
    for sid, outer in nearest.items():
        if outer is not None and _other_tool(own_steps[sid], own_steps[outer], by_id[sid]):
            nearest[sid] = None  # a tool that calls another tool: the inner call is a step of its own
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
    root_steps: dict[str, ToolStep] = {}
    for sid, step in own_steps.items():
        if root_of[sid] != sid:
            result.attempt_of[sid] = root_of[sid]
            continue
        inner = sorted(attempts.get(sid, []), key=step_order)
        if inner:
            sent_ids = {a.span_id for a in inner if a.span_id not in has_inner}
            root_steps[sid] = _fill_from_attempts(step, inner, sent_ids, _chains(inner, nearest, sid), by_id)
        else:
            root_steps[sid] = step
    if root_steps and talking:  # HTTP requests are in spans that are not quiet
        _http_dispatches(root_steps, talking, by_id, tool_ids, root_of)
    result.steps.extend(root_steps.values())
    result.steps.extend(clashing_steps)
    above_steps = _ancestors_of(tool_ids | {invoker.span_id for invoker in invokers}, by_id)
    requests: list[RequestedCall] = []
    # Both by the span itself, not its id: spans sharing one span id are each their own (DECISIONS 360, 692).
    unread: dict[int, list[Unread]] = {}  # id(span) -> the calls its output holds that could not be read
    for span in talking:  # a quiet span holds no requested call (trace.quiet)
        lost: list[Unread] = []
        requests.extend(requested_calls(span, config.limits, lost))
        if lost:
            unread[id(span)] = lost
    for invoker in invokers:
        views = haystack.tool_calls(invoker)
        if invoker.span_id in above_steps:  # its calls ran as tool spans of their own: they are requests
            for index, call in enumerate(views):
                tool = tool_name(call.attributes, call.name) or ""
                requests.append(RequestedCall(tool_call_id(call.attributes), tool, span_arguments(call.attributes, config.limits), invoker, index))
        elif views:
            steps = [step for view in views if (step := span_to_step(view, config)) is not None]
            if haystack.labels_are_ambiguous(invoker, views):
                why = MalformedField("effect", f"the ToolInvoker span {invoker.span_id} ran {len(views)} calls and carries one set of tracefence.* labels: "
                                     "which call they label cannot be known (label these tools with tool_rules)")
                steps = [replace(step, malformed=step.malformed + (why,)) for step in steps]
            result.steps.extend(steps)
        else:
            result.steps.append(_unrecognized_step(invoker, "a Haystack ToolInvoker whose input records no readable tool call", config))
    if len(root_steps) > 1:  # a call held for approval, and its run after the resume (pending.py, docs/DECISIONS.md 600)
        resumed = superseded(root_steps, by_id, requests)
        if resumed:
            result.steps = folded(result.steps, root_steps, resumed)
    if requests:
        # In trace order, not input order: the first request of a call id is the one that becomes its step.
        requests.sort(key=_request_order)
        agents: dict[str, list[str]] = {}
        handoffs = [0]  # handoff spans (openai-agents) not yet matched to a request
        for span in stepless:
            if name := agent_name(span.attributes, span.name):
                agents.setdefault(name, []).append(span.span_id)
            if span.attributes.get(GEN_AI_OPERATION) == HANDOFF_OPERATION:
                handoffs[0] += 1
        result.steps.extend(_unrecorded_requests(result.steps, requests, config, agents, by_id, handoffs))
    asking = {id(r.span) for r in requests}  # the spans that requested a call read (ids may clash)
    covered = tool_ids | above_steps
    talking_spans = {id(span) for span in talking}  # the spans themselves (ids may clash), alive until the end
    for span in stepless:
        held = dropped_step(span, config)  # it may have lost what marks a tool call: held (DECISIONS 252)
        if held is not None:
            result.steps.append(held)
            continue
        own_key = misread_own_key(span.attributes)
        if own_key is not None:  # a tracefence.* key not understood, wherever the span is (DECISIONS 250, 356)
            result.steps.append(_unrecognized_step(span, misread_message(*own_key), config))
            continue
        # A quiet span (trace.quiet) recorded no output and holds no requested call: nothing of it can be unread.
        why = _unread_requests(span, unread.get(id(span), ()), id(span) in asking) if id(span) in talking_spans else None
        if why is not None:  # wherever the span is, whatever else the trace holds
            result.steps.append(_unrecognized_step(span, why, config, reasons.REQUESTED_CALL_UNREAD))
            continue
        if id(span) in asking or span.span_id in covered:
            continue
        sign = tool_activity_sign(span)
        if sign is None and not own_steps and asked_for_tools(span):
            sign = "its finish reason says the model asked for tool calls, and none could be read"
        if sign is not None and not _below_any(span, by_id, tool_ids):
            result.steps.append(_unrecognized_step(span, sign, config))
    result.steps.sort(key=step_order)
    return result
