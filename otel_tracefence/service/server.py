"""``tracefence serve``: the collector-side OTLP service (gRPC and HTTP receivers), assembled.

One process decides whole traces, so every span of a trace must reach the same
process (past one machine, the Collector's ``loadbalancing`` exporter routes by
trace id; see ``deploy/``).

This module wires the parts and keeps their start and stop in order; the parts: the gRPC listeners
(:mod:`.grpc_listeners`), what the settings say before the start (:mod:`.serve_settings`), when the forward queues
refuse (:mod:`.backpressure`), the persistent queue read back at start (:mod:`.persistent_replay`), and the time of a
stop (:mod:`.shutdown`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any, Callable

import grpc
from grpc_health.v1 import health, health_pb2

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as review_grpc
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.fence import Fence
from otel_tracefence.service.asgi_server import AsgiServer
from otel_tracefence.service.auth import BearerToken
from otel_tracefence.service.export import TraceExport
from otel_tracefence.review.sqlite_room import check_free_space, check_writable
from otel_tracefence.review.targets import display_target, is_postgres_url
from otel_tracefence.service.forward import Forwarder
from otel_tracefence.service.targets import FileTarget
from otel_tracefence.service.upstream_http import upstream_target
from otel_tracefence.service.intake import Intake
from otel_tracefence.service.backpressure import forward_refusal
from otel_tracefence.service.grpc_listeners import REVIEW_SERVICE, bind, grpc_server
from otel_tracefence.service.http_connections import CAP_FLOOR, ConnectionGuard, connection_cap, guarded_h11_protocol, tls_context
from otel_tracefence.service.otlp_http import OtlpHttpReceiver
from otel_tracefence.service.operations_http import Operations
from otel_tracefence.service.self_metrics import ServiceMetrics, meter_provider as own_meter_provider
from otel_tracefence.service.persistent_queue import PersistentQueue
from otel_tracefence.service.review_refusals import ReviewRefusals
from otel_tracefence.ui.app import app_for
from otel_tracefence.ui.security import check_ui_exposure
from otel_tracefence.service.otlp_spans import OtlpItem, annotate_item, planning_view, to_request, wire_planning_view
from otel_tracefence.service.persistent_replay import replay_persistent
from otel_tracefence.service.receiver import TraceReceiver
from otel_tracefence.service.review_api import ReviewService
from otel_tracefence.service.serve_settings import check_review_exposure, input_limits, serves_prometheus
from otel_tracefence.service.shutdown import PLAN_SHARE, READ_SHARE, REVIEW_SHARE, STOP_FORWARD_S, drain_forwarders, log_owed_reviews, stop_clock, unread_by_trace
from otel_tracefence.service.write_index_setup import store_write_index

_log = logging.getLogger("otel_tracefence.service")
TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


class TraceFenceService:
    """The receiver, the fence, the forward queues, the review API and health, with their lifecycle.

    ``start()`` binds and returns; ``stop()`` stops accepting, decides everything
    held (as partial), drains the forward queues within ``drain_timeout_s`` and
    closes the review store: nothing acknowledged is dropped while an upstream
    takes it within that time.
    """

    def __init__(self, config: TraceFenceConfig, *, meter_provider: Any = None, worker: int | None = None) -> None:
        # ``worker``: this is worker process ``worker`` of ``serve --workers N``: its receiver is
        # the router's internal socket, and it serves no review API (the router does, from the same store).
        self.worker = worker
        # Before anything starts: refuses a review API left open.
        self._review_warning = check_review_exposure(config) if worker is None else None
        # The same rule for the review page (service.ui_endpoint): refused beyond loopback with no review token.
        self._ui_warning = check_ui_exposure(config.service.ui_endpoint, config) if config.service.ui_endpoint else None
        self.config = config
        if config.review_db and not is_postgres_url(config.review_db):  # refused now, in one line, not later (DECISIONS 512)
            check_writable(config.review_db)
            check_free_space(config.review_db, config.review_db_min_free_bytes)
        settings = config.service
        self._owned_meter_provider = prometheus = None
        if meter_provider is None:
            meter_provider, prometheus = own_meter_provider(config, worker, prometheus=serves_prometheus(config, worker))
            self._owned_meter_provider = meter_provider
        self.self_metrics = own = ServiceMetrics(meter_provider, "service")
        targets = [upstream_target(u, settings.protocol_of(u)) for u in settings.upstreams] or [FileTarget(settings.output_file)]
        self.persistent = PersistentQueue(settings.persistent_queue_dir, len(targets)) if settings.persistent_queue_dir else None
        persistent = self.persistent
        self.forwarders = [
            Forwarder(
                target,
                settings.forward_queue_spans,
                on_drop=own.on_drop(index, target.name),
                on_failure=own.on_failure(target.name),
                on_settled=functools.partial(persistent.settle, index) if persistent is not None else None,
                batch_wait_s=settings.forward_batch_wait_ms / 1000.0,
            )
            for index, target in enumerate(targets)
        ]
        own.watch_forwarders(self.forwarders, [f.target.name for f in self.forwarders], "tracefence.forward.queue.size")
        self.store = None
        if config.review_db:
            from otel_tracefence.review.open import open_review_store

            self.store = open_review_store(config.review_db, store_raw_values=config.store_raw_values, min_free_bytes=config.review_db_min_free_bytes)
        self.fence: Fence[OtlpItem] = Fence(
            config,
            emit=self._emit,
            annotate_span=annotate_item,  # type: ignore[arg-type]  # None in, None out: Fence types it P -> P
            read_view=wire_planning_view if settings.span_reader == "wire" else planning_view,
            service_name=lambda item: item.origin.service_name if item is not None else "",
            component="service",
            review_sink=self.store,
            meter_provider=meter_provider,
            decision_wait_ms=settings.decision_wait_ms,
            max_wait_ms=settings.max_wait_ms,
            # With the persistent queue, a review item is part of the acknowledgement (DECISIONS 510).
            review_guard=self.persistent if self.store is not None else None,
            telemetry_attributes=own.attributes,
        )
        self._review_refusals = ReviewRefusals(own.meter, attributes=own.attributes)
        if self.store is not None:  # the file deleted or replaced while running: counted as an internal error
            telemetry = self.fence.telemetry
            on_error = lambda kind: telemetry.errors.add(1, {**telemetry.attributes, "error.type": kind})  # noqa: E731
            self.store.on_error = on_error  # type: ignore[attr-defined]  # both stores have it; ReviewStore does not declare it
            # every worker and replica: one index (the buffer's attribute is typed as its default, the memory index)
            self.fence.buffer.write_index = store_write_index(config, telemetry)  # type: ignore[assignment]
        self.intake = Intake(self.fence, settings.intake_queue_spans, settings.intake_queue_bytes, self.persistent)
        own.watch_intake(lambda: self.intake.depth, settings.intake_queue_spans)
        self.replayed_spans = 0  # spans read back from the persistent queue at start
        self._accepting = True
        # A worker of ``serve --workers N`` whose router has begun to stop: what the router still hands on was
        # acknowledged to clients already, so the forward queues' back-pressure no longer refuses it.
        self.router_stopping = False
        self.emitted_spans = 0  # spans the fence handed on to the forward queues
        self._emit_lock = threading.Lock()
        self._emit_closed = False
        self.health = health.HealthServicer()
        self._servers: list[grpc.Server] = []
        self.port = 0
        self.review_port = 0
        self.http_port = 0  # the OTLP/HTTP receiver's, once started (0: turned off)
        self._http_server: AsgiServer | None = None
        self._http_receiver: OtlpHttpReceiver | None = None
        self._http_guard: ConnectionGuard | None = None  # the OTLP/HTTP connection cap and header timeout, once started
        self.ui_port = 0  # the review page's (service.ui_endpoint), once started (0: not served)
        self._ui_server: AsgiServer | None = None
        self._stopped = threading.Event()
        self.operations = Operations(config, self.store, lambda: self._accepting, prometheus)

    # -- data path -----------------------------------------------------------------
    def _emit(self, items: list[OtlpItem]) -> None:
        request, count = to_request(items)
        with self._emit_lock:
            if self._emit_closed:  # after the shutdown: already counted as not forwarded
                return
            self.emitted_spans += count
        self.self_metrics.processed(count)
        encoded = request.SerializeToString()  # once, shared by every forward queue
        for forwarder in self.forwarders:
            forwarder.put(encoded, count)

    def _refuse(self) -> str | None:
        if not self._accepting:
            return "tracefence is shutting down; retry against another replica or later"
        if self.intake.full():
            return (
                f"intake queue is {self.intake.depth}/{self.intake.max_spans} spans, "
                f"{self.intake.depth_bytes}/{self.intake.max_bytes} bytes full; retry later"
            )
        if self.fence.review_backlog_full():
            return self._review_refusals.refused(self.fence.pending_reviews(), self.config.max_traces)
        if self.router_stopping:
            return None
        # Spans read and not yet forwarded: held or being decided, then queued to forward (the intake queue has
        # bounds of its own, and what it still holds at a stop is handed on unplanned).
        backlog = max(0, self.intake.handed_spans - self.emitted_spans)
        return forward_refusal(self.forwarders, backlog, self.config.service.backpressure_ratio, self.config.service.drain_timeout_s)

    def _export(self, transport: str) -> TraceExport:
        """The one Export path, its refusals counted with ``transport`` (``grpc`` or ``http``)."""
        attrs = {**self.self_metrics.attributes, "transport": transport}
        return TraceExport(
            self.intake,
            self._refuse,
            self.config.service.retry_delay_s,
            on_rejected=lambda n: self.self_metrics.rejected.add(n, attrs),
            on_refused_too_large=lambda: self.self_metrics.refused.add(1, {**attrs, "reason": "too_large"}),
            wire_reader=self.config.service.span_reader == "wire",
        )

    # -- lifecycle -------------------------------------------------------------------
    def _server(self, max_connections: int) -> grpc.Server:
        server = grpc_server(self.config.service, self.health, max_connections)
        self._servers.append(server)
        return server

    def _bind(self, server: grpc.Server, address: str) -> int:
        return bind(server, address, self.config.service)

    def start(self) -> None:
        """Bind the receiver (and the review API) and start serving. Raises ``OSError`` if an address is taken."""
        settings = self.config.service
        # Read once, at start, and logged once: the descriptor limit shared by both receivers' connections.
        cap = connection_cap(settings.http_max_connections, grpc_configured=settings.grpc_max_connections, http=bool(settings.http_endpoint))
        _log.info(cap.describe(), extra={"http_max_connections": cap.connections, "grpc_max_connections": cap.grpc_connections, "descriptor_limit": cap.limit})
        listeners = 2 if settings.review_endpoint else 1
        main = self._server(max(CAP_FLOOR, cap.grpc_connections // listeners))
        main.add_generic_rpc_handlers((TraceReceiver(self._export("grpc")).handler(),))
        review_server = main if not settings.review_endpoint else self._server(max(CAP_FLOOR, cap.grpc_connections // listeners))
        if self.store is not None and self.worker is None:
            review_grpc.add_ReviewServiceServicer_to_server(ReviewService(self.store), review_server)
        self.port = self._bind(main, settings.endpoint)
        self.review_port = self.port if review_server is main else self._bind(review_server, settings.review_endpoint)
        if settings.http_endpoint:
            receiver = OtlpHttpReceiver(
                self._export("http"), token=BearerToken(settings.bearer_token), max_body_bytes=settings.max_message_bytes,
                max_workers=settings.max_workers, cors_allowed_origins=settings.http_cors_allowed_origins,
                body_timeout_s=settings.http_body_timeout_s, retry_delay_s=settings.retry_delay_s,
                inflate_budget_bytes=settings.http_inflate_budget_bytes,
                routes=() if settings.metrics_endpoint else self.operations.routes,
            )  # fmt: skip
            self._http_receiver = receiver
            tls = tls_context(settings.tls_certificate_file, settings.tls_key_file)  # the handshake is the guard's: counted, timed
            self._http_guard = ConnectionGuard.make(cap.connections, settings.http_header_timeout_s, tls)
            self._http_server = AsgiServer(
                receiver.app, settings.http_endpoint, name="otlp-http",
                http=guarded_h11_protocol(self._http_guard), timeout_keep_alive=settings.http_idle_timeout_s, accept_batch=cap.accept_batch,
            )  # fmt: skip
            self._http_server.start()
            self.http_port = self._http_server.port
        if settings.ui_endpoint:
            self._ui_server = AsgiServer(
                app_for(self.store, self.config, settings.ui_endpoint), settings.ui_endpoint, name="ui",
                tls_certificate_file=settings.tls_certificate_file, tls_key_file=settings.tls_key_file,
            )  # fmt: skip
            self._ui_server.start()
            self.ui_port = self._ui_server.port
            if self._ui_warning:
                _log.warning("review page without a token: %s", self._ui_warning)
        self.operations.start_listener()
        if self._review_warning:
            _log.warning("review API without a token: %s", self._review_warning)
        if self.persistent is not None:  # what an earlier run acknowledged and did not forward goes first
            self._replay_thread = threading.Thread(target=self._replay, name="tracefence-replay", daemon=True)
            self._replay_thread.start()
        for server in self._servers:
            server.start()
        serves_review = self.store is not None and self.worker is None
        for name in ("", TRACE_SERVICE, *((REVIEW_SERVICE,) if serves_review else ())):  # only what is served
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        _log.info(
            "tracefence serve listening",
            extra={
                "endpoint": settings.endpoint,
                "port": self.port,
                "http_endpoint": settings.http_endpoint or None,
                "http_port": self.http_port or None,
                "ui_port": self.ui_port or None,
                "metrics_endpoint": settings.operations_endpoint(settings.http_endpoint) or None,  # /metrics, /healthz, /readyz
                "metrics_port": self.operations.port or self.http_port or None,
                "review_port": self.review_port,
                "forward_to": [f.target.name for f in self.forwarders],
                "review_db": display_target(self.config.review_db),  # a URL's password masked
                "tls": bool(settings.tls_certificate_file),
                "bearer_token": bool(settings.bearer_token),
                "review_token": bool(settings.review_token),
                "store_raw_values": self.config.store_raw_values,
                "limits": input_limits(self.config),
            },
        )
        self.operations.readiness.start()  # /readyz: ready once its checks pass

    def _stop_listeners(self, grace_s: float, left: Any) -> None:
        """Stop accepting: health says NOT_SERVING, every listener stops, calls under way get ``grace_s`` seconds
        and at most ``left()`` more to finish."""
        self._accepting = False
        self.health.enter_graceful_shutdown()
        stopping = [server.stop(grace_s) for server in self._servers]
        if self._http_server is not None:  # refusing new Exports already (not accepting): let those under way finish
            self._http_receiver.stop_reading(max(0.0, grace_s - 0.2))  # type: ignore[union-attr]  # bodies still coming then: 503
            self._http_server.stop(grace_s)
            if self._http_guard is not None:
                self._http_guard.flush()
        if self._ui_server is not None:  # before the store closes
            self._ui_server.stop(grace_s)
        for event in stopping:
            event.wait(timeout=left())

    def _replay(self) -> None:
        """Hand the requests left in the persistent queue to the intake, as received, within its bounds."""
        if self.persistent is not None:
            wire = self.config.service.span_reader == "wire"
            self.replayed_spans = replay_persistent(self.persistent, self.intake, lambda: self._accepting, wire=wire)

    def stop(self, grace_s: float = 5.0, budget_s: float | None = None) -> None:
        """Stop accepting, decide everything held, drain the forward queues, close the store. Idempotent.

        ``budget_s``: the seconds the stop may take, by default ``service.drain_timeout_s`` (a worker of
        ``serve --workers N`` is given what is left of its router's deadline).
        Bounded: it returns within that budget and at most ``STOP_OVERRUN_S`` more (for an
        upstream call under way at the deadline). The time left is shared out as it goes: in-flight calls get at most
        ``grace_s`` and a fifth of it, reading the intake queue ``READ_SHARE`` of what is left, planning what is held
        ``PLAN_SHARE`` of the rest; what is not planned then, and what was never read, is handed on without a plan,
        fail closed (``Fence.hand_on_unplanned``: review, ``not_planned_at_shutdown``), and its review items are
        written until ``STOP_FORWARD_S`` before the end, while the forward queues send. Whatever is not forwarded
        by then is counted (``dropped_spans`` in the stop line, ``tracefence.forward.dropped`` with
        ``reason=shutdown``) and logged.
        """
        if self._stopped.is_set():
            return
        budget, left = self._stop_clock(budget_s)
        self._stop_listeners(min(grace_s, budget / 5), left)
        # What the stop has to hand on, and how fast each upstream took spans so far (the stop line's figures).
        backlog = self.intake.depth + max(0, self.intake.handed_spans - self.emitted_spans)
        at_stop = {"unforwarded_spans": [backlog + f.depth for f in self.forwarders], "send_rates": [round(f.send_rate or 0) for f in self.forwarders]}
        # Every acknowledged span is read (held) before the fence decides, as time allows (READ_SHARE of it).
        self.intake.drain(timeout_s=left() * READ_SHARE)
        unread = unread_by_trace(self.intake.take_unread())
        held = len(self.fence.buffer)
        # Decides what is held (partial where the root never came), writes review items, closes the store. What is
        # not planned by PLAN_SHARE of the time left, and what was never read, is handed on fail closed (review,
        # not_planned_at_shutdown): cheap, so nothing acknowledged is lost to a slow decision (DECISIONS 195).
        now, deciding = time.monotonic(), max(left() * REVIEW_SHARE, left() - STOP_FORWARD_S)
        kwargs = {"deadline": now + left() * PLAN_SHARE, "unplanned": unread, "review_until": now + deciding}
        decider = threading.Thread(target=self.fence.shutdown, kwargs=kwargs, name="tracefence-shutdown", daemon=True)
        decider.start()
        decider.join(timeout=deciding + 0.2)
        undecided = len(self.fence.buffer) if decider.is_alive() else 0
        if decider.is_alive():
            log_owed_reviews(self.fence.owed_at_stop())
        if unread:
            _log.warning(
                "shutdown: %d acknowledged spans (%d traces) were not read before the deadline; handed on unplanned, as review",
                sum(len(spans) for spans in unread.values()), len(unread),
            )  # fmt: skip
        if undecided:
            _log.error("shutdown: deciding what is held did not finish in time; %d trace(s) still held are not forwarded", undecided)
        # All queues at once; one second is kept for a call under way at the deadline.
        results = self._drain_forwarders(max(0.1, left() - 1.0), left() + 1.5)
        # Spans the fence took and never handed on (a trace still being decided, a review write still waiting
        # on a locked database): counted now, and never handed on later.
        with self._emit_lock:
            self._emit_closed = True
            in_fence = max(0, self.intake.handed_spans - self.emitted_spans)
        if in_fence:
            _log.error("shutdown: %d spans were still being decided when the time ran out; not forwarded", in_fence)
            for forwarder in self.forwarders:
                forwarder.count_not_forwarded(in_fence, "still being decided at the shutdown deadline")
        drained = all(results) and not undecided and not in_fence
        extra = {
            "decided_at_shutdown": held,
            "forwarded_all": drained,
            "dropped_spans": sum(f.dropped_spans for f in self.forwarders),
            "undecided_traces": undecided,
            **at_stop,
        }
        if self.persistent is not None:  # what is left on disk is sent at the next start
            thread = getattr(self, "_replay_thread", None)
            if thread is not None:
                thread.join(timeout=min(1.0, left()))
            self.persistent.close()
            extra["kept_requests"], extra["kept_spans"] = PersistentQueue.count(self.persistent.path)
        close_index = getattr(self.fence.buffer.write_index, "close", None)
        if close_index is not None:
            close_index()
        _log.info("tracefence serve stopped", extra=extra)
        self.operations.stop()
        self.stop_summary = extra  # the stop line's figures (a worker hands them to its router)
        if self._owned_meter_provider is not None:
            self._owned_meter_provider.shutdown(timeout_millis=min(1000, left() * 1000 + 500))
        self._stopped.set()

    def _stop_clock(self, budget_s: float | None = None) -> tuple[float, Callable[[], float]]:
        """The shutdown's budget (``budget_s``, by default ``service.drain_timeout_s``; seconds) from now, and a
        function giving the seconds left of it."""
        budget = self.config.service.drain_timeout_s if budget_s is None else max(0.0, budget_s)
        return budget, stop_clock(budget)

    def _drain_forwarders(self, seconds: float, wait_s: float) -> list[bool]:
        """Drain every forward queue at once (:func:`~otel_tracefence.service.shutdown.drain_forwarders`)."""
        return drain_forwarders(self.forwarders, seconds, wait_s)

    def wait(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

