"""``tracefence review list|show|resolve``: read and resolve the review queue.

Two sources, the same commands and the same output:

* the review database: ``--db PATH|URL``, else ``$OTEL_TRACEFENCE_REVIEW_DB`` (or
  ``review_db`` in the config file), else ``tracefence-review.db`` in the working
  directory: a SQLite file (never created here) or a ``postgresql://`` URL (the
  queue shared by replicas);
* the gRPC review API of a running ``tracefence serve``: ``--endpoint HOST:PORT``
  (or ``$OTEL_TRACEFENCE_REVIEW_ENDPOINT``), with ``--token`` (or
  ``$OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN``, the server's ``service.review_token``;
  ``$OTEL_TRACEFENCE_REVIEW_TOKEN`` is read when it is not set) sent as ``authorization: Bearer <token>``,
  and ``--ca-file PEM`` to speak TLS (plaintext without it; ``http://HOST:PORT``
  is plaintext and ``https://HOST:PORT`` TLS, as for ``serve --upstream``).
  ``list``, ``show`` and ``resolve`` call ``ListReviewItems``, ``GetReviewItem``
  (and ``GetReviewHistory``) and ``ResolveReviewItem``.

``show`` and ``resolve`` take the trace id in any letter case, or a prefix of it
that only one item has (an ambiguous prefix is refused, naming its matches); in the table format it prints the item's history (plan written or
updated, resolved, reopened) below its plan, oldest first.

Which source: ``--db`` or ``--endpoint`` when given (not both), else
``$OTEL_TRACEFENCE_REVIEW_ENDPOINT`` when set, else the database file.
``--format json`` prints each ``tracefence.v1.ReviewItem`` as one line of
canonical protobuf JSON (every field printed); ``table`` (the default) is for
people. Exit 0 on success, 2 for a missing or unusable database, an unknown
trace id, a bad argument, or a review API that cannot be reached or refuses the
token; the reason is one line on standard error.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from typing import Any, Iterable, Protocol

from google.protobuf import json_format

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.cli.review_tables import render_item, render_list
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass
from otel_tracefence.review.events import ReviewEvent, event_from_proto
from otel_tracefence.review.open import open_review_store
from otel_tracefence.review.targets import display_target, error_naming
from otel_tracefence.review.paging import MAX_PAGE_SIZE
from otel_tracefence.review.store import ReviewStoreError
from otel_tracefence.review.verdicts import Verdict, parse_verdict, verdict_to_proto

DB_ENV = "OTEL_TRACEFENCE_REVIEW_DB"
ENDPOINT_ENV = "OTEL_TRACEFENCE_REVIEW_ENDPOINT"
TOKEN_ENV = "OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN"  # the variable the server and ``tracefence ui`` read
OLD_TOKEN_ENV = "OTEL_TRACEFENCE_REVIEW_TOKEN"  # read too, when the first is not set (earlier releases)
API_TIMEOUT_S = 30.0
DEFAULT_DB = "tracefence-review.db"
EXIT_OK, EXIT_ERROR = 0, 2
SHOWN_MATCHES = 5  # trace ids named when a prefix given to ``show`` is ambiguous

STATES = {"open": pb.REVIEW_STATE_OPEN, "resolved": pb.REVIEW_STATE_RESOLVED, "all": None}
CLASSES = {c.value: c for c in ReplayClass}
VERDICT_CHOICES = [v.value.replace("_", "-") for v in Verdict]  # the CLI's spelling: found-once, ...


def _classes(text: str) -> list[ReplayClass]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CLASSES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more of {', '.join(CLASSES)}, comma-separated")
    return [CLASSES[n] for n in names]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    common = argparse.ArgumentParser(add_help=False)
    # Accepted before or after the action (``review --db X list`` or ``review list --db X``);
    # SUPPRESS keeps the action's parser from overwriting a value given before it.
    common.add_argument("--db", default=argparse.SUPPRESS, help=f"review database (default: ${DB_ENV} or review_db in the config file, else {DEFAULT_DB})")
    common.add_argument("--format", choices=("table", "json"), default=argparse.SUPPRESS, help="table (default): for people; json: one ReviewItem per line (canonical protobuf JSON)")
    _api_arguments(common, argparse.SUPPRESS)

    parser = subparsers.add_parser(
        "review",
        help="list, show and resolve the traces held for review",
        description="Read and resolve the review queue. Exit 0 on success, 2 for a missing database, an unknown trace id, a bad argument, "
        "or an item that cannot be read (list shows the others and names it on standard error).",
    )
    parser.add_argument("--db", default=None, help=f"review database (default: ${DB_ENV} or review_db in the config file, else {DEFAULT_DB})")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="table (default): for people; json: one ReviewItem per line (canonical protobuf JSON)")
    _api_arguments(parser, None)
    actions = parser.add_subparsers(dest="review_action", required=True, metavar="{list,show,resolve}")

    list_parser = actions.add_parser("list", parents=[common], help="list items, most recently updated first")
    list_parser.add_argument("--state", choices=tuple(STATES), default="open", help="which items (default: open)")
    list_parser.add_argument("--class", dest="classes", type=_classes, default=[], metavar="CLASSES", help="only these replay classes, comma-separated, e.g. review,static")
    list_parser.add_argument("--service", default=None, help="only items of this service")
    list_parser.add_argument("--limit", type=int, default=0, help="print at most this many items (default: all)")

    show_parser = actions.add_parser("show", parents=[common], help="show one item with its plan")
    show_parser.add_argument("trace_id", metavar="TRACE_ID", help="the trace id, in any letter case, or a prefix of it that only one item has")

    resolve_parser = actions.add_parser("resolve", parents=[common], help="mark an item resolved")
    resolve_parser.add_argument("trace_id", metavar="TRACE_ID", help="the trace id, in any letter case, or a prefix of it that only one item has")
    resolve_parser.add_argument("--by", required=True, help="who resolved it (a person or system)")
    resolve_parser.add_argument("--note", required=True, help="what was checked and found")
    resolve_parser.add_argument(
        "--verdict", choices=VERDICT_CHOICES, default="",
        help="what the owning system showed of the effect: found-once, absent, found-twice (the item is marked duplicate_effect_found), undetermined",
    )  # fmt: skip

    parser.set_defaults(run=run)


def _api_arguments(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--endpoint", metavar="HOST:PORT", default=default, help=f"HOST:PORT, http://HOST:PORT or https://HOST:PORT: use the review API of a running tracefence serve instead of a database file (default: ${ENDPOINT_ENV})")
    parser.add_argument("--token", default=default, help=f"bearer token for the review API (default: ${TOKEN_ENV})")
    parser.add_argument("--ca-file", metavar="PEM", default=default, help="CA certificate(s) to verify the review API's TLS certificate; without it, plaintext (or TLS with the system's roots for an https:// endpoint)")


def _db_path(args: argparse.Namespace, config: TraceFenceConfig) -> str:
    """``--db``, else the configuration's ``review_db`` (``$OTEL_TRACEFENCE_REVIEW_DB`` or the
    config file), else ``$OTEL_TRACEFENCE_REVIEW_DB`` read here, else ``tracefence-review.db``."""
    return args.db or getattr(config, "review_db", None) or os.environ.get(DB_ENV) or DEFAULT_DB


def _fail(args: argparse.Namespace, message: str) -> int:
    print(f"tracefence review {args.review_action}: {message}", file=sys.stderr)
    return EXIT_ERROR


class ReviewSource(Protocol):
    """What the commands need of the queue: a review store (SQLite, PostgreSQL), or :class:`ApiSource` over gRPC."""

    def list(
        self, *, state: int | None, replay_classes: Iterable[ReplayClass], service_name: str | None, page_size: int, page_token: str,
        skipped: list | None = None,
    ) -> tuple[list[pb.ReviewItem], str]: ...

    def get(self, trace_id: str) -> pb.ReviewItem | None: ...

    def resolve(self, trace_id: str, *, resolved_by: str, note: str, verdict: str = "") -> pb.ReviewItem: ...

    def record_verdict(self, trace_id: str, *, actor: str, verdict: str, evidence: str) -> pb.ReviewItem: ...

    def trace_ids_starting(self, prefix: str, *, limit: int = 10) -> list[str]: ...

    def history(self, trace_id: str) -> list[ReviewEvent] | None: ...


def api_target(endpoint: str, ca_file: str | None) -> tuple[str, bool]:
    """The gRPC target (``HOST:PORT``) of a review API endpoint and whether it speaks TLS.

    ``http://`` is plaintext and ``https://`` TLS, as for ``serve --upstream``; without a
    scheme, TLS when a CA file is given. Raises :class:`ValueError` for ``http://`` with a CA file.
    """
    scheme, sep, rest = endpoint.partition("://")
    _check_host_port(endpoint, rest if sep else endpoint)
    if not sep:
        return endpoint, bool(ca_file)
    scheme = scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"--endpoint {endpoint}: give HOST:PORT, http://HOST:PORT (plaintext) or https://HOST:PORT (TLS)")
    if scheme == "http" and ca_file:
        raise ValueError(f"--endpoint {endpoint} is plaintext (http://) but --ca-file asks for TLS: give https://{rest.rstrip('/')} or leave --ca-file out")
    return rest.rstrip("/"), scheme == "https"


def _check_host_port(endpoint: str, target: str) -> None:
    """Raises :class:`ValueError` when ``target`` (``HOST:PORT``) has no port or one outside 1-65535, read as
    ``urllib.parse`` reads the authority of a URL."""
    from urllib.parse import urlsplit

    try:
        port = urlsplit("//" + target.rstrip("/")).port
    except ValueError as exc:
        raise ValueError(f"--endpoint {endpoint}: {exc}; give HOST:PORT with a port from 1 to 65535") from None
    if not port:
        raise ValueError(f"--endpoint {endpoint}: no port; give HOST:PORT with a port from 1 to 65535")


def read_pem_roots(path: str) -> bytes:
    """The CA certificates in the PEM file at ``path``, checked before gRPC sees them (gRPC itself only
    logs a core error line at the first call). Raises :class:`OSError` when the file cannot be read and
    :class:`ValueError` when it holds no PEM certificate."""
    import ssl

    with open(path, "rb") as f:
        data = f.read()
    problem = ""
    if b"-----BEGIN CERTIFICATE-----" not in data:
        problem = "no '-----BEGIN CERTIFICATE-----' block"
    else:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=data.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError):
            problem = "a certificate block does not parse"
    if problem:
        raise ValueError(f"--ca-file {path}: not a PEM CA certificate file: {problem}; give the CA certificate(s) that signed the review API's certificate, in PEM")
    return data


class ApiSource:
    """The review API (``tracefence.v1.ReviewService``) behind the store's interface: ``get`` gives
    ``None`` and ``resolve`` raises :class:`KeyError` for NOT_FOUND, INVALID_ARGUMENT raises
    :class:`ValueError`; other failures raise :class:`grpc.RpcError`."""

    def __init__(self, endpoint: str, *, token: str | None = None, ca_file: str | None = None) -> None:
        """``endpoint``: ``HOST:PORT`` (plaintext, or TLS with ``ca_file``), ``http://HOST:PORT``
        (plaintext) or ``https://HOST:PORT`` (TLS, verified with ``ca_file`` or the system's roots),
        as ``tracefence serve --upstream`` takes them. Raises :class:`ValueError` for ``http://`` with
        a ``ca_file`` or a ``ca_file`` that is not PEM, :class:`OSError` for one that cannot be read."""
        import grpc

        from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc

        self._grpc = grpc
        target, tls = api_target(endpoint, ca_file)
        if tls:
            roots = read_pem_roots(ca_file) if ca_file else None
            self._channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=roots))
        else:
            self._channel = grpc.insecure_channel(target)
        self._stub = pb_grpc.ReviewServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=API_TIMEOUT_S)
        except self._grpc.RpcError as exc:
            if exc.code() == self._grpc.StatusCode.INVALID_ARGUMENT:
                raise ValueError(exc.details()) from None
            raise

    def list(self, *, state, replay_classes, service_name, page_size, page_token, skipped=None):
        """A page from the API; ``skipped`` is not filled: the server leaves out items it cannot read and logs them."""
        from otel_tracefence.core.schema import REPLAY_CLASS

        request = pb.ListReviewItemsRequest(
            state=state or pb.REVIEW_STATE_UNSPECIFIED,
            replay_classes=[REPLAY_CLASS[c] for c in replay_classes],
            service_name=service_name or "",
            page_size=page_size,
            page_token=page_token,
        )
        response = self._call(self._stub.ListReviewItems, request)
        return list(response.items), response.next_page_token

    def get(self, trace_id: str) -> pb.ReviewItem | None:
        try:
            return self._call(self._stub.GetReviewItem, pb.GetReviewItemRequest(trace_id=trace_id))
        except self._grpc.RpcError as exc:
            if exc.code() == self._grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def resolve(self, trace_id: str, *, resolved_by: str, note: str, verdict: str = "") -> pb.ReviewItem:
        given = verdict_to_proto(parse_verdict(verdict, allow_none=True))
        return self._item_call(self._stub.ResolveReviewItem, pb.ResolveReviewItemRequest(trace_id=trace_id, resolved_by=resolved_by, note=note, verdict=given))

    def record_verdict(self, trace_id: str, *, actor: str, verdict: str, evidence: str) -> pb.ReviewItem:
        given = verdict_to_proto(parse_verdict(verdict))
        return self._item_call(self._stub.RecordReviewVerdict, pb.RecordReviewVerdictRequest(trace_id=trace_id, actor=actor, verdict=given, evidence=evidence))

    def _item_call(self, method: Any, request: Any) -> pb.ReviewItem:
        """A call that changes an item: :class:`KeyError` for NOT_FOUND."""
        try:
            return self._call(method, request)
        except self._grpc.RpcError as exc:
            if exc.code() == self._grpc.StatusCode.NOT_FOUND:
                raise KeyError(request.trace_id) from None
            raise

    def history(self, trace_id: str) -> list[ReviewEvent] | None:
        """The item's history, oldest first (``GetReviewHistory``); ``[]`` for an unknown trace id, ``None``
        from a review API without the method (an older ``tracefence serve``)."""
        try:
            response = self._call(self._stub.GetReviewHistory, pb.GetReviewHistoryRequest(trace_id=trace_id))
        except self._grpc.RpcError as exc:
            if exc.code() == self._grpc.StatusCode.NOT_FOUND:
                return []
            if exc.code() == self._grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise
        return [event_from_proto(e) for e in response.events]

    def trace_ids_starting(self, prefix: str, *, limit: int = 10) -> list[str]:
        """Up to ``limit`` trace ids that start with ``prefix`` ignoring letter case, sorted (pages through the queue)."""
        found: list[str] = []
        token = ""
        while True:
            items, token = self.list(state=None, replay_classes=(), service_name=None, page_size=MAX_PAGE_SIZE, page_token=token)
            found.extend(i.trace_id for i in items if i.trace_id.lower().startswith(prefix.lower()))
            if not token:
                return sorted(found)[:limit]

    def close(self) -> None:
        self._channel.close()


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    if args.review_action == "list" and args.limit < 0:
        return _fail(args, f"--limit must be 0 (all) or more, not {args.limit}")
    if args.endpoint and args.db:
        return _fail(args, "give --db (a database file) or --endpoint (a review API), not both")
    endpoint = args.endpoint or (None if args.db else os.environ.get(ENDPOINT_ENV))
    if endpoint:
        return _run_api(args, endpoint)
    if args.token or args.ca_file:
        return _fail(args, f"--token and --ca-file are for the review API: give --endpoint HOST:PORT (or set ${ENDPOINT_ENV})")
    target = _db_path(args, config)
    path = display_target(target)  # a URL's password masked
    try:
        store = open_review_store(target, create=False)
    except FileNotFoundError:
        return _fail(args, f"{path}: no review database there (give --db PATH or set ${DB_ENV})")
    except (ReviewStoreError, sqlite3.Error, OSError) as exc:
        return _fail(args, error_naming(target, exc))
    try:
        with store:
            return _act(args, store, path)
    except (ReviewStoreError, sqlite3.Error) as exc:  # locked past the busy timeout, disk full, server gone, ...
        return _fail(args, error_naming(target, exc))


def _run_api(args: argparse.Namespace, endpoint: str) -> int:
    import grpc

    token = args.token or os.environ.get(TOKEN_ENV) or os.environ.get(OLD_TOKEN_ENV) or None
    try:
        source = ApiSource(endpoint, token=token, ca_file=args.ca_file)
    except OSError as exc:
        return _fail(args, f"--ca-file {args.ca_file}: {exc.strerror or exc}")
    except ValueError as exc:
        return _fail(args, str(exc))
    try:
        return _act(args, source, endpoint)
    except ValueError as exc:  # INVALID_ARGUMENT from the API
        return _fail(args, f"{endpoint}: {exc}")
    except grpc.RpcError as exc:
        return _fail(args, f"{endpoint}: {_rpc_problem(exc, token, args.ca_file, tls=endpoint.lower().startswith('https://'))}")
    finally:
        source.close()


def _rpc_problem(exc: Any, token: str | None, ca_file: str | None, *, tls: bool = False) -> str:
    import grpc

    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.UNAUTHENTICATED:
        hint = "the token was refused" if token else f"the review API wants a token: give --token or set ${TOKEN_ENV}"
        return f"not authenticated ({details}): {hint}"
    if code == grpc.StatusCode.UNAVAILABLE:
        hint = " (TLS)" if ca_file or tls else " (plaintext; give --ca-file if it speaks TLS)"
        return f"review API unavailable: {details}{hint}"
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return f"no review API there ({details}): is it the review endpoint of a tracefence serve with a review database?"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"review API did not answer within {API_TIMEOUT_S:g}s"
    return f"review API failed: {code.name}: {details}"


def _act(args: argparse.Namespace, source: ReviewSource, where: str) -> int:
    """Run the action against ``source``; ``where`` (the file or the endpoint) leads error messages."""
    if args.review_action == "list":
        return _list(args, source, where)
    trace_id, problem = unique_trace_id(source, args.trace_id)
    if trace_id is None:
        return _fail(args, f"{where}: {problem}")
    if args.review_action == "show":
        item = source.get(trace_id)
        if item is None:  # resolved away between the two reads: cannot happen with the queue's API, but say so
            return _fail(args, f"{where}: no review item for trace id {trace_id!r}")
    else:
        try:
            item = source.resolve(trace_id, resolved_by=args.by, note=args.note, verdict=args.verdict)
        except KeyError:
            return _fail(args, f"{where}: no review item for trace id {trace_id!r}")
        except ValueError as exc:
            return _fail(args, f"--by: {exc}")
    if args.format == "json":
        print(_json(item))
    elif args.review_action == "show":
        history = source.history(item.trace_id)
        print(render_item(item, history) if history is not None else render_item(item) + "\n\nhistory: not served by this review API (a tracefence serve older than GetReviewHistory)")
    else:
        print(render_item(item))
    return EXIT_OK


def _list(args: argparse.Namespace, store: ReviewSource, where: str) -> int:
    remaining = args.limit or None  # None: every item
    items: list[pb.ReviewItem] = []
    skipped: list = []  # items that cannot be read (review.store.UnreadableItem): the others are listed
    token = ""
    while remaining is None or remaining > 0:
        page, token = store.list(
            state=STATES[args.state],
            replay_classes=args.classes,
            service_name=args.service,
            page_size=MAX_PAGE_SIZE if remaining is None else min(MAX_PAGE_SIZE, remaining),
            page_token=token,
            skipped=skipped,
        )
        if args.format == "json":
            for item in page:  # streamed page by page: a large queue is never held whole
                print(_json(item))
        else:
            items.extend(page)
        if remaining is not None:
            remaining -= len(page)
        if not token:
            break
    if args.format == "table":
        print(render_list(items) if items else "no review items")
    for unreadable in skipped:
        _fail(args, f"{where}: {unreadable}: skipped")
    return EXIT_ERROR if skipped else EXIT_OK


def _json(item: pb.ReviewItem) -> str:
    return json_format.MessageToJson(item, indent=None, always_print_fields_with_no_presence=True)


def unique_trace_id(source: ReviewSource, given: str) -> tuple[str | None, str]:
    """The one trace id ``given`` names, for ``show`` and ``resolve`` alike: the id itself (any letter case), or a
    prefix of it that only one item has. Returns ``(trace id, "")``, or ``(None, why)`` when there is none: no item,
    or a prefix several items have (up to ``SHOWN_MATCHES`` of them named; never one picked among them), or an empty
    (or blank) id, which every id starts with: ``resolve "$ID"`` with ``ID`` unset must not resolve a lone item."""
    if not given.strip():
        return None, "an empty trace id names no review item; give the trace id or a prefix of it"
    if source.get(given) is not None:
        return given, ""
    matches = source.trace_ids_starting(given, limit=SHOWN_MATCHES + 1)
    if not matches:
        return None, f"no review item for trace id {given!r}"
    if len(matches) > 1:
        more = ", ..." if len(matches) > SHOWN_MATCHES else ""
        counted = f"{SHOWN_MATCHES} or more" if more else str(len(matches))
        return None, f"trace id prefix {given!r} matches {counted} items: {', '.join(matches[:SHOWN_MATCHES])}{more}; give more of the id"
    return matches[0], ""
