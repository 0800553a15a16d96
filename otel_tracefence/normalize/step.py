"""One span to one normalized step (DESIGN.md, "Normalized step")."""

from __future__ import annotations

from dataclasses import replace
from itertools import islice
from typing import Any, Mapping

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import (
    EFFECT_UNKNOWN, ERROR, OK, READ, STATUS_UNKNOWN, WRITE, Effect, MalformedField, ToolStatus, ToolStep,
)
from otel_tracefence.core.value_text import described
from otel_tracefence.normalize.argument_keys import arguments_key
from otel_tracefence.normalize.evidence import (
    WITHOUT_EVIDENCE, failure_event, failure_evidence, framework_status_failed, producer_of, redacted, status_blind_path, unread_result_key,
)
from otel_tracefence.normalize.conventions import (
    ARGUMENT_KEYS, RESPONSE_STATUS_KEYS, RESULT_KEYS, TRACEFENCE_EFFECT, TRACEFENCE_IDEMPOTENCY_KEY, TRACEFENCE_RESULT_STABLE,
)
from otel_tracefence.normalize.span_kinds import call_id as tool_call_id, is_tool_span, tool_name
from otel_tracefence.normalize.read_keys import READ_MARKERS, UNDERSTOOD_KEYS, misread_attribute, records_headers, misread_message

from otel_tracefence.normalize.effect import resolve_effect
from otel_tracefence.normalize.http import REQUEST_KEYS as HTTP_REQUEST_KEYS, key_evidence, own_response, reconciled_key
from otel_tracefence.normalize.pending import approval_pending
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.status import ends_before_start, span_status
from otel_tracefence.normalize.tokens import value_tokens
from otel_tracefence.normalize.values import (
    FAILURE_TEXT, TEMPLATE_ERROR_PREFIX, TRUNCATED_ARGUMENTS, UNREAD_RESULT, Arguments, Result, kept_arguments, kept_result, result_call_id, result_tokens, span_arguments,
    span_result,
)


@cython.ccall
def _idempotency_key(span: SpanView, tool: str, arguments_value, config: TraceFenceConfig) -> str | MalformedField | None:
    declared = span.attributes.get(TRACEFENCE_IDEMPOTENCY_KEY)
    if declared is not None:
        if not isinstance(declared, str) or not declared:
            return MalformedField("idempotency_key", f"idempotency key ({described(declared)}) is not a non-empty string")
        if redacted(declared):  # a scrubber's mark: the key is hidden, never read as the key (DECISIONS 986)
            return MalformedField("idempotency_key", f"idempotency key ({described(declared)}) is a producer's stand-in for a hidden value")
        return declared
    return arguments_key(arguments_value, tool, config)  # the tool rule's argument, the configured paths, any spelling (969)


@cython.ccall
def result_stability(declared, tool: str, config: TraceFenceConfig) -> tuple[bool, MalformedField | None]:
    """Whether the tool's results are stable across executions (seed 000, "Decision boundary").

    ``declared`` is the producer's ``tracefence.result_stable`` (``None`` when absent): it must be
    a boolean, anything else is malformed (field ``result_stable``) and never guessed: taken as
    unstable, and the step is held anyway. Else the first matching tool rule's ``result``
    (``stable`` / ``unstable``); else stable.
    """
    if declared is not None:
        if not isinstance(declared, bool):
            return False, MalformedField("result_stable", f"result_stable ({described(declared)}) is not a boolean")
        return declared, None
    rule = config.rule_for(tool) if tool else None
    return (rule is None or rule.result != "unstable"), None


@cython.ccall
def _at_length_limit(attributes, keys: tuple, limit: int) -> bool:
    """True when one of ``keys`` holds a string exactly ``limit`` long (or longer): the producer's SDK cuts a
    string attribute value to its length limit, so such a value may have been cut (docs/DECISIONS.md 257)."""
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and len(value) >= limit:
            return True
    return False


TRUNCATED_RESULT = MalformedField(
    "result", "the result is cut off: its JSON text does not parse to its end (an attribute length limit?)", reason=reasons.RESULT_TRUNCATED
)


