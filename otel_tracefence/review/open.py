"""One way to open the review store a target names (config ``review_db``, ``--db``, ``--review-db``)."""

from __future__ import annotations

import os
import urllib.parse
from typing import Callable

from otel_tracefence.review.events import ReviewStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
INSTALL_HINT = "pip install 'otel-tracefence[postgres]'"


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``, any letter case)."""
    return isinstance(target, str) and target[:13].lower().startswith(POSTGRES_SCHEMES)


def display_target(target: str | os.PathLike[str]) -> str:
    """``target`` as it may be logged and shown: a PostgreSQL URL with its password (in the user part or a
    ``password=`` parameter) replaced by ``***``; a path unchanged."""
    if not is_postgres_url(target):
        return os.fspath(target)
    parts = urllib.parse.urlsplit(str(target))
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = urllib.parse.urlencode(
        [(k, "***" if k == "password" else v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)], safe="*"
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def error_naming(target: str | os.PathLike[str], exc: BaseException) -> str:
    """``exc``'s message for one line on standard error, led by :func:`display_target` of ``target`` unless
    it names it already (the stores' own errors do)."""
    where = display_target(target)
    return str(exc) if where in str(exc) else f"{where}: {exc}"


def open_review_store(
    target: str | os.PathLike[str],
    *,
    store_raw_values: bool = False,
    create: bool = True,
    on_error: Callable[[str], None] | None = None,
    clock: Callable[[], int] | None = None,
) -> ReviewStore:
    """The review store at ``target``: a ``postgresql://`` or ``postgres://`` URL (libpq's URL form, e.g.
    ``postgresql://tracefence:secret@db:5432/tracefence?sslmode=require``) opens
    :class:`~otel_tracefence.review.postgres.PostgresReviewStore`; anything else is the path of a
    :class:`~otel_tracefence.review.store.SQLiteReviewStore` file.

    ``store_raw_values``: keep steps' raw arguments and results (default: stripped). ``create``: make
    the file or the schema when missing; when false, a missing SQLite file raises
    :class:`FileNotFoundError` and a database without the review schema raises
    :class:`~otel_tracefence.review.store.ReviewStoreError`. ``on_error(kind)``: told of failures the
    service counts (see each store). ``clock``: nanoseconds since the Unix epoch, for tests.

    Raises :class:`~otel_tracefence.review.store.ReviewStoreError` when the target cannot be used as a
    review store (for a URL: the server cannot be reached or refuses, or psycopg is not installed, the
    message naming the install command), :class:`sqlite3.Error` or :class:`OSError` for a file that
    cannot be opened.
    """
    if is_postgres_url(target):
        from otel_tracefence.review.postgres import PostgresReviewStore  # imports psycopg lazily, with the hint

        scheme, _, rest = str(target).partition("://")
        return PostgresReviewStore(f"{scheme.lower()}://{rest}", store_raw_values=store_raw_values, create=create, on_error=on_error, clock=clock)
    from otel_tracefence.review.store import SQLiteReviewStore

    return SQLiteReviewStore(target, store_raw_values=store_raw_values, create=create, on_error=on_error, clock=clock)
