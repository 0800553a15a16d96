"""``tracefence serve --workers N`` (N > 1): the router process, which spreads traces over N worker processes.

One Python process uses one core (the GIL). ``SO_REUSEPORT`` would spread connections, not traces, and a trace
must be decided whole by one process, so the router owns every public listener (OTLP/gRPC, OTLP/HTTP, the
review API and page, health) and sends each span to worker ``sharding.worker_of(trace_id, N)``:

* **Checks are the single process's.** Export calls go through the same
  :class:`~otel_tracefence.service.export.TraceExport` (token, TLS, sizes, decoding, span ids, partial
  success); only the queue behind it differs (:class:`RouterIntake`).
* **Splitting** (:func:`~otel_tracefence.service.sharding.split_request`): a request whose spans all go to one
  worker is handed on as it was decoded; others are regrouped per worker, each span keeping its resource and
  scope. Spans refused for their ids go to their trace's worker as they came, which refuses them the same way
  and plans the same ``review`` stand-in (decision 30) as a single process would.
* **Acknowledgement and back-pressure.** The call is acknowledged once every part is in its worker's queue, and
  once each part has had its first attempt at its worker (waiting at most ``HANDOFF_WAIT_S``): a client is paced
  by the workers, as one process paces its clients, instead of the router taking spans faster than they can be
  decided. Each queue is a small hand-off, not a second intake: at most ``HANDOFF_SPANS`` spans and
  ``HANDOFF_BYTES`` bytes (or ``intake_queue_spans / N`` and ``intake_queue_bytes / N`` when smaller; an empty
  queue takes one request past that, so whatever one process accepts the router accepts too). A worker that
  refuses (its own intake or forward queue full) fills its hand-off within a few calls, and the router then
  refuses clients: the worker's back-pressure reaches them. Room for every part is checked before any is
  queued: a request that does not fit is refused whole with ``UNAVAILABLE`` and a retry delay. Nothing is partly
  accepted.
* **Sending** reuses the forwarder (:class:`~otel_tracefence.service.forward.Forwarder` over an
  :class:`~otel_tracefence.service.forward.UpstreamTarget`, the SDK's OTLP exporter): a part stays at the head
  of its queue until the worker acknowledges it, retried as an upstream would be; a worker that died is
  restarted (:mod:`~otel_tracefence.service.workers`) and gets what was not acknowledged.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Sequence

from grpc_health.v1 import health
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from otel_tracefence.core.config import TraceFenceConfig, UpstreamSettings
from otel_tracefence.normalize import SpanView
from otel_tracefence.service.export import TraceExport
from otel_tracefence.service.forward import Forwarder
from otel_tracefence.service.targets import Outcome, Request, encode
from otel_tracefence.service.upstream_grpc import UpstreamTarget
from otel_tracefence.service.otlp_bytes import LazyRequest, SpanHead, lazy_spans
from otel_tracefence.service.intake import Intake, IntakeRefusal, Reservation
from otel_tracefence.service.otlp_spans import Orphan, OtlpItem, carrying_fault, invalid_reason, orphan_span, request_span_count
from otel_tracefence.service.operations_http import Operations
from otel_tracefence.service.self_metrics import ServiceMetrics, meter_provider as own_meter_provider
from otel_tracefence.service.serve_settings import check_review_exposure, serves_prometheus
from otel_tracefence.service.server import TraceFenceService
from otel_tracefence.service.shutdown import STOP_OVERRUN_S
from otel_tracefence.service.sharding import split_items, split_request, worker_of
from otel_tracefence.service.workers import EXIT_S, WorkerPool, sum_stop_summaries, worker_socket, write_stop_deadline
from otel_tracefence.core.telemetry import instrument
from otel_tracefence.ui.security import check_ui_exposure

_log = logging.getLogger("otel_tracefence.service")
WORKER_TIMEOUT_S = 10.0  # one send to a worker, retries included (the SDK exporter's default timeout)
HANDOFF_SPANS = 8192  # a worker's hand-off queue in the router: one full send (forward.MAX_BATCH_SPANS)...
HANDOFF_BYTES = 4 * 1024 * 1024  # ...and this many request bytes (forward.MAX_BATCH_BYTES)
HANDOFF_WAIT_S = 1.0  # longest an Export waits for its parts' first attempt at their workers (well under clients' timeouts)


class WorkerTarget:
    """A worker's internal socket as a forward target: the SDK's OTLP/gRPC exporter (plaintext: the socket is in a
    folder only the router's user can open). ``on_done(size)`` is told the encoded size of every part the worker
    took or refused for good, so the router's byte bound goes down as parts leave."""

    def __init__(self, index: int, socket_path: str, max_message_bytes: int, on_done) -> None:
        self.index = index
        self._upstream = UpstreamTarget(
            # Not validated: the endpoint rule is for host:port addresses; gRPC and the SDK exporter take unix: ones.
            UpstreamSettings.model_construct(endpoint=f"unix:{socket_path}", insecure=True, timeout_s=WORKER_TIMEOUT_S, max_message_bytes=max_message_bytes)
        )
        self.name = f"worker-{index}"
        self.max_message_bytes = self._upstream.max_message_bytes
        self._on_done = on_done

    def send(self, request: Request) -> Outcome:
        data = encode(request)
        outcome = self._upstream.send(data)
        if outcome.kind in ("sent", "rejected"):
            self._on_done(len(data))
        if outcome.rejected_spans:
            # Spans refused for their ids were refused (and stood in) by the router too: only the others count.
            expected = sum(1 for span in lazy_spans(LazyRequest.FromString(data)) if invalid_reason(SpanHead.FromString(span)) is not None)
            unexpected = max(0, outcome.rejected_spans - expected)
            if not unexpected:
                return Outcome("sent")
            return Outcome("sent", outcome.reason, rejected_spans=unexpected)
        return outcome

    def close(self) -> None:
        self._upstream.close()


class RouterIntake:
    """What :class:`~otel_tracefence.service.export.TraceExport` needs of an intake, over the per-worker queues.

    ``reserve`` checks a request against the whole bounds only (``TOO_LARGE`` past them, as one process does);
    ``put`` splits it, checks room for every part in its worker's hand-off queue and queues them all, or raises
    :class:`~otel_tracefence.service.intake.IntakeRefusal` (not permanent) with nothing queued; then it waits up to
    ``wait_s`` for every part's first attempt at its worker (the pacing in the module's docstring).
    """

    def __init__(self, forwarders: list[Forwarder], max_spans: int, max_bytes: int, wait_s: float = HANDOFF_WAIT_S) -> None:
        self.forwarders = forwarders
        self.workers = len(forwarders)
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.share_spans = min(HANDOFF_SPANS, math.ceil(max_spans / self.workers))
        self.share_bytes = min(HANDOFF_BYTES, math.ceil(max_bytes / self.workers))
        self.wait_s = wait_s
        self.depth_bytes = [0] * self.workers  # encoded bytes queued per worker
        self._lock = threading.Lock()
        self.current = threading.local()  # .request: the protobuf request being accepted on this thread, if any

    check_size = Intake.check_size  # the same permanent refusals, worded the same

    def reserve(self, spans: int, size: int) -> Reservation:
        self.check_size(spans=spans, size=size)
        return Reservation(spans, size)

    def release(self, reservation: Reservation) -> None:
        """Nothing is held by a reservation here: room is taken in :meth:`put`, all at once."""

    def put(self, items: list[OtlpItem], reservation: Reservation | None = None, source: str = "", *, orphans: Sequence[Orphan] = (), **_: Any) -> None:
        """Queue the request's spans at their workers (see the class), and each of ``orphans`` (spans refused for their
        trace id whose parent is not in the request) at every worker: the router cannot know which worker holds the
        parent, so each looks it up as one process does, and one that does not hold it stands it in no trace
        (:func:`~otel_tracefence.service.otlp_spans.orphan_span`, docs/DECISIONS.md 389)."""
        request = getattr(self.current, "request", None)
        parts = split_request(request, self.workers, _read_trace_ids(request, items))[0] if request is not None else split_items(items, self.workers)
        sized = [(w, part, spans, part.ByteSize()) for w, entry in enumerate(parts) if entry is not None for part, spans in [entry]]
        if orphans:  # never in a part: split_request sends a span with no readable trace id only where its parent is
            sized += [(w, copy, len(orphans), copy.ByteSize()) for w in range(self.workers) for copy in [_orphans_request(orphans)]]
        with self._lock:
            for w, _part, spans, size in sized:
                forwarder = self.forwarders[w]
                if forwarder.depth == 0:  # nothing queued or under way: whatever was counted has left
                    self.depth_bytes[w] = 0
                    continue  # an empty queue takes one request past its share
                if forwarder.depth + spans > self.share_spans or self.depth_bytes[w] + size > self.share_bytes:
                    raise IntakeRefusal(
                        f"the queue for worker {w} holds {forwarder.depth}/{self.share_spans} spans, {self.depth_bytes[w]}/{self.share_bytes} "
                        f"bytes; a part of {spans} spans and {size} bytes does not fit; retry later",
                        permanent=False,
                    )
            for w, part, spans, size in sized:
                self.depth_bytes[w] += size
                self._ticket(w, self.forwarders[w].put(part, spans))

    def _ticket(self, worker: int, ticket: int) -> None:
        tickets = getattr(self.current, "tickets", None)
        if tickets is not None:
            tickets[worker] = ticket

    def pace(self, tickets: dict[int, int]) -> None:
        """Wait up to ``wait_s`` until the parts an Export queued (``tickets``: worker -> ticket) have had their first
        attempt at their workers. They are acknowledged already: this only paces the client by its workers."""
        until = time.monotonic() + self.wait_s
        for worker, ticket in tickets.items():
            self.forwarders[worker].wait_attempted(ticket, max(0.0, until - time.monotonic()))

    def stand_in(self, view: SpanView) -> None:
        """A span refused for its ids, standing in its trace (decision 30). A protobuf request's refused spans went
        to their worker as they came (it stands them in itself); an OTLP/JSON span the router could not read is
        sent as a span the worker refuses for its parent id, carrying the trace id, span id, name and start time."""
        if getattr(self.current, "request", None) is not None:
            return
        trace_id = bytes.fromhex(view.trace_id)
        try:
            span_id = bytes.fromhex(view.span_id)
        except ValueError:
            span_id = b""
        request = ExportTraceServiceRequest()
        span = request.resource_spans.add().scope_spans.add().spans.add()
        span.trace_id, span.name, span.start_time_unix_nano = trace_id, view.name, view.start_time_unix_nano or 0
        span.span_id = span_id if len(span_id) == 8 else b""
        # Never valid: the worker refuses it and plans the stand-in, with the fault this span was refused for (306).
        span.parent_span_id = carrying_fault(*view.unreadable, view.parent_span_id) if view.unreadable else b"\x00"
        w = worker_of(trace_id, self.workers)
        with self._lock:
            self.depth_bytes[w] += request.ByteSize()
            self._ticket(w, self.forwarders[w].put(request, 1))

    @property
    def depth(self) -> int:
        return sum(f.depth for f in self.forwarders)


def _orphans_request(orphans: Sequence[Orphan]) -> ExportTraceServiceRequest:
    """One request of :func:`~otel_tracefence.service.otlp_spans.orphan_span` spans, one per orphan."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for o in orphans:
        spans.append(orphan_span(o))
    return request


def _read_trace_ids(request: Any, items: list[OtlpItem]) -> list[bytes] | None:
    """The trace ids of every span of ``request`` in order, as ``read_request`` read them into ``items`` (their
    ``ids``), when it accepted every span; else ``None`` (``split_request`` then reads each span's head)."""
    if len(items) != request_span_count(request):
        return None
    ids = [item.ids for item in items]
    return None if None in ids else [one[0] for one in ids]


class RouterExport(TraceExport):
    """:class:`~otel_tracefence.service.export.TraceExport` whose protobuf path lets the router's intake see the
    decoded request whole (to hand it on unsplit, refused spans included), and which answers a call once its parts
    (stand-ins included) have had their first attempt at their workers (:meth:`RouterIntake.pace`)."""

    def accept(self, request: Any, size: int, unparsed: Any = (), source: str = "") -> ExportTraceServiceResponse:
        intake: RouterIntake = self._intake  # type: ignore[assignment]
        tickets: dict[int, int] = {}
        intake.current.tickets = tickets
        try:
            response = super().accept(request, size, unparsed, source)
        finally:
            intake.current.tickets = None
        intake.pace(tickets)
        return response

    def export_protobuf(self, data: bytes, source: str = "") -> ExportTraceServiceResponse:
        self.admit()
        request, undecodable = self.decode_protobuf(data)
        current = self._intake.current  # type: ignore[attr-defined]
        # Spans taken out as undecodable are not in `request`: the router then splits the items and sends their
        # stand-ins itself, as for OTLP/JSON.
        current.request = None if undecodable else request
        try:
            return self.accept(request, len(data), unparsed=undecodable, source=source)
        finally:
            current.request = None


class RouterService(TraceFenceService):
    """The router of ``tracefence serve --workers N``: the public listeners of :class:`TraceFenceService`, with the
    per-worker queues and the worker processes in place of the fence (see the module's docstring).

    ``start()`` starts the workers, waits until each answers health checks, then binds; ``stop()`` stops the
    whole group by one deadline (``drain_timeout_s`` from the SIGTERM): it stops accepting, hands what its queues
    hold to the workers (which keep deciding and forwarding meanwhile), then SIGTERMs the workers, whose own drain
    gets all the time left (what they hold is decided, forwarded, written), and waits for them.
    """

    def __init__(self, config: TraceFenceConfig, *, meter_provider: Any = None, log_format: str = "json") -> None:
        self._review_warning = check_review_exposure(config)
        self._ui_warning = check_ui_exposure(config.service.ui_endpoint, config) if config.service.ui_endpoint else None
        self.config = config
        self.worker = None
        self._owned_meter_provider = prometheus = None
        if meter_provider is None:
            meter_provider, prometheus = own_meter_provider(config, prometheus=serves_prometheus(config))
            self._owned_meter_provider = meter_provider
        self.self_metrics = ServiceMetrics(meter_provider, "router", target_key="tracefence.worker")
        self.store = None
        if config.review_db:  # the router serves the review API and page; the workers write the items
            from otel_tracefence.review.open import open_review_store

            self.store = open_review_store(config.review_db, store_raw_values=config.store_raw_values)
        self.persistent = None  # each worker keeps its own (workers.worker_config)
        self.log_format = log_format
        self.folder = tempfile.mkdtemp(prefix="tracefence-workers-")  # mode 0700: the sockets and the config
        try:
            self._build(config, prometheus)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def _build(self, config: TraceFenceConfig, prometheus: Any = None) -> None:
        settings = config.service
        count = settings.worker_processes
        own = self.self_metrics  # its forward queues are the workers' hand-offs; the workers' own drops are theirs
        restarts = instrument(own.meter, "tracefence.worker.restarts")
        config_path = os.path.join(self.folder, "config.json")
        with open(os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
            out.write(config.model_dump_json())
        level = logging.getLevelName(logging.getLogger().level)

        def command(index: int) -> list[str]:
            return [
                sys.executable, "-m", "otel_tracefence", "--log-level", level if isinstance(level, str) else "INFO", "serve",
                "--log-format", self.log_format, "--worker-index", str(index), "--worker-of", config_path, "--worker-parent", str(os.getpid()),
            ]  # fmt: skip

        self.pool = WorkerPool(count, command, self.folder, on_restart=lambda i: restarts.add(1, own.target_attributes(i)))
        self.forwarders: list[Forwarder] = []
        for index in range(count):
            target = WorkerTarget(index, worker_socket(self.folder, index), settings.max_message_bytes, on_done=lambda size, i=index: self._sent(i, size))
            self.forwarders.append(
                Forwarder(
                    target,
                    settings.intake_queue_spans,  # never reached: RouterIntake keeps each queue within its share
                    on_drop=own.on_drop(index, index),
                    on_failure=own.on_failure(index),
                    batch_wait_s=0.0,  # whatever queues while a part is being sent goes in the next send
                )
            )
        self.intake = RouterIntake(self.forwarders, settings.intake_queue_spans, settings.intake_queue_bytes)  # type: ignore[assignment]
        own.watch_forwarders(self.forwarders, list(range(count)), "tracefence.worker.queue.size")
        self._accepting = True
        self.health = health.HealthServicer()
        self._servers = []
        self.port = self.review_port = self.http_port = self.ui_port = 0
        self._http_server = None
        self._http_guard = None
        self._ui_server = None
        self._stopped = threading.Event()
        self.operations = Operations(config, self.store, lambda: self._accepting, prometheus, {"workers": self.pool.check_alive})

    def _sent(self, index: int, size: int) -> None:
        with self.intake._lock:  # type: ignore[attr-defined]
            self.intake.depth_bytes[index] = max(0, self.intake.depth_bytes[index] - size)  # type: ignore[attr-defined]

    def _refuse(self) -> str | None:
        if not self._accepting:
            return "tracefence is shutting down; retry against another replica or later"
        share = self.intake.share_spans  # type: ignore[attr-defined]
        if all(f.depth >= share for f in self.forwarders):  # no part of any request fits: refused before decoding
            return f"the queues for every worker are full ({share} spans each); retry later"
        return None

    def _export(self, transport: str) -> TraceExport:
        attrs = {**self.self_metrics.attributes, "transport": transport}
        return RouterExport(
            self.intake,  # type: ignore[arg-type]
            self._refuse,
            self.config.service.retry_delay_s,
            on_rejected=lambda n: self.self_metrics.rejected.add(n, attrs),
            on_refused_too_large=lambda: self.self_metrics.refused.add(1, {**attrs, "reason": "too_large"}),
        )

    def start(self) -> None:
        """Start the workers (each ready), then bind and serve. Raises ``OSError`` when a worker cannot start or an
        address is taken."""
        self.pool.start()
        _log.info("workers ready", extra={"workers": len(self.pool.workers), "pids": [w.process.pid for w in self.pool.workers]})  # type: ignore[union-attr]
        super().start()

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop the group by one deadline, ``drain_timeout_s`` from now: tell the workers the deadline (from then
        they take every part handed on, whatever their back-pressure); stop accepting; hand every queued part to
        its worker (at most half of the time left; the workers keep deciding and forwarding meanwhile); SIGTERM
        the workers, whose drain gets all the time left, and wait for them (and ``STOP_OVERRUN_S`` and
        ``workers.EXIT_S`` more; one still running then is killed). Idempotent."""
        if self._stopped.is_set():
            return
        budget, left = self._stop_clock()
        try:
            write_stop_deadline(self.folder, budget)
        except OSError as exc:  # the workers then take their own drain_timeout_s, and may be killed at the deadline
            _log.error("could not tell the workers the stop deadline: %s", exc)
        self._stop_listeners(min(grace_s, budget / 5), left)
        until = max(0.1, left() / 2)
        results = self._drain_forwarders(until, until + 0.5)
        codes = self.pool.stop(left() + STOP_OVERRUN_S + EXIT_S)
        workers = sum_stop_summaries(self.folder, range(len(self.pool.workers)))
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        self.operations.stop()
        _log.info(
            "tracefence serve stopped",
            extra={
                # The router's and its workers' figures together, as one process reports them.
                "decided_at_shutdown": workers["decided_at_shutdown"],
                "forwarded_all": all(results) and all(code == 0 for code in codes.values()) and workers["forwarded_all"],
                "dropped_spans": sum(f.dropped_spans for f in self.forwarders) + workers["dropped_spans"],
                "undecided_traces": workers["undecided_traces"],
                **({"kept_spans": workers["kept_spans"]} if self.config.service.persistent_queue_dir else {}),
                "handed_to_workers": sum(f.sent_spans for f in self.forwarders),
                "workers_reported": workers["workers_reported"],
                "worker_exit_codes": codes,
                "worker_restarts": self.pool.restarts,
            },
        )
        if self._owned_meter_provider is not None:
            self._owned_meter_provider.shutdown(timeout_millis=min(1000, left() * 1000 + 500))
        self._stopped.set()


__all__ = ["RouterExport", "RouterIntake", "RouterService", "WorkerTarget"]