@cython.ccall
def _has_http_status(attributes) -> bool:
    """True when the span records an HTTP or gRPC response status (``conventions.RESPONSE_STATUS_KEYS``): only then
    is it asked what request it records (a call per tool span saved)."""
    for key in RESPONSE_STATUS_KEYS:
        if key in attributes:
            return True
    return False


SERVER_ERROR_RESULT = Result(error="http_status")
# A write whose result its producer hid (``framework_texts.REDACTED_VALUES``): what it returned cannot be read (DECISIONS 952).
_HIDDEN_RESULT = "is its producer's stand-in for a hidden value: whether the write committed cannot be read"
"""What an HTTP response of 500 to 599 says of a call's result (``http.py``): an error, read by :func:`result_status`
whether the response is the tool span's own or a request's below it (docs/DECISIONS.md 254); a 400 to 499 says so
too when it is the tool span's own response (303)."""


@cython.ccall
def result_status(status: ToolStatus, result: Result) -> tuple[ToolStatus, tuple[str, ...]]:
    """A call whose span (or its producer's declaration) says ok but whose recorded result is an error
    (``result_errors.py``) has status ``error``, noted ``error_in_result``: where two records disagree,
    the one that fences wins. A declared ``error``, ``timeout`` or ``unknown`` is never changed."""
    if status is OK and result.error == UNREAD_RESULT:
        return STATUS_UNKNOWN, (reasons.RESULT_UNREAD,)  # no evidence either way: a write is held, a read replays
    if status is OK and result.error == FAILURE_TEXT:
        return STATUS_UNKNOWN, (reasons.FAILURE_TEXT_IN_RESULT,)  # reads as a failure no template knows (DECISIONS 1031)
    if status is OK and result.error is not None:
        return ERROR, ((reasons.ERROR_TEMPLATE_IN_RESULT,) if result.error.startswith(TEMPLATE_ERROR_PREFIX) else (reasons.ERROR_IN_RESULT,))
    return status, ()


@cython.ccall
def recorded_result_outcome(status: ToolStatus, result: Result, cut_off: bool, malformed: list) -> tuple[ToolStatus, tuple[str, ...]]:
    """The one reading of a recorded result for every step builder (a span's, a row's; docs/DECISIONS.md 500): a result
    cut off (its JSON text does not parse to its end, or ``cut_off``: a value at the producer's length limit) is
    appended to ``malformed`` as :data:`TRUNCATED_RESULT`, and the status is :func:`result_status`'s (an error object,
    a framework's error template or an unread result on an ``ok`` call). Returns ``(status, notes)``."""
    if result.truncated or cut_off:
        malformed.append(TRUNCATED_RESULT)
    return result_status(status, result)


# The field of a stand-in view (SpanView.unreadable) whose step is held with a code of its own, not malformed_<field>:
# a span refused for its trace id, standing in the trace of the parent it names (docs/DECISIONS.md 207).
CHILD_SPAN_FIELD = "child_span"
UNREADABLE_FIELD_REASONS = {CHILD_SPAN_FIELD: reasons.CHILD_SPAN_UNREAD}


@cython.ccall
def dropped_event_attributes(span: SpanView) -> int:
    """How many attributes the span's read events dropped: events whose name holds one of ``read_keys.READ_MARKERS``
    (``exception``, ``gen_ai.*``: the normalizer reads their attributes, an exception's type, a GenAI event's
    content). Other events are never read (and a span holding no marker is read without its events by the
    service), so what they lost hides nothing (docs/DECISIONS.md 375)."""
    lost = 0
    for event in span.events:
        if event.dropped_attributes and _read_event(event.name):
            lost += event.dropped_attributes
    return lost


def _read_event(name: str) -> bool:
    lowered = name.lower()
    return any(marker in lowered for marker in READ_MARKERS)


