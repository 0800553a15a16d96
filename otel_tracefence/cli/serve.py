"""``tracefence serve``: run the collector-side OTLP service (gRPC and HTTP receivers) until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import logging
import time
from typing import Mapping, NoReturn

import sqlite3

from pydantic import ValidationError

from otel_tracefence import engine
from otel_tracefence.core.config import ConfigError, ServiceSettings, TraceFenceConfig, UpstreamSettings, describe
from otel_tracefence.review.store import ReviewStoreError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the OTLP service (gRPC and HTTP) beside or behind the OpenTelemetry Collector",
        description="Receive OTLP traces over gRPC and HTTP, plan whole traces, forward them annotated, keep uncertain ones for review. "
        "Flags override the config file and OTEL_TRACEFENCE_SERVICE__* variables. Stops on SIGTERM or SIGINT: "
        "decides what it holds, drains the forward queues, exits 0.",
    )
    parser.add_argument("--endpoint", help="OTLP/gRPC receiver address (default 127.0.0.1:4317)")
    parser.add_argument("--http-endpoint", help="OTLP/HTTP receiver address, POST /v1/traces (default 127.0.0.1:4318; none: off)")
    parser.add_argument("--review-endpoint", help="separate address for the review API (default: beside the receiver)")
    parser.add_argument("--upstream", action="append", metavar="ENDPOINT", help="forward to this OTLP endpoint (repeatable; http:// for plaintext)")
    parser.add_argument(
        "--upstream-protocol",
        choices=("grpc", "http/protobuf"),
        help="forward over OTLP/gRPC or OTLP/HTTP (POST .../v1/traces) to upstreams that name no protocol of their own (default grpc)",
    )
    parser.add_argument("--output-file", help="OTLP/JSON lines file when no upstream is set (default tracefence-spans.otlp.jsonl)")
    parser.add_argument("--db", "--review-db", dest="review_db", help="review queue, as every command names it (--review-db: the old name, kept): a SQLite file, or a postgresql:// URL shared by replicas (default tracefence-review.db)")
    parser.add_argument("--decision-wait-ms", type=float, help="wait after a trace's root span arrives (default 1000)")
    parser.add_argument("--max-wait-ms", type=float, help="longest a trace is held (default 30000)")
    parser.add_argument(
        "--persistent-queue-dir",
        help="keep acknowledged spans on disk in this folder until forwarded, and send what is left at the next start (default: off)",
    )
    parser.add_argument(
        "--insecure-review-api",
        action="store_true",
        default=None,
        help="serve the review API beyond loopback with no review token (anyone who reaches it can resolve items); "
        "without it, such a service refuses to start",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes deciding traces (default 1). N > 1: this process routes each trace, by its id, to one of N worker processes",
    )
    parser.add_argument(
        "--log-format", choices=("json", "text"), help="log lines on standard error, every field kept (default: service.log_format, json)"
    )
    parser.add_argument(
        "--metrics-endpoint",
        help="serve /metrics, /healthz and /readyz on a listener of their own (default: on the OTLP/HTTP port; service.metrics_endpoint)",
    )
    # A worker process of `serve --workers N`, started by its router (not for people to use).
    parser.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker-of", help=argparse.SUPPRESS)  # the router's configuration, as JSON
    parser.add_argument("--worker-parent", type=int, help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def with_flags(config: TraceFenceConfig, args: argparse.Namespace) -> TraceFenceConfig:
    """The configuration with command-line flags on top, validated like the file's values.

    Raises :class:`~otel_tracefence.core.config.ConfigError` for a flag value the configuration would refuse.
    """
    service = {
        key: value
        for key, value in {
            "endpoint": args.endpoint,
            "http_endpoint": args.http_endpoint,
            "review_endpoint": args.review_endpoint,
            "output_file": args.output_file,
            "decision_wait_ms": args.decision_wait_ms,
            "max_wait_ms": args.max_wait_ms,
            "insecure_review_api": args.insecure_review_api,
            "persistent_queue_dir": args.persistent_queue_dir,
            "worker_processes": getattr(args, "workers", None),
            "upstream_protocol": getattr(args, "upstream_protocol", None),
            "metrics_endpoint": getattr(args, "metrics_endpoint", None),
        }.items()
        if value is not None
    }
    if args.upstream:
        service["upstreams"] = [{"endpoint": e} for e in args.upstream]
    top = {"review_db": args.review_db} if args.review_db is not None else {}
    try:
        settings = ServiceSettings.model_validate({**config.service.model_dump(), **service})
    except ValidationError as exc:
        raise ConfigError(f"tracefence serve flags: {describe(exc)}") from None
    return config.model_copy(update={**top, "service": settings})


def upstream_transport(upstream: UpstreamSettings, environ: Mapping[str, str] = os.environ, protocol: str = "grpc") -> tuple[bool, str]:
    """Whether the SDK's OTLP exporter will speak TLS to ``upstream``, and why, by its own rule: ``https://`` is TLS;
    over ``http/protobuf`` ``http://`` is plaintext, and no scheme is TLS unless ``insecure``
    (``upstream_http.http_url``); over ``grpc``, else ``insecure`` when set; else ``OTEL_EXPORTER_OTLP_TRACES_INSECURE``
    or ``OTEL_EXPORTER_OTLP_INSECURE``; else ``http://`` is plaintext and anything else TLS."""
    scheme = upstream.endpoint.partition("://")[0].lower() if "://" in upstream.endpoint else ""
    if scheme == "https":
        return True, "https:// endpoint"
    if protocol == "http/protobuf":
        if scheme == "http":
            return False, "http:// endpoint"
        if upstream.insecure:
            return False, "insecure: true"
        return True, f"no scheme: TLS is the default; write http://{upstream.endpoint} for plaintext"
    if upstream.insecure is not None:
        return not upstream.insecure, f"insecure: {str(upstream.insecure).lower()}"
    for name in ("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE"):
        value = environ.get(name)
        if value is not None:
            return value.strip().lower() != "true", f"{name}={value}"
    if scheme == "http":
        return False, "http:// endpoint"
    if upstream.certificate_file or upstream.client_certificate_file:
        return True, "certificate_file given"
    return True, f"no scheme: TLS is the default; write http://{upstream.endpoint} for plaintext"


