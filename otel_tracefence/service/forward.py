"""Forwarding decided spans: a bounded queue per target, drained by one worker thread each.

Targets: upstream OTLP/gRPC endpoints, sent through the OpenTelemetry SDK's own
``OTLPSpanExporter`` (its TLS, headers, compression and retry on the
OTLP-retryable status codes, honouring the server's ``RetryInfo`` delay), or,
with no upstream, an OTLP/JSON lines file. A batch the exporter could not
deliver stays at the head of its queue and is tried again after a pause (0.5 s,
doubling up to 30 s; new work does not cut it short, a shutdown's drain does); past
the queue bound (in spans) the oldest batches are dropped and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Protocol

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.config import UpstreamSettings
from otel_tracefence.otlp_json import request_to_json
from otel_tracefence.service.otlp_spans import request_span_count

_log = logging.getLogger("otel_tracefence.service")
PAUSE_AFTER_FAILURE_S = (0.5, 30.0)  # first and longest pause before a failed batch is tried again
MAX_BATCH_SPANS = 1024  # queued requests are merged into one send up to this many spans...
MAX_BATCH_BYTES = 4 * 1024 * 1024 - 64 * 1024  # ...and this size: the Collector's default gRPC receive limit is 4 MiB


class Target(Protocol):
    name: str

    def send(self, request: ExportTraceServiceRequest) -> bool: ...

    def close(self) -> None: ...


class _RequestExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC span exporter, fed ready-made requests instead of SDK spans."""

    def _translate_data(self, data: ExportTraceServiceRequest) -> ExportTraceServiceRequest:  # type: ignore[override]
        return data

    def _count_data(self, data: ExportTraceServiceRequest) -> int:  # type: ignore[override]
        return request_span_count(data)


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


class UpstreamTarget:
    """An upstream OTLP/gRPC endpoint (a Collector, Jaeger, Tempo, another tracefence)."""

    def __init__(self, settings: UpstreamSettings, max_message_bytes: int) -> None:
        self.name = settings.endpoint
        credentials = None
        if settings.certificate_file or settings.client_certificate_file:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(settings.certificate_file),
                private_key=_read(settings.client_key_file),
                certificate_chain=_read(settings.client_certificate_file),
            )
        self._exporter = _RequestExporter(
            endpoint=settings.endpoint,
            insecure=settings.insecure,
            credentials=credentials,
            headers=dict(settings.headers) or None,
            timeout=settings.timeout_s,
            compression=grpc.Compression.Gzip if settings.compression == "gzip" else grpc.Compression.NoCompression,
            channel_options=(("grpc.max_send_message_length", max_message_bytes),),
        )

    def send(self, request: ExportTraceServiceRequest) -> bool:
        return self._exporter.export(request) is SpanExportResult.SUCCESS  # type: ignore[arg-type]

    def close(self) -> None:
        self._exporter.shutdown(timeout_millis=1000)


class FileTarget:
    """OTLP/JSON lines appended to a file: the embedded default when no upstream is configured."""

    def __init__(self, path: str) -> None:
        self.name = f"file:{path}"
        self._stream = open(path, "a", encoding="utf-8")

    def send(self, request: ExportTraceServiceRequest) -> bool:
        self._stream.write(request_to_json(request) + "\n")
        self._stream.flush()
        return True

    def close(self) -> None:
        self._stream.close()


