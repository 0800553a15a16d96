"""Issue 26: the queue's columns (tools, reasons, held steps, age), its search box ``q`` and the counts."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app
from otel_tracefence.ui.queue_view import age_text, search
from ui_helpers import make_queue


@pytest.fixture
def store(tmp_path):
    s = SQLiteReviewStore(make_queue(tmp_path / "review.db"), create=False)
    yield s
    s.close()


def _shown(client: TestClient, **params: str) -> list[str]:
    return re.findall(r'<tr data-trace-id="([^"]+)">', client.get("/", params=params).text)


@pytest.mark.parametrize(
    "q,expected",
    [
        ("INVOICE", ["t-timeout"]),  # a part of a tool, any letter case
        ("ticket.update", ["t-conflict"]),
        ("inv-1", ["t-timeout"]),  # an idempotency key
        ("TK-1", ["t-conflict"]),
        ("write_timeout", ["t-timeout"]),  # a reason
        ("t-c", ["t-conflict"]),  # a trace id prefix
        ("nothing-like-it", []),
    ],
)
def test_the_search_box_finds_by_tool_key_reason_or_trace_id_prefix(store, q, expected):
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8077")
    assert _shown(client, state="all", q=q) == expected


def test_filters_take_any_letter_case_and_the_rows_carry_tools_reasons_held_and_age(store):
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8077")
    page = client.get("/", params={"state": "OPEN", "class": "Review"}).text
    row = re.search(r'<tr data-trace-id="t-conflict">(.*?)</tr>', page, re.S).group(1)
    assert '<td class="mono tools">ticket.update, customer.lookup</td>' in row
    assert '<td class="mono reasons">idempotency_key_conflict</td>' in row
    assert "<td>2/3</td>" in row
    assert re.search(r'<td class="age" title="created [0-9T:.-]+Z">\d+ (s|min|h|d)</td>', row)
    counts = re.sub(r"<[^>]+>", "", re.search(r'<p class="counts" id="counts">(.*?)</p>', page, re.S).group(1))
    assert counts.split() == ["Classes:", "review", "2.", "Held", "for:", "write_timeout", "1,", "idempotency_key_conflict", "1."]  # most first, then as the rows go
    assert '<label>Search <input type="search" name="q"' in page


def test_a_search_reads_a_bounded_number_of_items_and_says_when_it_stopped(store):
    found = search(store.list, "no-such-tool", 50, limit=2, state=None)
    assert (found.items, found.scanned, found.stopped) == ([], 2, True)
    found = search(store.list, "pager", 50, state=pb.REVIEW_STATE_OPEN)
    assert ([i.trace_id for i in found.items], found.stopped) == (["t-injected", "t-static"], False)


def test_age_is_in_its_largest_whole_unit():
    assert [age_text(s) for s in (0.4, 59, 60, 7200, 3 * 86400)] == ["0 s", "59 s", "1 min", "2 h", "3 d"]