def _worker_service(args: argparse.Namespace):
    """Worker ``args.worker_index`` of ``serve --workers N``: the router's configuration (``--worker-of``, JSON), as
    :func:`~otel_tracefence.service.workers.worker_config` changes it. Its log lines carry ``tracefence.worker``."""
    from otel_tracefence.service.server import TraceFenceService
    from otel_tracefence.service.workers import die_with_parent, worker_config, worker_socket

    die_with_parent(args.worker_parent)
    index = args.worker_index

    def tag(record: logging.LogRecord) -> bool:
        setattr(record, "tracefence.worker", index)
        return True

    for handler in logging.getLogger().handlers:
        handler.addFilter(tag)
    with open(args.worker_of, encoding="utf-8") as source:
        router_config = TraceFenceConfig.model_validate_json(source.read())
    folder = os.path.dirname(args.worker_of)
    return TraceFenceService(worker_config(router_config, index, worker_socket(folder, index)), worker=index)


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    """Set up the logs (one handler; the level and format the flags, then the configuration, then ``OTEL_LOG_LEVEL``
    say; descriptor 2 captured for the gRPC C-core's lines, before gRPC starts), then run the service."""
    from otel_tracefence.service import logs

    level, ignored = config.service.resolved_log_level(args.log_level)
    log_format = args.log_format or config.service.log_format
    args.log_format = log_format  # a router hands it on to its workers
    native = logs.capture_native_stderr(logs.configure(level, log_format), level)
    if ignored:
        logging.getLogger("otel_tracefence.service").warning(ignored)
    try:
        return _run(args, config)
    finally:
        if native is not None:
            native.close()


