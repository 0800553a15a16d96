"""The review queue: traces whose class needs a person or system to check the real effect.

:class:`SQLiteReviewStore` is the embedded default (one SQLite file in WAL mode).
"""

from otel_tracefence.review.store import SCHEMA_VERSION, ReviewStoreError, SQLiteReviewStore

__all__ = ["SCHEMA_VERSION", "ReviewStoreError", "SQLiteReviewStore"]
