"""A step's status: declared by the producer, else read off the span's status and exception events.

The GenAI semantic conventions leave span status unset on success and set
``error.type`` on failure; OpenTelemetry records exceptions as ``exception``
events with ``exception.type`` (semantic conventions, "Recording errors").
"""

from __future__ import annotations

import re
from typing import Any

import cython

from otel_tracefence.model import ERROR, OK, STATUS_UNKNOWN, TIMEOUT, MalformedField, ToolStatus
from otel_tracefence.normalize.conventions import (
    CANCEL_PATTERN, FAILURE_FLAG_KEYS, TIMEOUT_PATTERN, TRACEFENCE_STATUS,
)
from otel_tracefence.normalize.span_view import STATUS_ERROR, SpanView

DECLARABLE = {"ok": OK, "error": ERROR, "timeout": TIMEOUT, "unknown": STATUS_UNKNOWN}
_TIMEOUT = re.compile(TIMEOUT_PATTERN, re.IGNORECASE)
_CANCEL = re.compile(CANCEL_PATTERN, re.IGNORECASE)


@cython.ccall
def parse_declared(value: Any) -> ToolStatus | MalformedField:
    """A declared status must be exactly ``ok``, ``error``, ``timeout`` or ``unknown``."""
    status = DECLARABLE.get(value) if isinstance(value, str) else None
    if status is None:
        return MalformedField("status", f"status {value!r} is not one of ok, error, timeout, unknown")
    return status


def classify_failure(signs: list[str]) -> ToolStatus:
    """A failed call's status from its error and exception type names: timeout, cancellation or error."""
    if any(_TIMEOUT.search(sign) for sign in signs):
        return TIMEOUT
    if any(_CANCEL.search(sign) for sign in signs):
        return STATUS_UNKNOWN
    return ERROR


def span_status(span: SpanView) -> ToolStatus | MalformedField:
    """The status of a tool span (DESIGN.md, normalized step, ``status``); a failure flag a convention
    sets on the span (``conventions.FAILURE_FLAG_KEYS``) counts as an error status."""
    attributes = span.attributes
    declared = attributes.get(TRACEFENCE_STATUS)
    if declared is not None:
        return parse_declared(declared)
    if span.end_time_unix_nano is None or span.end_time_unix_nano < span.start_time_unix_nano:
        return STATUS_UNKNOWN  # no end, or an end before the start: how the call ended is not recorded
    signs = [str(e.attributes.get("exception.type", "")) for e in span.events if e.name == "exception"]
    error_type = attributes.get("error.type")
    if error_type is not None:
        signs.append(str(error_type))
    flagged = False
    for key in FAILURE_FLAG_KEYS:  # a loop, not any(): a generator here is a coroutine object per span
        if attributes.get(key) is True:
            flagged = True
            break
    if span.status_code != STATUS_ERROR and not signs and not flagged:
        return OK
    if span.status_message:
        signs.append(span.status_message)
    return classify_failure(signs)