def _run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    from otel_tracefence.service.gc_settings import tune_for_service
    from otel_tracefence.service.server import TraceFenceService
    from otel_tracefence.service.workers import router_stopping, stop_budget, watch_parent

    log = logging.getLogger("otel_tracefence.service")
    worker = getattr(args, "worker_index", None)
    try:
        if worker is not None:
            service = _worker_service(args)
        else:
            config = with_flags(config, args)
            if config.service.worker_processes > 1:
                from otel_tracefence.service.router import RouterService

                service = RouterService(config, log_format=args.log_format)
            else:
                service = TraceFenceService(config)
    except ConfigError:
        raise
    except (OSError, ValueError, sqlite3.Error, ReviewStoreError) as exc:  # a bad upstream, review db or output file
        log.critical(f"tracefence serve: cannot start: {exc}")  # one line, through the handler
        return 2
    log.info("engine", extra={"engine": engine()})  # compiled (Cython) or python (docs/DECISIONS.md, 115)
    for upstream in service.config.service.upstreams:
        protocol = service.config.service.protocol_of(upstream)
        tls, because = upstream_transport(upstream, protocol=protocol)
        log.log(
            logging.WARNING if tls and because.startswith("no scheme") else logging.INFO,
            "upstream transport",
            extra={"upstream": upstream.endpoint, "protocol": protocol, "transport": "tls" if tls else "plaintext", "because": because},
        )
    received: list[int] = []
    # The handler only records the signal: it runs on the main thread between
    # bytecodes, so it must not take a lock the main thread may hold.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: received.append(signum))
    if worker is not None:  # Ctrl-C reaches the whole process group: the router alone decides when workers stop
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        reconciling = reconcile_loop(service.config) if worker is None else None
    except ValueError as exc:  # a reconciler that does not load (ReconcilerLoadError), or no review store to ask of
        log.critical(f"tracefence serve: cannot start: {exc}")
        return 2
    try:
        service.start()
    except OSError as exc:
        log.critical(f"tracefence serve: {exc}")
        service.stop(0)
        return 2
    if reconciling is not None:
        reconciling.start()
    tune_for_service()  # the collector of a started service process (docs/DECISIONS.md, 220)
    folder = os.path.dirname(args.worker_of) if worker is not None else ""
    while not received:
        time.sleep(0.2)
        if worker is not None:
            if not watch_parent(args.worker_parent):  # the router is gone: drain and exit
                received.append(signal.SIGTERM)
            elif not service.router_stopping and router_stopping(folder):  # what it still hands on is acknowledged
                service.router_stopping = True
    logging.getLogger("otel_tracefence.service").info("stopping", extra={"signal": signal.Signals(received[0]).name})
    if worker is None:
        if reconciling is not None:
            reconciling.stop(service.config.reconcile_timeout_s)
        service.stop()
        return 0
    from otel_tracefence.service.workers import write_stop_summary

    service.stop(budget_s=stop_budget(folder))  # the time left until the router's deadline
    if watch_parent(args.worker_parent):  # the router sums its workers' stop lines
        write_stop_summary(folder, worker, getattr(service, "stop_summary", {}))
    else:  # the router died without cleaning up: its private folder (config, sockets) goes with its workers
        shutil.rmtree(folder, ignore_errors=True)
    _exit_now()


def reconcile_loop(config: TraceFenceConfig):
    """The background reconciling ``service.reconcile_interval_s`` asks for (``None`` when 0), on the router or the
    one process, never a worker: every interval, the open items' held calls are asked of the ``reconcilers``
    (:class:`~otel_tracefence.reconcile.background.ReconcileLoop`, its own review-store connection). Raises
    :class:`ValueError` when a reconciler does not load, none is registered, or there is no review store."""
    interval = config.service.reconcile_interval_s
    if not interval:
        return None
    from otel_tracefence.reconcile.background import ReconcileLoop
    from otel_tracefence.reconcile.registry import load_reconcilers
    from otel_tracefence.reconcile.runner import ReconcileRunner
    from otel_tracefence.review.open import open_review_store

    if not config.review_db:
        raise ValueError("service.reconcile_interval_s is set but review_db is empty: there are no review items to reconcile")
    reconcilers = load_reconcilers(config.reconcilers)
    if not reconcilers:
        raise ValueError("service.reconcile_interval_s is set but no reconciler is registered (reconcilers: {tool: module:function})")
    runner = ReconcileRunner(reconcilers, timeout_s=config.reconcile_timeout_s, max_concurrent=config.reconcile_max_concurrent)
    logging.getLogger("otel_tracefence.service").info(
        "reconciling", extra={"interval_s": interval, "reconcilers": {tool: r.name for tool, r in reconcilers.items()}}
    )
    return ReconcileLoop(lambda: open_review_store(config.review_db, store_raw_values=config.store_raw_values), runner, interval)


def _exit_now() -> NoReturn:
    """Exit a worker at once with code 0, its stop done: its files, persistent queue and review store are closed,
    its figures handed on. The interpreter's own exit would first collect and free every object the worker held
    (seconds with a full buffer), running into the router's deadline; ``os._exit`` skips that (logs flushed first)."""
    from otel_tracefence.service import logs

    logs.release()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
