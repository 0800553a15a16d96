"""The one place ``tracefence ui`` opens the review queue it shows."""

from __future__ import annotations

from otel_tracefence.review.events import ReviewStore
from otel_tracefence.review.store import SQLiteReviewStore


def open_store(target: str) -> ReviewStore:
    """The review store at ``target``: a SQLite file that must exist (the page never creates a queue).

    Raises :class:`FileNotFoundError` when there is no file there, and
    :class:`~otel_tracefence.review.store.ReviewStoreError` when it is not a review database.
    """
    return SQLiteReviewStore(target, create=False)
