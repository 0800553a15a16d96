"""The ``review`` steps that stand for what no convention reads: tool activity of no known convention, a span
that dropped data, requested calls that could not be read (docs/DECISIONS.md 188, 250, 252, 358)."""

from __future__ import annotations

from typing import Sequence

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import STATUS_UNKNOWN, MalformedField, ToolStatus, ToolStep
from otel_tracefence.normalize.activity import asked_for_tools, tool_activity_sign
from otel_tracefence.normalize.config_reading import ConfigReading
from otel_tracefence.normalize.span_kinds import tool_name
from otel_tracefence.normalize.effect import resolve_effect
from otel_tracefence.normalize.requested import recorded_output
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.status import span_status
from otel_tracefence.normalize.step import dropped_data


def unrecognized_step(
    span: SpanView, sign: str, config: TraceFenceConfig | ConfigReading, reason: str = reasons.UNRECOGNIZED_TOOL_SPAN
) -> ToolStep:
    """The ``review`` step standing for tool activity no convention reads (``activity.py``), or, with
    ``reason`` ``requested_call_unread``, for requested calls that could not be read; ``span_data_dropped`` and
    ``late_request_untied`` take ``sign`` as the whole message."""
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


def unread_requests(span: SpanView, lost: Sequence[str], read_any: bool) -> str | None:
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


def dropped_step(span: SpanView, config: TraceFenceConfig | ConfigReading) -> ToolStep | None:
    """The ``review`` step (``span_data_dropped``) standing for a span that is no step and says it dropped attributes
    or events, wherever it is in its trace and whenever it comes: what it lost may be what made it a tool span
    (docs/DECISIONS.md 252, 358); ``None`` for a span that dropped nothing."""
    dropped = dropped_data(span) if span.dropped_attributes or span.dropped_events or span.events else None
    if dropped is None:
        return None
    return unrecognized_step(span, dropped.message, config, reasons.SPAN_DATA_DROPPED)


def unread_activity_step(span: SpanView, config: TraceFenceConfig | ConfigReading) -> ToolStep | None:
    """For a span seen alone (one that arrived after its trace was decided): the ``review`` step
    standing for it when it dropped attributes or events (:func:`dropped_step`, as in its trace), or looks like
    tool activity no convention reads (``activity.py``)."""
    held = dropped_step(span, config)
    if held is not None:
        return held
    sign = tool_activity_sign(span)
    return unrecognized_step(span, sign, config) if sign is not None else None
