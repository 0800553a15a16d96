"""The one place ``tracefence ui`` opens the review queue it shows."""

from __future__ import annotations

from otel_tracefence.review.events import ReviewStore
from otel_tracefence.review.open import open_review_store


def open_store(target: str) -> ReviewStore:
    """The review store at ``target`` (a SQLite file that must exist, or a ``postgresql://`` URL whose
    database holds the review schema): the page never creates a queue.

    Raises :class:`FileNotFoundError` when there is no file there, and
    :class:`~otel_tracefence.review.store.ReviewStoreError` when it is not a review database or the
    PostgreSQL server cannot be used.
    """
    return open_review_store(target, create=False)
