"""``tracefence ui``: the review page and the trace inspector in the browser, until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import logging
import signal
import sqlite3
import sys

from pydantic import ValidationError

from otel_tracefence.core.config import DEFAULT_UI_LISTEN, ConfigError, ServiceSettings, TraceFenceConfig, UiSettings, describe
from otel_tracefence.review.targets import display_target
from otel_tracefence.review.store import ReviewStoreError

DEFAULT_DB = "tracefence-review.db"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ui",
        help="serve the review page and the trace inspector",
        description="Serve the review queue (list, filter, show, resolve) and the trace inspector (/inspect) over HTTP. "
        "Flags override the config file and OTEL_TRACEFENCE_UI__* variables. Exit 2 when the database is missing "
        "or the page would be exposed beyond loopback with no review token.",
    )
    parser.add_argument("--db", help=f"review database (default: $OTEL_TRACEFENCE_REVIEW_DB or review_db in the config file, else {DEFAULT_DB})")
    parser.add_argument("--listen", metavar="HOST:PORT", help=f"address to listen on (default ui.listen, {DEFAULT_UI_LISTEN})")
    parser.add_argument("--review-token", help="review token: with one, every page needs a session signed in with it at /login (default: service.review_token, $OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN)")
    parser.add_argument("--trace-url-template", metavar="URL", help="link to each trace in a backend, {trace_id} replaced, e.g. http://localhost:16686/trace/{trace_id}")
    parser.add_argument(
        "--insecure-ui",
        action="store_true",
        default=None,
        help="serve the page beyond loopback with no review token (anyone who reaches it can resolve items); without it, that is refused",
    )
    parser.set_defaults(run=run)


def with_flags(config: TraceFenceConfig, args: argparse.Namespace) -> TraceFenceConfig:
    """The configuration with the flags on top, validated like the file's values; raises :class:`ConfigError`."""
    ui = {k: v for k, v in {"listen": args.listen, "trace_url_template": args.trace_url_template, "insecure": args.insecure_ui}.items() if v is not None}
    service = {"review_token": args.review_token} if args.review_token is not None else {}
    top = {"review_db": args.db} if args.db else {}
    try:
        ui_settings = UiSettings.model_validate({**config.ui.model_dump(), **ui})
        service_settings = ServiceSettings.model_validate({**config.service.model_dump(), **service})
    except ValidationError as exc:
        raise ConfigError(f"tracefence ui flags: {describe(exc)}") from None
    return config.model_copy(update={**top, "ui": ui_settings, "service": service_settings})


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    import uvicorn

    from otel_tracefence.service.asgi_server import listening_socket
    from otel_tracefence.ui import app_for, open_store
    from otel_tracefence.ui.security import check_ui_exposure

    config = with_flags(config, args)
    listen = config.ui.listen
    warning = check_ui_exposure(listen, config)  # ConfigError: exit 2 with the reason
    log = logging.getLogger("otel_tracefence.ui")
    if warning:
        log.warning(warning)
    path = config.review_db or DEFAULT_DB
    try:
        store = open_store(path)
    except FileNotFoundError:
        print(f"tracefence ui: {display_target(path)}: no review database there (give --db PATH or set $OTEL_TRACEFENCE_REVIEW_DB)", file=sys.stderr)
        return 2
    except ReviewStoreError as exc:  # its message names the database (a URL's password masked)
        print(f"tracefence ui: {exc}", file=sys.stderr)
        return 2
    except (sqlite3.Error, OSError) as exc:
        print(f"tracefence ui: {display_target(path)}: {exc}", file=sys.stderr)
        return 2
    try:
        sock = listening_socket(listen)  # bound before the page is announced: a taken port is one line and exit 2
    except OSError as exc:
        store.close()
        print(f"tracefence ui: {exc}", file=sys.stderr)
        return 2
    app = app_for(store, config, listen)
    level = "info" if args.log_level in ("DEBUG", "INFO") else "warning"
    # uvicorn stops gracefully on SIGTERM and SIGINT, then raises the signal again into the handler it found. SIGTERM's
    # handler here exits 0 (after the store is closed), so a stop asked for ends as ``tracefence serve``'s does, before
    # uvicorn has started too; Ctrl-C stays Python's KeyboardInterrupt: one line and exit 130, as every command.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    print(f"tracefence ui: review page for {display_target(path)} on http://{listen}/ (inspector: /inspect)", file=sys.stderr)
    try:
        # Its access log names method, path and status, never a body.
        uvicorn.Server(uvicorn.Config(app, log_level=level, server_header=False)).run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
        store.close()
    return 0
