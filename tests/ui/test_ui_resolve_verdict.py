"""Issue 26: the resolve form's verdict (found once / absent / found twice / undetermined), shown in the history,
and the reviewer's name remembered for the session."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app
from ui_helpers import make_queue

BASE = "http://127.0.0.1:8077"


@pytest.fixture
def store(tmp_path):
    s = SQLiteReviewStore(make_queue(tmp_path / "review.db"), create=False)
    yield s
    s.close()


def _resolve(client: TestClient, trace_id: str, **fields: str):
    page = client.get(f"/items/{trace_id}").text
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page).group(1)
    return client.post(f"/items/{trace_id}/resolve", data={"csrf_token": token, **fields}, headers={"origin": BASE})


def test_a_verdict_is_recorded_shown_and_the_name_remembered_for_the_session(store):
    client = TestClient(create_app(store), base_url=BASE, follow_redirects=False)
    assert 'name="resolved_by" required autocomplete="username" value=""' in client.get("/items/t-timeout").text
    answer = _resolve(client, "t-timeout", resolved_by="alice", verdict="found_once", note="in_78 exists once")
    assert (answer.status_code, answer.headers["location"]) == (303, "/items/t-timeout?resolved=1")
    item = store.get("t-timeout")
    assert (item.state, item.resolved_by, item.verdict_by, item.resolution_note) == (2, "alice", "alice", "in_78 exists once")
    page = client.get("/items/t-timeout?resolved=1").text
    assert re.sub(r"<[^>]+>", "", re.search(r'<dd id="verdict-given">(.*?)</dd>', page).group(1)) == "found once (by alice)"
    last = re.findall(r"<tr><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td><td class=\"verdict\">([^<]*)</td>", page)[-1]
    assert last == ("resolved", "alice", "found once")
    assert 'value="alice"' in client.get("/items/t-conflict").text  # the name, remembered for this session
    other = TestClient(create_app(store), base_url=BASE)
    assert 'value="alice"' not in other.get("/items/t-conflict").text  # not for another session


def test_found_twice_resolves_and_marks_the_duplicate_and_an_unknown_verdict_is_refused(store):
    client = TestClient(create_app(store), base_url=BASE, follow_redirects=False)
    refused = _resolve(client, "t-conflict", resolved_by="bob", verdict="maybe")
    assert refused.status_code == 400 and "verdict &#39;maybe&#39;: give one of found_once, absent, found_twice, undetermined, or none" in refused.text
    assert store.get("t-conflict").state == 1  # still open
    assert _resolve(client, "t-conflict", resolved_by="bob", verdict="found_twice", note="ticket 7 updated twice").status_code == 303
    assert "the effect was found twice" in client.get("/items/t-conflict").text
    assert store.get("t-conflict").duplicate_effect_found