class Forwarder:
    """A bounded queue of requests for one target, drained by a worker thread.

    ``put`` never blocks. A request put behind one that is not being sent yet
    is merged into it (up to ``MAX_BATCH_SPANS`` spans, a sixteenth of the
    bound, and ``MAX_BATCH_BYTES``),
    so a trace-at-a-time producer still makes few, large upstream calls.
    ``depth`` is the number of spans waiting. Counters are attributes
    (``sent_spans``, ``dropped_spans``, ``failures``) and are also reported
    through the service's telemetry.
    """

    def __init__(self, target: Target, max_spans: int, on_drop=None, on_failure=None) -> None:
        self.target = target
        self.max_spans = max_spans
        self._queue: deque[tuple[ExportTraceServiceRequest, int]] = deque()
        self._merged_tail: ExportTraceServiceRequest | None = None  # the tail, when it is our own merged copy
        # Batches stay small beside the bound, so dropping past it stays fine-grained.
        self._batch_spans = min(MAX_BATCH_SPANS, max_spans // 16)
        self.depth = 0
        self.sent_spans = 0
        self.dropped_spans = 0
        self.failures = 0
        self._on_drop = on_drop or (lambda n: None)
        self._on_failure = on_failure or (lambda: None)
        self._cond = threading.Condition()
        self._closing = False
        self._draining = False  # drain() is waiting: a pause after a failure ends at once
        self._busy = False
        self._sending: ExportTraceServiceRequest | None = None  # the request the worker is sending
        self._sending_dropped = False  # it left the queue (past the bound) while being sent
        self._thread = threading.Thread(target=self._run, name=f"tracefence-forward-{target.name}", daemon=True)
        self._thread.start()

    def put(self, request: ExportTraceServiceRequest, spans: int) -> None:
        """Queue ``request`` (``spans`` spans; shared with other forwarders, never changed here)."""
        with self._cond:
            if not self._merge_into_tail(request, spans):
                self._queue.append((request, spans))
            self.depth += spans
            while self.depth > self.max_spans and len(self._queue) > 1:
                oldest, dropped = self._queue.popleft()
                self.depth -= dropped
                if self._busy and oldest is self._sending:
                    # Being sent right now: counted as dropped only if that attempt fails.
                    self._sending_dropped = True
                    continue
                self._count_drop(dropped)
            self._cond.notify()

    def _merge_into_tail(self, request: ExportTraceServiceRequest, spans: int) -> bool:
        # Caller holds the lock. The head may be on the wire: only a tail that is not is merged into.
        if not self._queue:
            return False
        tail, tail_spans = self._queue[-1]
        if tail_spans + spans > self._batch_spans or (self._busy and tail is self._sending):
            return False
        if tail.ByteSize() + request.ByteSize() > MAX_BATCH_BYTES:
            return False
        if tail is not self._merged_tail:  # a request shared with other forwarders: copy before merging
            merged = ExportTraceServiceRequest()
            merged.MergeFrom(tail)
            tail = self._merged_tail = merged
        tail.MergeFrom(request)
        self._queue[-1] = (tail, tail_spans + spans)
        return True

    def _count_drop(self, spans: int) -> None:
        # Caller holds the lock.
        self.dropped_spans += spans
        self._on_drop(spans)
        _log.warning("forward queue for %s full: dropped %d spans (%d dropped so far)", self.target.name, spans, self.dropped_spans)

    def _run(self) -> None:
        pause = PAUSE_AFTER_FAILURE_S[0]
        failed_in_a_row = 0
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                request, spans = self._queue[0]
                self._busy = True
                self._sending, self._sending_dropped = request, False
            try:
                ok = self.target.send(request)
            except Exception as exc:  # noqa: BLE001 - a target fault must not kill the worker
                _log.error("forwarding to %s failed: %r", self.target.name, exc)
                ok = False
            with self._cond:
                self._busy = False
                left_queue, self._sending = self._sending_dropped, None
                if left_queue and not ok:  # dropped past the bound while this attempt ran, and it failed
                    self._count_drop(spans)
                if ok:
                    if not left_queue:
                        self._queue.popleft()
                        self.depth -= spans
                    self.sent_spans += spans
                    if failed_in_a_row:
                        _log.warning(
                            "forwarding to %s works again after %d failed attempt(s); %d spans still queued", self.target.name, failed_in_a_row, self.depth
                        )
                        failed_in_a_row = 0
                    pause = PAUSE_AFTER_FAILURE_S[0]
                    self._cond.notify_all()
                    continue
                self.failures += 1
                failed_in_a_row += 1
                self._on_failure()
                if self._closing:
                    self._cond.notify_all()
                    return
                # The exporter logs its own error; this says that nothing is lost yet, and what is held.
                _log.warning(
                    "forwarding %d spans to %s failed (%d in a row); they stay queued (%d/%d spans) and are tried again in %.1fs",
                    spans, self.target.name, failed_in_a_row, self.depth, self.max_spans, pause,
                )
                pause = PAUSE_AFTER_FAILURE_S[0] if self._pause(pause) else min(pause * 2, PAUSE_AFTER_FAILURE_S[1])

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` after a failed attempt (caller holds the lock). New work does not cut the pause
        short, or a busy producer would retry a refusing upstream on every batch; a drain starting does,
        so a shutdown tries at once rather than sleeping through its deadline. True when cut short so."""
        until = time.monotonic() + seconds
        draining = self._draining
        while not self._closing and self._draining == draining:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.wait(timeout=remaining)
        return True

    def drain(self, timeout_s: float) -> bool:
        """Stop taking work once the queue is empty or ``timeout_s`` has passed; True when everything was sent."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._draining = True
            self._cond.notify_all()
            while (self._queue or self._busy) and time.monotonic() < deadline:
                self._cond.wait(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=max(0.1, deadline - time.monotonic()) + 1)
        with self._cond:  # after the join: an attempt under way at the deadline may have delivered
            drained = not self._queue
            left = self.depth
        if not drained:
            _log.error("shutdown: %d spans still queued for %s were not forwarded", left, self.target.name)
        try:
            self.target.close()
        except Exception as exc:  # noqa: BLE001
            _log.error("closing %s failed: %r", self.target.name, exc)
        return drained
