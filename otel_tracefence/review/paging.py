"""The review queue's list filters and page tokens, apart from any database: every store checks a
``list`` call's arguments here and issues and reads the same tokens, so a token means the same on
SQLite and PostgreSQL (and the page's SQL differs only in its placeholders)."""

from __future__ import annotations

import base64
import builtins
import hashlib
import json
from dataclasses import dataclass
from typing import Iterable

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import ReplayClass
from otel_tracefence.core.schema import REPLAY_CLASS

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
"""Largest page a store's ``list`` returns; larger requests are reduced to it."""

_TOKEN_VERSION = 1

KNOWN_STATES = (pb.REVIEW_STATE_OPEN, pb.REVIEW_STATE_RESOLVED)
"""The ``tracefence.v1.ReviewState`` values a stored item may have. A row whose ``state`` column holds another value
is selected by every state filter (:meth:`ListQuery.statement`), and reading it raises
:class:`~otel_tracefence.review.store.UnreadableItem`: a state the queue does not know never hides an item."""


def class_value(value: ReplayClass | int) -> int:
    """The ``tracefence.v1.ReplayClass`` value of ``value``. Raises :class:`ValueError` for anything else."""
    if isinstance(value, ReplayClass):
        return REPLAY_CLASS[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in pb.ReplayClass.values():
        return value
    raise ValueError(f"replay class {value!r} is neither a ReplayClass nor a tracefence.v1.ReplayClass value")


@dataclass(frozen=True)
class ListQuery:
    """A checked ``list`` call: ``state`` (``None``: every state), ``classes`` (sorted; empty: every
    class), ``service_name`` (``None``: every service), ``page_size`` (1..``MAX_PAGE_SIZE``), ``after``:
    the ``(updated_ns, trace_id)`` the page starts below (above with ``oldest_first``; ``None``: the first page),
    ``query_id``, which ties a token to these filters and order, and ``oldest_first``: least recently updated first."""

    state: int | None
    classes: tuple[int, ...]
    service_name: str | None
    page_size: int
    after: tuple[int, str] | None
    query_id: str
    oldest_first: bool = False

    def statement(self, mark: str) -> tuple[str, builtins.list[object]]:
        """The ``SELECT`` of this page over ``review_items`` (``page_size + 1`` rows of ``updated_ns, trace_id,
        item, state``, newest first, or oldest first) and its parameters, ``mark`` being the driver's placeholder (``?`` for sqlite3,
        ``%s`` for psycopg): one statement for both stores, so their pages are the same."""
        where: builtins.list[str] = []
        params: builtins.list[object] = []
        if self.state is not None:  # a state no filter names is listed under every one, to be named unreadable
            where.append(f"(state = {mark} OR state NOT IN ({', '.join([mark] * len(KNOWN_STATES))}))")
            params.extend((self.state, *KNOWN_STATES))
        if self.classes:
            where.append(f"replay_class IN ({', '.join([mark] * len(self.classes))})")
            params.extend(self.classes)
        if self.service_name is not None:
            where.append(f"service_name = {mark}")
            params.append(self.service_name)
        if self.after is not None:
            where.append(f"(updated_ns, trace_id) {'>' if self.oldest_first else '<'} ({mark}, {mark})")
            params.extend(self.after)
        sql = "SELECT updated_ns, trace_id, item, state FROM review_items"
        if where:
            sql += " WHERE " + " AND ".join(where)
        params.append(self.page_size + 1)
        order = "ASC" if self.oldest_first else "DESC"
        return sql + f" ORDER BY updated_ns {order}, trace_id {order} LIMIT {mark}", params

    def next_token(self, rows: builtins.list[tuple[int, str]]) -> str:
        """The token after a page, from the ``(updated_ns, trace_id)`` of the ``page_size + 1`` rows fetched
        (in the page's order); ``""`` when there is no further row."""
        if len(rows) <= self.page_size:
            return ""
        updated_ns, trace_id = rows[self.page_size - 1]
        raw = json.dumps([_TOKEN_VERSION, updated_ns, trace_id, self.query_id], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def list_query(
    *,
    state: int | None,
    replay_classes: Iterable[ReplayClass | int],
    service_name: str | None,
    page_size: int,
    page_token: str,
    oldest_first: bool = False,
) -> ListQuery:
    """Check a ``list`` call (see :meth:`~otel_tracefence.review.store.SQLiteReviewStore.list`). Raises
    :class:`ValueError` for an unknown state or class, a page size below 1, or a token this code did not
    issue for these filters."""
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, not {page_size}")
    if state in (None, pb.REVIEW_STATE_UNSPECIFIED):
        state = None
    elif state not in KNOWN_STATES:
        raise ValueError(f"state {state!r} is not a tracefence.v1.ReviewState value")
    classes = tuple(sorted({class_value(c) for c in replay_classes}))
    service_name = service_name or None
    filters: builtins.list[object] = [state, builtins.list(classes), service_name, *(["oldest"] if oldest_first else [])]
    query_id = hashlib.sha256(json.dumps(filters).encode()).hexdigest()[:16]  # newest-first tokens as before
    after = _decode_token(page_token, query_id) if page_token else None
    return ListQuery(state, classes, service_name, min(page_size, MAX_PAGE_SIZE), after, query_id, bool(oldest_first))


def _decode_token(token: str, query_id: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        version, updated_ns, trace_id, token_query = json.loads(raw)
    except (ValueError, TypeError):
        raise ValueError("page_token is not one this review store issued") from None
    if version != _TOKEN_VERSION or not isinstance(updated_ns, int) or not isinstance(trace_id, str):
        raise ValueError("page_token is not one this review store issued")
    if token_query != query_id:
        raise ValueError("page_token was issued for other filters")
    return updated_ns, trace_id


def like_prefix(prefix: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern for ids starting with ``prefix`` lowercased (``%`` and ``_`` literal)."""
    return prefix.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
