"""Reading the review items both stores keep (SQLite and PostgreSQL): one stored item, one page of them, and the
errors that say why a row cannot be used. Split out of :mod:`otel_tracefence.review.store` (by role, unchanged)."""

from __future__ import annotations

import builtins
import logging
from typing import Sequence

from google.protobuf.message import DecodeError, Message

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review.paging import KNOWN_STATES

logger = logging.getLogger(__name__)


class ReviewStoreError(Exception):
    """The file cannot be used as a review database (not SQLite, another schema, a newer
    schema version, WAL unavailable), or the store is closed. The message names the file."""


class UnreadableItem(ReviewStoreError):
    """A stored review item that cannot be read: its ``item`` column holds no bytes (text, a number) or bytes that do
    not decode as a ``tracefence.v1.ReviewItem``, or decode to an item that is not this row's (no trace id or another
    one, no plan or a plan of another trace), or that holds an enum value this version does not know (a replay class,
    a decision, ...), or its ``state`` column holds a state the queue does not know or another than its item's.
    ``trace_id`` names its row; the other rows are unaffected."""

    def __init__(self, trace_id: str, why: str) -> None:
        super().__init__(f"the review item of trace {trace_id} cannot be read ({why})")
        self.trace_id = trace_id


def read_item(blob: object, trace_id: str, state: object = None) -> pb.ReviewItem:
    """The ``ReviewItem`` stored for ``trace_id`` (the ``item`` column's value, bytes; ``state``: the row's ``state``
    column, ``None`` when not read). Raises :class:`UnreadableItem` naming the row and what is wrong with it (see
    there). The one reader of stored items for both stores' reads."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise UnreadableItem(trace_id, f"stored as {type(blob).__name__}, not as the bytes of a ReviewItem")
    try:
        item = pb.ReviewItem.FromString(bytes(blob))
    except DecodeError as exc:
        raise UnreadableItem(trace_id, f"its bytes do not decode: {exc}") from None
    why = _not_this_rows_item(item, trace_id) or _unknown_enum_value(item) or _state_problem(item, state)
    if why:
        raise UnreadableItem(trace_id, why)
    return item


def _not_this_rows_item(item: pb.ReviewItem, trace_id: str) -> str:
    """Why ``item`` is not the item of row ``trace_id`` (an empty blob decodes to an empty item), or ``""``."""
    if item.trace_id != trace_id:
        return f"its item holds trace id {item.trace_id!r}" if item.trace_id else "its item holds no trace id"
    if not item.HasField("plan"):
        return "its item holds no plan"
    if item.plan.trace_id != trace_id:
        return f"its plan is of trace {item.plan.trace_id!r}" if item.plan.trace_id else "its plan holds no trace id"
    return ""


def _unknown_enum_value(message: Message) -> str:
    """The first enum field of ``message`` (searched depth first) holding a value its enum does not name, as
    ``"its TracePlan.replay_class holds 9, not a tracefence.v1.ReplayClass value"``; ``""`` when there is none."""
    for field, value in message.ListFields():
        values = value if field.is_repeated else (value,)
        if field.type == field.TYPE_ENUM:
            for number in values:
                if number not in field.enum_type.values_by_number:
                    return f"its {field.containing_type.name}.{field.name} holds {number}, not a {field.enum_type.full_name} value"
        elif field.type == field.TYPE_MESSAGE:
            for child in values:
                why = _unknown_enum_value(child)
                if why:
                    return why
    return ""


def _state_problem(item: pb.ReviewItem, state: object) -> str:
    """Why the row's ``state`` column cannot be trusted (lists filter on it), or ``""``; ``None``: not read."""
    if state is None or state == item.state:
        return ""
    if state not in KNOWN_STATES:
        return f"its state column holds {state!r}, not a tracefence.v1.ReviewState value"
    return f"its state column holds {state!r}, its item's state is {item.state}"


def read_page(rows: Sequence[Sequence[object]], page_size: int, skipped: builtins.list[UnreadableItem] | None) -> builtins.list[pb.ReviewItem]:
    """The items of a page's first ``page_size`` rows (``updated_ns, trace_id, item, state``, as
    :meth:`~otel_tracefence.review.paging.ListQuery.statement` selects them). A row that cannot be read
    (:func:`read_item`) is left out and appended to ``skipped``, so one bad row hides none of the others;
    with ``skipped`` ``None`` it raises :class:`UnreadableItem`."""
    items: builtins.list[pb.ReviewItem] = []
    for row in rows[:page_size]:
        try:
            items.append(read_item(row[2], str(row[1]), row[3]))
        except UnreadableItem as exc:
            if skipped is None:
                raise
            skipped.append(exc)
    return items


def decode_spans(blob: object, trace_id: str) -> pb.ReviewSpans | None:
    """The stored ``ReviewSpans`` of ``trace_id``, or ``None`` when its bytes do not decode or are another trace's
    (logged: the item page then shows the item without its waterfall)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        logger.warning("the spans kept with review item %s are stored as %s, not bytes; its page shows the item without them", trace_id, type(blob).__name__)
        return None
    try:
        spans = pb.ReviewSpans.FromString(bytes(blob))
    except DecodeError as exc:
        logger.warning("the spans kept with review item %s cannot be read (%s); its page shows the item without them", trace_id, exc)
        return None
    return spans if spans.trace_id == trace_id else None