@cython.ccall
def dropped_data(span: SpanView) -> MalformedField | None:
    """``None`` for a span that dropped nothing; else why it cannot be read as complete (reason ``span_data_dropped``,
    naming the counts): attributes or events a span limit dropped may have been the ones that mark a tool call,
    its status or its effect (docs/DECISIONS.md 252), and attributes a read event dropped its exception's type or
    its content (375). The one rule for dropped data: :func:`~otel_tracefence.normalize.unread.dropped_step` asks it."""
    lost_event_attributes = dropped_event_attributes(span) if span.events else 0
    if not span.dropped_attributes and not span.dropped_events and not lost_event_attributes:
        return None
    events_lost = f", and its events {lost_event_attributes} attribute(s)" if lost_event_attributes else ""
    return MalformedField(
        "span",
        f"span {span.span_id} ({span.name!r}) dropped {span.dropped_attributes} attribute(s) and {span.dropped_events} event(s){events_lost} "
        "(a span limit?): what it lost cannot be read",
        reason=reasons.SPAN_DATA_DROPPED,
    )


@cython.ccall
def unreadable_step(span: SpanView) -> ToolStep:
    """The ``review`` step standing for a span that could not be read (``SpanView.unreadable``): it may
    have been a tool call, so its trace never passes without it. Its call id is the span's id as given."""
    field, why = span.unreadable
    return ToolStep(
        trace_id=span.trace_id,
        call_id=span.span_id,
        span_id="",  # no span of ours to annotate: it is not forwarded as it came
        tool=span.name,
        effect=EFFECT_UNKNOWN,
        status=STATUS_UNKNOWN,
        start_time_unix_nano=span.start_time_unix_nano,
        sequence=span.sequence,
        malformed=(MalformedField(field, f"span {span.span_id} could not be read: {why}", reason=UNREADABLE_FIELD_REASONS.get(field)),),
    )


def span_to_step(span: SpanView, config: TraceFenceConfig) -> ToolStep | None:
    """The span's tool step, or ``None`` when the span records no tool call.

    Never raises for any span: what cannot be read is listed in ``malformed``
    and the planner puts the step in review. The tool-call id is never used as
    an idempotency key (models mint a new one each turn).

    A tool span with more than ``limits.max_attributes_per_span`` attributes is
    malformed (field ``attributes``) and its step is read from its first that
    many attributes only. Whether it is a tool span at all is still decided on
    all of them (a few key lookups), so a tool marker past the limit cannot
    hide a step.
    """
    if span.unreadable is not None:
        return unreadable_step(span)
    if not is_tool_span(span.attributes, span.name):
        return None
    malformed: list[MalformedField] = []
    span = _readable_part(span, config, malformed)
    attributes = span.attributes
    tool = tool_name(attributes, span.name) or ""
    if not tool:
        malformed.append(MalformedField("tool", "no tool name recorded"))
    effect, source, bad_effect = resolve_effect(attributes.get(TRACEFENCE_EFFECT), tool, attributes, config)
    if bad_effect is not None:
        malformed.append(bad_effect)
    status = _span_status(span, effect, malformed)
    arguments = _arguments(span, config, malformed)
    key, replayed = _key(span, tool, arguments, config, malformed)
    result, status, notes = _result(span, effect, status, config, malformed)
    if status is OK and effect is WRITE:
        _commit_evidence(attributes, result, malformed, span.kind)
    stable, bad_stability = result_stability(attributes.get(TRACEFENCE_RESULT_STABLE), tool, config)
    if bad_stability is not None:
        malformed.append(bad_stability)
    call_id = tool_call_id(attributes)
    producer, records_results = producer_of(attributes)
    return ToolStep(
        trace_id=span.trace_id,
        call_id=call_id or span.span_id,
        call_id_from_span=call_id is None,
        result_call_id=(result_call_id(result) or arguments.call_id) if call_id is None else None,  # DECISIONS 443, 962
        span_id=span.span_id,
        tool=tool,
        effect=effect,
        effect_source=source,
        status=status,
        idempotency_key=key,
        arguments_json=kept_arguments(arguments, config),
        arguments_sha256=arguments.sha256,
        arguments_unavailable=arguments.unavailable,
        result_recorded=result.recorded,
        result_sha256=result.sha256,
        result_value=kept_result(result, config),
        start_time_unix_nano=span.start_time_unix_nano,
        sequence=span.sequence,
        malformed=tuple(malformed),
        notes=arguments.notes + notes + ((reasons.RESPONSE_REPLAYED,) if replayed else ()),
        result_stable=stable,
        argument_tokens=value_tokens(arguments.value, config.limits.max_tokens_per_value),
        result_tokens=result_tokens(result, config.limits.max_tokens_per_value),
        producer=producer,
        producer_records_results=records_results,
    )


