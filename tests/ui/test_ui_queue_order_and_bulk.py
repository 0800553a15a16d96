"""The queue page's order (newest or oldest first) and bulk resolve with a verdict (issue 26), over HTTP with
Starlette's TestClient against a real SQLite queue and a real PostgreSQL one; the browser's keys are in
test_ui_browser.py."""

from __future__ import annotations

import re

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import open_review_store
from ui_helpers import make_queue

from test_ui_http import BASE, client_for, csrf


def shown(html: str) -> list[str]:
    return re.findall(r'<tr data-trace-id="([^"]+)">', html)


def test_the_queue_lists_oldest_first_on_request_and_refuses_another_order(target):
    with open_review_store(make_queue(target), create=False) as queue:
        client = client_for(queue)
        assert shown(client.get("/").text) == ["t-injected", "t-static", "t-timeout", "t-conflict"]
        oldest = client.get("/?order=oldest&page_size=3")
        assert shown(oldest.text) == ["t-conflict", "t-timeout", "t-static"]
        following = re.search(r'href="(/\?[^"]*page_token=[^"]+)" id="next-page"', oldest.text).group(1).replace("&amp;", "&")
        assert "order=oldest" in following and shown(client.get(following).text) == ["t-injected"]
        refused = client.get("/?order=random")
        assert refused.status_code == 400 and "order &#39;random&#39;: give newest or oldest" in refused.text


def test_bulk_resolve_resolves_every_ticked_item_with_the_verdict_and_refuses_without_its_csrf_token(target):
    with open_review_store(make_queue(target), create=False) as queue:
        client = client_for(queue)
        token = csrf(client, "/")
        form = {"trace_id": ["t-timeout", "t-conflict"], "resolved_by": "ada", "note": "ledger checked", "verdict": "found_once", "csrf_token": token}
        assert client.post("/resolve", data={**form, "csrf_token": "0" * 64}, headers={"origin": BASE}).status_code == 403
        assert client.post("/resolve", data={**form, "trace_id": []}, headers={"origin": BASE}).status_code == 400
        assert client.post("/resolve", data={**form, "verdict": "maybe"}, headers={"origin": BASE}).status_code == 400
        assert queue.get("t-timeout").state == pb.REVIEW_STATE_OPEN
        done = client.post("/resolve", data=form, headers={"origin": BASE})
        assert (done.status_code, done.headers["location"]) == (303, "/?resolved=2")
        for trace_id in ("t-timeout", "t-conflict"):
            item = queue.get(trace_id)
            assert (item.state, item.resolved_by, item.resolution_note, item.verdict) == (pb.REVIEW_STATE_RESOLVED, "ada", "ledger checked", pb.VERDICT_FOUND_ONCE)
        assert queue.get("t-static").state == pb.REVIEW_STATE_OPEN
        page = client.get("/?resolved=2").text
        assert '<p class="notice" id="bulk-resolved" role="status">2 item(s) resolved.</p>' in page
        assert '<input name="resolved_by" id="bulk-by" value="ada" required>' in page  # the reviewer remembered
        gone = client.post("/resolve", data={**form, "trace_id": ["t-static", "no-such-trace"]}, headers={"origin": BASE})
        assert gone.status_code == 404 and "1 resolved; no review item for &#39;no-such-trace&#39;" in gone.text
