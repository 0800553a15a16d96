"""HTTP (and RPC) client requests below a tool step: its dispatch attempts, a failure its span does not show, the
idempotency key its headers sent, a replayed response, and an unsafe method below a hinted read (docs/DECISIONS.md
420-425); the same rules for a request that arrives after its trace was decided (:func:`late_request`,
:func:`untied_request`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Sequence

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.model import ERROR, OK, READ, SOURCE_CONFIG, SOURCE_DECLARED, SOURCE_HTTP_METHOD, SOURCE_MCP_HINT, MalformedField, ToolStatus, ToolStep
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.config_reading import ConfigReading, read_config
from otel_tracefence.normalize.conventions import MCP_METHOD_KEY, RPC_METHOD
from otel_tracefence.normalize.http import HttpRequest, KeyEvidence, http_request, key_evidence, reconciled_key
from otel_tracefence.normalize.span_tree import nearest_tool_ancestor
from otel_tracefence.normalize.span_view import KIND_SERVER, SpanView
from otel_tracefence.normalize.status import span_status
from otel_tracefence.normalize.step import SERVER_ERROR_RESULT, result_status
from otel_tracefence.normalize.unread import unrecognized_step


@cython.ccall
def http_dispatches(
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
        owner = nearest_tool_ancestor(span, by_id, tool_ids) if request is not None else None
        if owner is None:
            continue
        root = root_of[owner]
        if request.unsafe:
            sent[(root, request.method, request.url)] += 1
        if request.server_error:
            failed.add(root)
        if _lost(request):
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
# specification, ToolAnnotations), an HTTP method is a hint too, the operator's tool rule is matched by name, and the
# producer's own tracefence.effect declaration is one rule with the operator's: a read it declares that sends a
# method that is not safe is held for a person to confirm, as the same read given by tool_rules is (docs/DECISIONS.md
# 424, 989; a read sent as a POST, GraphQL or search, is confirmed once in review).
_CONTRADICTABLE_SOURCES = (SOURCE_DECLARED, SOURCE_MCP_HINT, SOURCE_HTTP_METHOD, SOURCE_CONFIG)


def _contradicts(request: HttpRequest) -> bool:
    """True for an HTTP request whose method is not safe (RFC 9110 section 9.2.1): an RPC request's method says nothing
    of safety, so it contradicts no read."""
    return request.unsafe and request.method != RPC_METHOD


@cython.ccall
def _contradictable(step: ToolStep) -> bool:
    """True for a read whose effect came from a declaration, a hint or the operator's tool rule (:data:`_CONTRADICTABLE_SOURCES`)."""
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
      declaration, a hint or a tool rule contradicts it (989): held (``effect_contradicted_by_dispatch``, naming the first such span).
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


def _lost(request: HttpRequest) -> bool:
    """True for a request whose outcome leaves an ok step's unknown: it ended in error with no response, or it is a
    dispatch (a method that is not safe) the server refused with a 4xx, which a client span's status says is an error
    (HTTP semantic conventions, "Status"; RFC 9110 section 15.5): the write the step's span calls ok was not carried
    out as sent, or not known to be (docs/DECISIONS.md 954). A 5xx is an error in the result already."""
    return request.failed or (request.unsafe and request.failed_response and not request.server_error)


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
    changes = _request_failure(step, request.server_error, _lost_status(span) if _lost(request) else None)
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
    return unrecognized_step(span, why, read_config(config), reasons.LATE_REQUEST_UNTIED)
