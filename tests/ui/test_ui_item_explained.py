"""Issue 26: the item page explains every reason in words with what to check (the table `review show` and
`plan --format table` print too), and sets a conflict's two calls side by side with the differing fields marked."""

from __future__ import annotations

import html as html_lib
import re

import pytest
from starlette.testclient import TestClient

from otel_tracefence.core.reason_text import explain
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app
from ui_helpers import make_queue


@pytest.fixture
def client(tmp_path):
    store = SQLiteReviewStore(make_queue(tmp_path / "review.db"), create=False)
    yield TestClient(create_app(store), base_url="http://127.0.0.1:8077", follow_redirects=False)
    store.close()


def _text(fragment: str) -> str:
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def test_the_timed_out_invoice_says_what_to_check_in_the_owning_system(client):
    page = client.get("/items/t-timeout").text
    reasons = re.search(r'<dl class="reasons" id="reasons">(.*?)</dl>', page, re.S).group(1)
    e = explain("write_timeout")
    assert _text(reasons) == f"write_timeout (on b1 ) {e.meaning} Check: {e.check}"
    assert 'href="#call-b1"' in reasons
    assert 'id="compare-' not in page  # no conflict: nothing to compare


def test_the_key_conflict_sets_the_two_calls_side_by_side_field_by_field(client):
    page = client.get("/items/t-conflict").text
    assert page.count('<table class="compare"') == 1  # a1 names a2 and a2 names a1: one pair
    table = re.search(r'<table class="compare" id="compare-a1-a2">(.*?)</table>', page, re.S).group(1)
    rows = {m.group(2): (m.group(1) == ' class="differs"', _text(m.group(3))) for m in re.finditer(r'<tr( class="differs")? data-field="([^"]+)">(.*?)</tr>', table, re.S)}
    assert rows["tool"] == (False, "tool ticket.update ticket.update same")
    assert rows["idempotency key"] == (False, "idempotency key tk-1 tk-1 same")
    assert rows["call id"] == (False, "call id a1 a2 same")
    differs, text = rows["arguments"]
    assert differs and text.startswith("arguments sha256 ") and text.endswith(" differs")
    assert "closed" not in page and "reopened" not in page  # hashes only: no value was stored
    assert "idempotency_key_conflict:" not in page
    assert _text(re.search(r'<dt id="reason-idempotency_key_conflict">(.*?)</dt>', page, re.S).group(1)) == "idempotency_key_conflict (on a1 , a2 )"
