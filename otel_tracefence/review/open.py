"""One way to open the review store a target names (config ``review_db``, ``--db``, ``--review-db``)."""

from __future__ import annotations

import os
from typing import Callable

from otel_tracefence.review.events import ReviewStore
from otel_tracefence.review.targets import check_target, is_postgres_url

def open_review_store(
    target: str | os.PathLike[str],
    *,
    store_raw_values: bool = False,
    create: bool = True,
    on_error: Callable[[str], None] | None = None,
    clock: Callable[[], int] | None = None,
    min_free_bytes: int = 0,
) -> ReviewStore:
    """The review store at ``target``: a ``postgresql://`` or ``postgres://`` URL (libpq's URL form, e.g.
    ``postgresql://tracefence:secret@db:5432/tracefence?sslmode=require``) opens
    :class:`~otel_tracefence.review.postgres.PostgresReviewStore`; anything else is the path of a
    :class:`~otel_tracefence.review.store.SQLiteReviewStore` file.

    ``store_raw_values``: keep steps' raw arguments and results (default: stripped). ``create``: make
    the file or the schema when missing; when false, a missing SQLite file raises
    :class:`FileNotFoundError` and a database without the review schema raises
    :class:`~otel_tracefence.review.store.ReviewStoreError`. ``on_error(kind)``: told of failures the
    service counts (see each store). ``min_free_bytes``: a SQLite file's WAL is trimmed after each write while its
    volume has less free, and a reserve file is kept beside it for a full volume (0: neither). ``clock``: nanoseconds since the Unix epoch, for tests.

    Raises :class:`~otel_tracefence.review.store.ReviewStoreError` when the target cannot be used as a
    review store (a URL of a scheme no store serves, :func:`~otel_tracefence.review.targets.check_target`; for a URL: the server cannot be reached or refuses, or psycopg is not installed, the
    message naming the install command), :class:`sqlite3.Error` or :class:`OSError` for a file that
    cannot be opened.
    """
    try:
        check_target(target)
    except ValueError as exc:
        from otel_tracefence.review.store import ReviewStoreError

        raise ReviewStoreError(str(exc)) from None
    if is_postgres_url(target):
        from otel_tracefence.review.postgres import PostgresReviewStore  # imports psycopg lazily, with the hint

        scheme, _, rest = str(target).partition("://")
        return PostgresReviewStore(f"{scheme.lower()}://{rest}", store_raw_values=store_raw_values, create=create, on_error=on_error, clock=clock)
    from otel_tracefence.review.store import SQLiteReviewStore

    return SQLiteReviewStore(target, store_raw_values=store_raw_values, create=create, on_error=on_error, clock=clock, min_free_bytes=min_free_bytes)


def open_write_index_backend(target: str | os.PathLike[str]) -> object:
    """The write index's keeper in the review database at ``target`` (opened already as a review store): a
    :class:`~otel_tracefence.review.write_index_postgres.PostgresWriteIndex` for a URL, else a
    :class:`~otel_tracefence.review.write_index_sqlite.SQLiteWriteIndex` of the file. Raises as the database does."""
    if is_postgres_url(target):
        from otel_tracefence.review.write_index_postgres import PostgresWriteIndex

        scheme, _, rest = str(target).partition("://")
        return PostgresWriteIndex(f"{scheme.lower()}://{rest}")
    from otel_tracefence.review.write_index_sqlite import SQLiteWriteIndex

    return SQLiteWriteIndex(target)
