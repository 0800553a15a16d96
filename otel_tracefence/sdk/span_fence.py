"""The generic :class:`~otel_tracefence.pipeline.fence.Fence` fitted to SDK spans, for the processor and the exporter."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan

from otel_tracefence.pipeline import annotate
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.fence import Fence
from otel_tracefence.pipeline.review_writer import ReviewSink, open_review_sink
from otel_tracefence.normalize import SpanView, from_readable
from otel_tracefence.normalize.span_view import span_id_hex, trace_id_hex

__all__ = ["ReviewSink", "SdkFence", "copy_with", "is_local_root", "open_review_sink"]

_new_readable = object.__new__
HEX_CACHE_SIZE = 16_384  # entries of each id cache of SdkFence (a few MiB at most): past it, that cache is cleared


def _copy_readable(span: ReadableSpan, own: Mapping[str, Any] | None, extra: dict[str, Any]) -> ReadableSpan:
    """A copy of a plain ``ReadableSpan`` with ``extra`` on top of its attributes ``own``: its ``__dict__`` copied
    (one C-level copy, given to the new object as its own: cheaper than updating a fresh one), only the
    attributes replaced (:func:`annotate.merged`, inline: this runs once for every span handed on)."""
    fields = span.__dict__.copy()
    merged = {**own, **extra} if own else dict(extra)
    dropped = getattr(fields["_attributes"], "dropped", 0)
    fields["_attributes"] = _keeping_dropped(merged, dropped) if dropped else merged
    copy = _new_readable(ReadableSpan)
    copy.__dict__ = fields
    return copy


def _keeping_dropped(attributes: dict[str, Any], dropped: int) -> BoundedAttributes:
    """``attributes`` in a read-only ``BoundedAttributes`` (no limit) saying ``dropped`` attributes were dropped: the
    copy of a span a span limit cut keeps its ``dropped_attributes`` (a plain dict would report 0; DECISIONS 252)."""
    bounded = BoundedAttributes(attributes=attributes, immutable=False)
    bounded.dropped = dropped
    bounded._immutable = True
    return bounded


def copy_with(span: ReadableSpan, extra: dict[str, Any], attributes: Mapping[str, Any] | None = None) -> ReadableSpan:
    """A copy of a finished SDK span with ``extra`` attributes on top of its own
    (``attributes``: the span's own, when the caller already holds them as a mapping).

    A plain ``ReadableSpan`` (what the SDK hands ``on_end``) is copied field for field
    with only its attributes replaced; any other kind of span is rebuilt through the
    ``ReadableSpan`` constructor."""
    own = span.attributes if attributes is None else attributes
    if type(span) is ReadableSpan:
        return _copy_readable(span, own, extra)
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=annotate.merged(own, extra),
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _annotate(span: ReadableSpan, view: SpanView, extra: dict[str, Any]) -> ReadableSpan:
    if type(span) is ReadableSpan:
        return _copy_readable(span, view.attributes, extra)
    return copy_with(span, extra, view.attributes)


def _service_name(span: ReadableSpan) -> str:
    resource = span.resource
    return str(resource.attributes.get("service.name", "")) if resource is not None else ""


def is_local_root(span: ReadableSpan) -> bool:
    """A span without a parent, or whose parent is remote: the root of this process's part of the trace."""
    return span.parent is None or bool(span.parent.is_remote)


def _view_is_local_root(view: SpanView) -> bool:
    """:func:`is_local_root` of the span ``view`` was read from (``from_readable`` read its parent already)."""
    return view.parent_span_id is None or bool(view.parent_is_remote)


class SdkFence(Fence[ReadableSpan]):
    """A fence of SDK ``ReadableSpan`` objects, handing annotated copies to ``emit``."""

    def __init__(
        self,
        config: TraceFenceConfig,
        emit: Callable[[Sequence[ReadableSpan]], None],
        *,
        component: str,
        review_sink: ReviewSink | None,
        meter_provider: Any = None,
        decision_wait_ms: float | None = None,
    ) -> None:
        super().__init__(
            config,
            emit=emit,
            annotate_span=_annotate,
            service_name=_service_name,
            component=component,
            review_sink=review_sink,
            meter_provider=meter_provider,
            decision_wait_ms=decision_wait_ms,
        )
        # Ids written in hex at on_start, read again at on_end (from_readable): trace id -> hex, and span id ->
        # hex of the spans started and not ended yet. Caches of a pure function, each cleared past HEX_CACHE_SIZE.
        self._trace_hexes: dict[int, str] = {}
        self._span_hexes: dict[int, str] = {}

    def span_started(self, span: Any) -> None:
        """A span started in this process: its trace is not decided while it is open (within the decision wait)."""
        try:
            # The SDK's Span holds its SpanContext (a tuple: trace id, span id, ...) in ``_context``: read by index, not
            # through properties (each a Python-level call), hexed inline (trace_id_hex, span_id_hex): for every span.
            context = span._context if isinstance(span, ReadableSpan) else span.context
            try:
                if isinstance(context, tuple):
                    trace_int, span_int = context[0], context[1]
                    trace_id = self._trace_hexes.get(trace_int)
                    if trace_id is None:
                        trace_id = trace_int.to_bytes(16, "big").hex()
                        if len(self._trace_hexes) >= HEX_CACHE_SIZE:
                            self._trace_hexes.clear()
                        self._trace_hexes[trace_int] = trace_id
                    span_id = span_int.to_bytes(8, "big").hex()
                    if len(self._span_hexes) >= HEX_CACHE_SIZE:
                        self._span_hexes.clear()  # spans started and never ended: the cache starts again
                    self._span_hexes[span_int] = span_id
                else:
                    trace_id, span_id = trace_id_hex(context.trace_id), span_id_hex(context.span_id)
            except OverflowError:  # an id wider than its width: as format() writes it
                trace_id, span_id = trace_id_hex(context.trace_id), span_id_hex(context.span_id)
        except Exception as exc:  # noqa: BLE001
            self.telemetry.error("intake", f"could not read a started span: {exc!r}", exc)
            return
        try:
            self.buffer.started(trace_id, span_id)  # Fence.started, inline
        except Exception as exc:  # noqa: BLE001 - at worst the trace waits its whole decision wait
            self.telemetry.error("intake", f"could not note a span start: {exc!r}", exc)

    def add_span(self, span: ReadableSpan) -> None:
        """Take one finished SDK span. Never raises; on failure it is handed on unannotated."""
        try:
            view = from_readable(span, 0, self._trace_hexes, self._span_hexes)
        except Exception as exc:  # noqa: BLE001
            self.pass_through([span], "intake", exc)
            return
        self.add(view, span, local_root=view.parent_span_id is None or bool(view.parent_is_remote))  # _view_is_local_root

    def add_spans(self, spans: Sequence[ReadableSpan]) -> None:
        """Take finished SDK spans that arrived together (an exporter's batch), in order: late spans of one trace
        among them are re-planned once. Never raises; an unreadable span is handed on unannotated."""
        items = []
        for span in spans:
            try:
                view = from_readable(span)
                items.append((view, span, _view_is_local_root(view)))
            except Exception as exc:  # noqa: BLE001
                self.pass_through([span], "intake", exc)
        if items:
            self.add_batch(items)
