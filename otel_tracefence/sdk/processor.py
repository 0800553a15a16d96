"""``TraceFenceSpanProcessor``: the drop-in span processor for an agent's own ``TracerProvider``."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_tracefence.core.config import ConfigError, TraceFenceConfig, load_config
from otel_tracefence.sdk.bounded import run_until
from otel_tracefence.sdk.wiring import check_config, check_downstream, check_settings, config_or_defaults, does_nothing
from otel_tracefence.sdk.review_sink import open_review_sink_or_hold
from otel_tracefence.sdk.span_fence import ReviewSink, SdkFence
from otel_tracefence.core.telemetry import guarded

_DEFAULT = object()
_log = logging.getLogger("otel_tracefence")
SHUTDOWN_TIMEOUT_MS = 30_000  # shutdown()'s bound when none is given (the SDK's own default for force_flush)


class TraceFenceSpanProcessor(SpanProcessor):
    """A ``SpanProcessor`` (OpenTelemetry trace SDK specification) that plans each trace before handing it on.

    It wraps the processors you already have, typically a ``BatchSpanProcessor`` of the SDK's OTLP exporter for
    the protocol the standard variables name (:func:`~otel_tracefence.sdk.otlp_exporter.otlp_span_exporter`), and
    is itself one more processor::

        provider.add_span_processor(TraceFenceSpanProcessor(BatchSpanProcessor(otlp_span_exporter())))

    It holds a trace's finished spans until the trace is complete in this
    process, plans the trace, and hands annotated copies (``tracefence.*``
    attributes) to every downstream processor's ``on_end``; a trace with no tool
    step is handed on unchanged. Traces whose class is in ``review_classes`` are
    written to the review queue. ``on_start`` is forwarded at once.

    *Complete* means: the trace's local root span (no parent, or a remote parent)
    has ended, and so has every span of the trace that started in this process.
    Streaming agents and background tasks end the root before their tool spans;
    the trace then waits for those, at most ``decision_wait_ms`` after the root
    ends (default 60000: the MCP TypeScript SDK's default request timeout,
    after which a framework's tool call has usually given up and its span
    ended). Most traces end their root last and wait nothing. Spans handed in
    without ``on_start`` (not from this provider) make the trace wait the whole
    ``decision_wait_ms``. ``decision_wait_ms=0`` decides at the root's end.

    A tool span that ends after its trace was decided (the wait ran out, a bound
    was hit, ``force_flush``) fails closed: it carries class ``review`` and its
    step decision ``review`` with reason ``decided_before_complete``, the trace's
    review item is written or updated, and no late span ever carries a class less
    restrictive than one already handed on for its trace. Other late spans carry
    the trace's class; all are flagged ``tracefence.trace.late``.

    Settings come from ``config`` (or :func:`~otel_tracefence.core.config.load_config`:
    arguments, then ``OTEL_TRACEFENCE_*`` variables, then the YAML file in
    ``OTEL_TRACEFENCE_CONFIG``). Defaults: ``review_db`` ``tracefence-review.db``
    (``OTEL_TRACEFENCE_REVIEW_DB``; empty disables), ``review_classes`` ``review``
    (``OTEL_TRACEFENCE_REVIEW_CLASSES``), ``decision_wait_ms`` 60000
    (``OTEL_TRACEFENCE_DECISION_WAIT_MS``), ``max_traces`` 10000, ``max_spans_per_trace``
    1000 (``OTEL_TRACEFENCE_MAX_TRACES``, ``OTEL_TRACEFENCE_MAX_SPANS_PER_TRACE``).
    Memory is bounded by these: past a bound the oldest trace is planned as it
    stands and flagged ``tracefence.trace.partial``; open spans are tracked for at
    most ``max_traces`` traces of ``max_spans_per_trace`` spans.

    Safe across threads and asyncio tasks. It never raises into the agent: an
    internal failure is logged, counted (``tracefence.errors``) and the spans
    are still handed on, unannotated.
    """

    def __init__(
        self,
        *downstream: SpanProcessor,
        config: TraceFenceConfig | None = None,
        review_sink: ReviewSink | None | Any = _DEFAULT,
        meter_provider: Any = None,
        **settings: Any,
    ) -> None:
        """``downstream``: the processors to hand spans on to. ``review_sink``: defaults to the store
        ``config.review_db`` names (a SQLite file, or a ``postgresql://`` URL shared with other processes);
        pass ``None`` for none. A store that cannot be opened never stops the agent: it is logged once, and review
        items are held in memory until it opens (:mod:`otel_tracefence.sdk.review_sink`). ``settings``: any
        :class:`~otel_tracefence.core.config.TraceFenceConfig` field, overriding the environment.
        Raises :class:`TypeError` for a downstream that is not a span processor (an exporter must be
        wrapped in ``BatchSpanProcessor`` or ``SimpleSpanProcessor``) and for a keyword that is no
        setting; :class:`~otel_tracefence.core.config.ConfigError` for a bad value among ``settings``. A bad value in
        the environment (``OTEL_TRACEFENCE_*``) or the config file never raises: that setting takes its default,
        logged (:func:`~otel_tracefence.sdk.wiring.config_or_defaults`, DECISIONS 695)."""
        check_downstream(downstream, type(self).__name__)
        check_settings(settings, type(self).__name__)
        check_config(config, type(self).__name__)
        self.config = config if config is not None else _config(settings)
        self._downstream = tuple(downstream)
        # on_start is forwarded to the processors whose on_start does something (Batch's and Simple's do nothing):
        # a call fewer for every span the agent starts.
        self._starts = tuple(p for p in self._downstream if not does_nothing(getattr(p, "on_start", None)))
        sink = open_review_sink_or_hold(self.config, "processor") if review_sink is _DEFAULT else review_sink
        self._fence = SdkFence(self.config, self._emit, component="processor", review_sink=sink, meter_provider=meter_provider)
        self._bounded_lock = threading.Lock()
        self._bounded_thread: threading.Thread | None = None  # the flush or shutdown under way

    def _emit(self, spans: Sequence[ReadableSpan]) -> None:
        for processor in self._downstream:
            on_end = processor.on_end
            for span in spans:  # per span, inline: this runs for every span the agent ends
                try:
                    on_end(span)
                except Exception as exc:  # noqa: BLE001 - one processor's fault never stops the others
                    self._fence.telemetry.error("downstream", f"on_end failed: {exc!r}", exc)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._fence.span_started(span)
        for processor in self._starts:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception as exc:  # noqa: BLE001
                self._fence.telemetry.error("downstream", f"on_start failed: {exc!r}", exc)

    def on_end(self, span: ReadableSpan) -> None:
        self._fence.add_span(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Plan and hand on everything held (flagged partial where the root has not ended), try the review items
        whose write failed once more, then flush downstream, all within ``timeout_millis`` (milliseconds).

        Returns True when all of it was done in time: every held trace handed on, no review item left
        unwritten (a locked, read-only or full review database), and every downstream flush True. A write still
        waiting on the database at the deadline goes on in the background (its trace's spans follow it), and the
        call returns False at the deadline."""
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        ok = self._bounded("flush", self._fence.flush, deadline) and not self._fence.pending_reviews()
        for processor in self._downstream:
            left_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
            try:
                ok = processor.force_flush(left_ms) and ok
            except Exception as exc:  # noqa: BLE001
                self._fence.telemetry.error("downstream", f"force_flush failed: {exc!r}", exc)
                ok = False
        return ok

    def shutdown(self, timeout_millis: int = SHUTDOWN_TIMEOUT_MS) -> None:
        """Plan and hand on everything held, then shut the downstream processors and the review sink down,
        within ``timeout_millis`` (milliseconds; the SDK's ``TracerProvider.shutdown`` passes none: 30 s).

        What is not done by then (a review write waiting on a locked database, say) is logged and counted
        (``tracefence.errors``, ``error.type=shutdown_timeout``), and the downstream processors are shut down
        all the same, each within what is left of the timeout: the call returns within ``timeout_millis`` and
        ``bounded.MARGIN_S`` more whatever they do (a hanging exporter); one still running then goes on in the
        background, counted (``error.type=shutdown_timeout``)."""
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        self._bounded("shutdown", self._fence.shutdown, deadline)
        for processor in self._downstream:
            action = lambda p=processor: guarded(self._fence.telemetry, "downstream", p.shutdown)  # noqa: E731
            if not run_until(action, deadline, "tracefence-downstream-shutdown"):
                self._fence.telemetry.error(
                    "shutdown_timeout", f"downstream {type(processor).__name__}.shutdown() did not finish within the shutdown's timeout; it goes on in the background"
                )

    def _bounded(self, kind: str, action: Callable[[], None], deadline: float) -> bool:
        """Run ``action`` on a thread of its own until ``deadline`` (monotonic seconds); True when it ended in time.
        One at a time: a call still running from an earlier flush is waited for first, within the same deadline."""
        with self._bounded_lock:
            previous = self._bounded_thread
        if previous is not None and previous.is_alive():
            previous.join(timeout=max(0.0, deadline - time.monotonic()))
            if previous.is_alive():
                self._fence.telemetry.error(f"{kind}_timeout", f"{kind}: an earlier flush is still waiting (on the review database?); gave up at the deadline")
                return False
        thread = threading.Thread(target=guarded, args=(self._fence.telemetry, kind, action), name=f"tracefence-processor-{kind}", daemon=True)
        with self._bounded_lock:
            self._bounded_thread = thread
        thread.start()
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            self._fence.telemetry.error(
                f"{kind}_timeout",
                f"{kind} did not finish within its timeout (a review write waiting on the database?); it goes on in the background, "
                f"{self._fence.pending_reviews()} review item(s) not written yet",
            )
            return False
        return True


def _config(settings: dict[str, Any]) -> TraceFenceConfig:
    """The processor's configuration: a bad keyword argument raises (the caller's code is wrong, as a misspelt one
    does), a bad variable or config file falls back to the defaults of what it gets wrong, logged."""
    try:
        return load_config(**settings)
    except ConfigError as exc:
        if any(field in settings for field in exc.fields):
            raise
        return config_or_defaults(settings)
