"""A step's status: declared by the producer, else read off the span's status and exception events.

The GenAI semantic conventions leave span status unset on success and set
``error.type`` on failure; OpenTelemetry records exceptions as ``exception``
events with ``exception.type`` (semantic conventions, "Recording errors").
"""

from __future__ import annotations

import re
from typing import Any

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.model import ERROR, OK, STATUS_UNKNOWN, TIMEOUT, MalformedField, ToolStatus
from otel_tracefence.core.value_text import described, not_one_of, shown
from otel_tracefence.normalize.conventions import CANCEL_PATTERN, FAILURE_FLAG_KEYS, TIMEOUT_PATTERN, TRACEFENCE_STATUS
from otel_tracefence.normalize.read_keys import fold_key

from otel_tracefence.normalize.span_view import STATUS_ERROR, STATUS_UNSET, SpanView

DECLARABLE = {"ok": OK, "error": ERROR, "timeout": TIMEOUT, "unknown": STATUS_UNKNOWN}
_TIMEOUT = re.compile(TIMEOUT_PATTERN, re.IGNORECASE)
_CANCEL = re.compile(CANCEL_PATTERN, re.IGNORECASE)


@cython.ccall
def parse_declared(value: Any) -> ToolStatus | MalformedField:
    """A declared status must be exactly ``ok``, ``error``, ``timeout`` or ``unknown``."""
    status = DECLARABLE.get(value) if isinstance(value, str) else None
    if status is None:
        return MalformedField("status", not_one_of("status", value, DECLARABLE))
    return status


def classify_failure(signs: list[str]) -> ToolStatus:
    """A failed call's status from its error and exception type names: timeout, cancellation or error."""
    if any(_TIMEOUT.search(sign) for sign in signs):
        return TIMEOUT
    if any(_CANCEL.search(sign) for sign in signs):
        return STATUS_UNKNOWN
    return ERROR


EXCEPTION_EVENT = "exception"  # the semantic conventions' event name (exact: "Exception" is not it)


def span_status(span: SpanView) -> ToolStatus | MalformedField:
    """The status of a tool span (DESIGN.md, normalized step, ``status``); a failure flag a convention
    sets on the span (``conventions.FAILURE_FLAG_KEYS``) counts as an error status when it is boolean ``true``,
    and makes the status malformed when it is anything but a boolean (docs/DECISIONS.md 253).

    A declared ``tracefence.status`` decides, except that a declared ``ok`` on a span whose own record says
    otherwise (status error, an exception event, ``error.type``, a failure flag, no end) is malformed, reason
    ``status_evidence_conflict``, naming both (docs/DECISIONS.md 255; an end before the start names the times, 505)."""
    declared = span.attributes.get(TRACEFENCE_STATUS)
    if declared is None:
        return observed_status(span)
    status = parse_declared(declared)
    if status is OK:
        found: list[str] = []
        observed = _read_record(span, found)
        if observed is not OK:
            evidence = observed.message if isinstance(observed, MalformedField) else found[0] if _no_readable_end(span) else f"{', '.join(found)}: {observed._value_}"
            return MalformedField("status", f"tracefence.status 'ok' is declared, but the span records {evidence}", reason=reasons.STATUS_EVIDENCE_CONFLICT)
    return status


@cython.ccall
def observed_status(span: SpanView) -> ToolStatus | MalformedField:
    """The status the span's own record gives (its end, status, exception events, ``error.type``, failure flags),
    whatever ``tracefence.status`` declares. An event named ``exception`` but for case, separators or white space
    (``Exception``) is not understood: the status is malformed (docs/DECISIONS.md 256)."""
    return _read_record(span, None)


NO_END = "no end: how the call ended is not recorded"  # says why itself: no status after it


@cython.ccall
def _no_readable_end(span: SpanView) -> bool:
    return span.end_time_unix_nano is None or span.end_time_unix_nano < span.start_time_unix_nano