@cython.cfunc
def _readable_part(span: SpanView, config: TraceFenceConfig, malformed: list[MalformedField]) -> SpanView:
    """``span`` cut to ``limits.max_attributes_per_span`` attributes, with what makes its attributes not wholly
    readable appended to ``malformed``: too many, a key given twice, a key misspelt (DECISIONS 250), data the span
    says it dropped (DECISIONS 252, 375)."""
    attributes = span.attributes
    limit = config.limits.max_attributes_per_span
    if len(attributes) > limit:
        malformed.append(
            MalformedField(
                "attributes",
                f"{len(attributes)} attributes, more than limits.max_attributes_per_span ({limit}): only the first {limit} were read",
            )
        )
        attributes = dict(islice(attributes.items(), limit))
        span = replace(span, attributes=attributes)
    if span.duplicate_keys:
        keys = ", ".join(repr(k) for k in span.duplicate_keys)
        malformed.append(MalformedField("attributes", f"attribute {keys} given more than once: which value was meant cannot be known"))
    misread = None if attributes.keys() <= UNDERSTOOD_KEYS else misread_attribute(attributes)  # DECISIONS 250
    if misread is not None:
        malformed.append(MalformedField("attributes", misread_message(*misread)))
    dropped = dropped_data(span) if span.dropped_attributes or span.dropped_events or span.events else None  # DECISIONS 252, 375
    if dropped is not None:
        malformed.append(dropped)
    return span


@cython.cfunc
def _span_status(span: SpanView, effect: Effect, malformed: list[MalformedField]) -> ToolStatus:
    """The step's status from its span (``span_status``), ``unknown`` where it cannot be read; an end before the
    start says why for a step that is no read (DECISIONS 505), and a write's failure evidence not understood holds it
    (DECISIONS 400)."""
    status = span_status(span)
    if isinstance(status, MalformedField):
        malformed.append(status)
        status = STATUS_UNKNOWN
    elif effect is not READ and span.end_time_unix_nano is not None and span.end_time_unix_nano < span.start_time_unix_nano:
        malformed.append(MalformedField("end_time", ends_before_start(span)))  # says why its status is unknown (DECISIONS 505)
    evidence = None
    if effect is WRITE and not span.attributes.keys() <= WITHOUT_EVIDENCE:  # DECISIONS 400: a write's outcome on evidence only
        evidence = failure_evidence(span.attributes, status is ERROR)
    if evidence is None and effect is WRITE and span.events:  # DECISIONS 974: an event named for a failure
        evidence = failure_event(span.events)
    if evidence is not None:
        malformed.append(evidence)
    return status


@cython.cfunc
def _arguments(span: SpanView, config: TraceFenceConfig, malformed: list[MalformedField]) -> Arguments:
    """The step's arguments: hidden by a producer's stand-in (DECISIONS 952), cut off at the span's value length
    limit, or malformed (appended to ``malformed``)."""
    attributes = span.attributes
    arguments = span_arguments(attributes, config.limits, span.events)
    if redacted(arguments.value) or redacted(arguments.json) or (  # a producer's stand-in for hidden arguments (DECISIONS 952)
            arguments.malformed is not None and _any_redacted(attributes, ARGUMENT_KEYS)):  # "[MASKED]" is no JSON (979)
        arguments = Arguments(unavailable=reasons.ARGUMENTS_HIDDEN, notes=arguments.notes)
    length_limit = span.value_length_limit
    if length_limit is not None and arguments.malformed is None and _at_length_limit(attributes, ARGUMENT_KEYS, length_limit):
        arguments = TRUNCATED_ARGUMENTS
    if arguments.malformed is not None:
        malformed.append(arguments.malformed)
    return arguments


def _any_redacted(attributes: Mapping[str, Any], keys: tuple) -> bool:
    """True when the value under one of ``keys`` is a producer's stand-in for a hidden value (``evidence.redacted``)."""
    for key in keys:
        if redacted(attributes.get(key)):
            return True
    return False


