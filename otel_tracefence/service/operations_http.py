"""``/metrics``, ``/healthz`` and ``/readyz`` of ``tracefence serve``, as Starlette routes: served on the OTLP/HTTP
receiver's port, or on ``service.metrics_endpoint`` (:func:`operations_app`), with no token.

* ``GET /healthz``: ``200 ok`` while the process serves (liveness: a stop under way is still alive).
* ``GET /readyz``: ``200`` with ``{"status": "ready"}``, or ``503`` with ``{"status": "not ready", "problems":
  {name: what is wrong}}`` (``starting``, ``stopping``, an upstream, the review store; ``readiness.py``).
* ``GET /metrics``: the self-metrics in the Prometheus text format (or OpenMetrics when the scraper asks for it),
  from the service's own meter provider; ``404`` when ``service.prometheus_metrics`` is off.
"""

from __future__ import annotations

from typing import Any, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.service.asgi_server import AsgiServer
from otel_tracefence.service.readiness import Check, Readiness, folder_check, review_store_check, upstream_check
from otel_tracefence.service.self_metrics import PrometheusText

HEALTH_PATHS = ("/healthz", "/readyz")
METRICS_PATH = "/metrics"


def operations_routes(readiness: Readiness, metrics: PrometheusText | None) -> list[Route]:
    """The three routes, reading ``readiness`` and ``metrics`` (None: ``/metrics`` answers 404)."""

    def healthz(request: Request) -> Response:
        return PlainTextResponse("ok\n", headers={"Cache-Control": "no-store"})

    def readyz(request: Request) -> Response:
        ready, problems = readiness.status()
        body: dict[str, Any] = {"status": "ready"} if ready else {"status": "not ready", "problems": problems}
        return JSONResponse(body, status_code=200 if ready else 503, headers={"Cache-Control": "no-store"})

    def prometheus(request: Request) -> Response:  # a plain function: Starlette runs it off the event loop
        if metrics is None:
            return PlainTextResponse("no Prometheus metrics here: service.prometheus_metrics is off, or the service records to a meter provider of its caller's\n", status_code=404)
        body, content_type = metrics.render(request.headers.get("accept", ""))
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route(METRICS_PATH, prometheus, methods=["GET"]),
    ]




class Operations:
    """The readiness checks and the three routes of one service (``routes``, for the OTLP/HTTP receiver), and the
    listener of ``service.metrics_endpoint`` when one is set (:meth:`start_listener`, :attr:`port`)."""

    def __init__(
        self, config: TraceFenceConfig, store: Any, accepting: Callable[[], bool], metrics: PrometheusText | None, more_checks: dict[str, Check] | None = None
    ) -> None:
        settings = config.service
        checks: dict[str, Check] = {f"upstream {u.endpoint}": upstream_check(u.endpoint) for u in settings.upstreams}
        if not settings.upstreams:
            checks["output file"] = folder_check(settings.output_file)
        if store is not None:
            checks["review store"] = review_store_check(config.review_db, config.review_db_min_free_bytes, store)
        checks.update(more_checks or {})
        self.readiness = Readiness(checks, accepting)
        self.routes = operations_routes(self.readiness, metrics)
        self._config = config
        self._server: AsgiServer | None = None
        self.port = 0  # the metrics_endpoint listener's, once started (0: none)

    def start_listener(self) -> None:
        """Serve the routes on ``service.metrics_endpoint``, if set. Raises ``OSError`` when it cannot listen there."""
        settings = self._config.service
        if not settings.metrics_endpoint:
            return
        self._server = AsgiServer(
            Starlette(routes=self.routes), settings.metrics_endpoint, name="operations",
            tls_certificate_file=settings.tls_certificate_file, tls_key_file=settings.tls_key_file,
        )  # fmt: skip
        self._server.start()
        self.port = self._server.port

    def stop(self, timeout_s: float = 1.0) -> None:
        self.readiness.close()
        if self._server is not None:
            self._server.stop(timeout_s)