def ends_before_start(span: SpanView) -> str:
    """Why a span whose end is before its start records no outcome, naming both times (Unix nanoseconds;
    docs/DECISIONS.md 505): its record cannot be right (a clock stepped back mid-call, or a producer's bug)."""
    return f"the span ends at {span.end_time_unix_nano} before it starts at {span.start_time_unix_nano} (Unix nanoseconds): how the call ended is not recorded"


@cython.cfunc
def _failure_flags(attributes: Any, all_named: cython.bint, raised: list) -> object:
    """Whether a failure flag a convention sets (``conventions.FAILURE_FLAG_KEYS``) is boolean ``true`` on the span: ``True``
    or ``False``, each flag set true appended to ``raised`` (all of them when ``all_named``, else the first); a
    :class:`MalformedField` for a flag that is anything but a boolean before any set true (whether the call failed cannot be known)."""
    flagged = False
    for key in FAILURE_FLAG_KEYS:  # a loop, not any(): a generator here is a coroutine object per span
        flag = attributes.get(key)
        if flag is True:
            flagged = True
            raised.append(key)  # naming them all: the first decides, the message names every one set
            if not all_named:
                break
        elif not flagged and flag is not None and flag is not False:  # "true", 1, an object: whether the call failed is not known
            return MalformedField("status", f"failure flag {key} ({described(flag)}) is not a boolean: whether the call failed cannot be known")
    return flagged


@cython.cfunc
def _name_failure_evidence(span: SpanView, excepted: cython.bint, error_type: Any, raised: list, found: list) -> cython.void:
    """Append to ``found`` what in the span's record says the call did not end ok: ``status error ('message')``, ``an exception
    event`` (``excepted``), ``error.type ('X')``, ``<failure flag> true`` for each flag in ``raised`` (docs/DECISIONS.md 255, 304)."""
    if span.status_code == STATUS_ERROR:
        found.append(f"status error{f' ({shown(span.status_message)})' if span.status_message else ''}")
    if excepted:
        found.append("an exception event")
    if error_type is not None:
        found.append(f"error.type ({shown(error_type)})")
    for key in raised:
        found.append(f"{key} true")


@cython.ccall
def _read_record(span: SpanView, found: list | None) -> ToolStatus | MalformedField:
    """:func:`observed_status`, the one reading of the span's own record; when ``found`` is a list and the record
    says the call did not end ok, what says so is appended to it, for a message: ``no end ...``, ``status error
    ('message')``, ``an exception event``, ``error.type 'X'``, ``<failure flag> true`` (docs/DECISIONS.md 255, 304)."""
    attributes = span.attributes
    if span.end_time_unix_nano is None or span.end_time_unix_nano < span.start_time_unix_nano:  # inline: every span
        if found is not None:
            found.append(NO_END if span.end_time_unix_nano is None else ends_before_start(span))
        return STATUS_UNKNOWN  # no end, or an end before the start: how the call ended is not recorded
    if span.status_undefined is not None:  # held, never read as some status (docs/DECISIONS.md 305)
        return MalformedField("status", f"status code {span.status_undefined} is not one of 0 (unset), 1 (ok), 2 (error): not understood")
    signs = []
    excepted = False
    for event in span.events:
        if event.name == EXCEPTION_EVENT:
            signs.append(str(event.attributes.get("exception.type", "")))
            excepted = True
        elif fold_key(event.name) == EXCEPTION_EVENT:
            return MalformedField("status", f"span event {event.name!r} is {EXCEPTION_EVENT!r} only after folding case, separators and white space: not understood")
    error_type = attributes.get("error.type")
    if error_type is not None:
        signs.append(str(error_type))
    raised: list[str] = []
    flagged = _failure_flags(attributes, found is not None, raised)
    if isinstance(flagged, MalformedField):  # a flag that is not a boolean
        return flagged
    if span.status_code != STATUS_ERROR and not signs and not flagged:
        if span.status_message and span.status_code == STATUS_UNSET:  # a message says something an unset code does not
            return MalformedField("status", f"status unset with a message ({shown(span.status_message)}): what the message says is not read")
        return OK
    if found is not None:
        _name_failure_evidence(span, excepted, error_type, raised, found)
    if span.status_message:
        signs.append(span.status_message)
    return classify_failure(signs)