@cython.cfunc
def _key(span: SpanView, tool: str, arguments: Arguments, config: TraceFenceConfig, malformed: list[MalformedField]) -> tuple[str | None, bool]:
    """``(the step's idempotency key, whether its own response says it was replayed)``: declared or ruled
    (:func:`_idempotency_key`), reconciled with the key its own span's headers sent (DECISIONS 420-423, 503)."""
    attributes = span.attributes
    key = _idempotency_key(span, tool, arguments.value, config)
    if isinstance(key, MalformedField):
        malformed.append(key)
        key = None
    replayed = False
    if records_headers(attributes) or not HTTP_REQUEST_KEYS.isdisjoint(attributes):  # its own headers, a method or not (DECISIONS 503)
        evidence = key_evidence(attributes)
        if evidence is not None:  # the rule for requests below a step too (trace.request_evidence; DECISIONS 420-423)
            key, why = reconciled_key(key, (("its own span's headers", evidence),))
            if why is not None:
                malformed.append(MalformedField("idempotency_key", why))
            replayed = evidence.replayed
    return key, replayed


@cython.cfunc
def _result(span: SpanView, effect: Effect, status: ToolStatus, config: TraceFenceConfig, malformed: list[MalformedField]) -> tuple:
    """``(result, status, notes)``: the recorded result (none where its producer hid it, DECISIONS 952) and the status
    and notes it makes: an error inside it, a framework's status attribute, an approval answer (DECISIONS 600), a tool
    span's own failing response (343, 372)."""
    attributes = span.attributes
    result = span_result(attributes, config.limits, span.events, config)
    if result.recorded and redacted(result.value):  # a producer's stand-in for a hidden result: no result (DECISIONS 952)
        if effect is WRITE:
            malformed.append(MalformedField("result", f"its result {result.value} {_HIDDEN_RESULT}", reason=reasons.WRITE_OUTCOME_UNRECORDED))
        result = Result()
    length_limit = span.value_length_limit
    cut_off = length_limit is not None and not result.truncated and _at_length_limit(attributes, RESULT_KEYS, length_limit)
    status, notes = recorded_result_outcome(status, result, cut_off, malformed)
    if status is OK and framework_status_failed(attributes):  # Strands' gen_ai.tool.status=error on an unset span (DECISIONS 400)
        status, notes = ERROR, (reasons.FRAMEWORK_STATUS_ERROR,)
    if result.recorded and approval_pending(result):  # the framework's answer: the call waits for approval (DECISIONS 600)
        notes += (reasons.APPROVAL_PENDING,)
    if not notes and _has_http_status(attributes):  # a tool span that is an HTTP client span: its own response
        request = own_response(span)  # no method needed (343); a server span's 4xx is the caller's fault, its 5xx not (372)
        if request is not None and request.failed_response:  # 4xx too: 408, 409, 429 may or may not have applied it (303); gRPC (372)
            status, notes = result_status(status, SERVER_ERROR_RESULT)
    return result, status, notes


@cython.cfunc
def _commit_evidence(attributes: Mapping[str, Any], result: Result, malformed: list[MalformedField], kind: str = "") -> None:
    """For a write recorded ok: what makes its status no evidence it committed, appended to ``malformed``
    (``write_outcome_unrecorded``): a producer path whose status drops failures (DECISIONS 780, 955), a key that may
    hold its result and that no convention reads (DECISIONS 953)."""
    blind = status_blind_path(attributes, result.value, result.recorded, kind)
    if blind is not None:
        malformed.append(MalformedField("status", f"{blind}: its status is no evidence the write committed", reason=reasons.WRITE_OUTCOME_UNRECORDED))
    unread = None if result.recorded else unread_result_key(attributes)  # a result no convention reads (DECISIONS 953)
    if unread is not None:
        malformed.append(MalformedField(
            "result", f"attribute {unread!r} may hold its result, and no convention reads it: whether the write committed cannot be read",
            reason=reasons.WRITE_OUTCOME_UNRECORDED,
        ))
