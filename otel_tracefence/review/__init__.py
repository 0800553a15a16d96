"""The review queue: traces whose class needs a person or system to check the real effect.

:func:`open_review_store` opens the store a target names: a ``postgresql://`` or ``postgres://`` URL
selects :class:`~otel_tracefence.review.postgres.PostgresReviewStore` (one queue shared by every
replica; needs the ``postgres`` extra), anything else is the path of a :class:`SQLiteReviewStore`
file (the embedded default, WAL mode). Both implement :class:`ReviewStore`, with the same rules
(:mod:`otel_tracefence.review.transitions`) and page tokens (:mod:`otel_tracefence.review.paging`).
"""

from otel_tracefence.review.events import EVENT_KINDS, ReviewEvent, ReviewStore
from otel_tracefence.review.open import open_review_store
from otel_tracefence.review.targets import is_postgres_url
from otel_tracefence.review.store import SCHEMA_VERSION, ReviewStoreError, SQLiteReviewStore

__all__ = ["EVENT_KINDS", "SCHEMA_VERSION", "ReviewEvent", "ReviewStore", "ReviewStoreError", "SQLiteReviewStore", "is_postgres_url", "open_review_store"]
