"""The queue listed oldest first (issue 26: "oldest first or newest first"), page by page, on a SQLite file and on
the real PostgreSQL server the suite starts; a page token of one order is refused in the other."""

from __future__ import annotations

import pytest

from otel_tracefence.review import open_review_store

from reconcile.test_runner import held
from test_review_store import T0, Clock

TRACES = [f"{n:032x}" for n in range(1, 6)]


def test_oldest_first_pages_through_every_item_in_the_other_order_and_tokens_keep_their_order(target):
    clock = Clock(T0)
    with open_review_store(target, clock=clock) as store:
        for n, trace_id in enumerate(TRACES):
            clock.now = T0 + n
            store.upsert(held(trace_id))
        clock.now = T0 + 10
        store.upsert(held(TRACES[1], ("call_1", "invoice.create", "inv-9"), ("call_2", "invoice.void", "inv-9")))  # updated last
        pages, token = [], ""
        while True:
            items, token = store.list(page_size=2, page_token=token, oldest_first=True)
            pages.append([i.trace_id for i in items])
            if not token:
                break
        newest, newest_token = store.list(page_size=2)
        assert pages == [[TRACES[0], TRACES[2]], [TRACES[3], TRACES[4]], [TRACES[1]]]
        assert [i.trace_id for i in newest] == [TRACES[1], TRACES[4]]
        with pytest.raises(ValueError, match="page_token was issued for other filters"):
            store.list(page_size=2, page_token=newest_token, oldest_first=True)
