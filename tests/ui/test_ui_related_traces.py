"""The review page names the calls of earlier traces a decision concerns (issue 25, docs/DECISIONS.md 593):
a retry links the held trace's review item (a committed write's trace has none: it is named, not linked)."""

from __future__ import annotations

import json

from starlette.testclient import TestClient

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app
from tests.cli.test_plan_retries_across_traces import T1, T2, T3, _write


def test_the_item_page_of_a_retry_links_the_held_trace_it_retries(tmp_path):
    spans = [_write(T1, "1111111111111111", 0, 1200, timed_out=True), _write(T2, "2222222222222222", 10, 1200, key="inv-7"), _write(T3, "3333333333333333", 20, 1200, timed_out=True)]
    # t-3: a timed-out retry of t-1 (same key and amount); t-2 another invoice (its own key), committed
    text = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "agent"}, "spans": spans}]}]})
    plans, errors = plan_text(text, "auto", TraceFenceConfig())
    assert errors == []
    store = SQLiteReviewStore(tmp_path / "review.db")
    for plan in plans:
        if plan.replay_class.value == "review":
            store.upsert(plan, service_name="billing")
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8077", follow_redirects=False)
    html = client.get(f"/items/{T3}").text
    assert f'<div class="related-trace" data-trace-id="{T1}"><a class="mono" href="/items/{T1}">{T1}</a> / <span class="mono">call-1111</span> (<code>retry_of_held_write</code>)</div>' in html
    assert html.count('class="related-trace"') == 1
    back = client.get(f"/items/{T1}")  # and back: the held trace's item links its retry ("both items link each other")
    assert back.status_code == 200
    assert f'<dd id="later-traces"><div class="related-trace" data-trace-id="{T3}"><a class="mono" href="/items/{T3}">{T3}</a> / <span class="mono">call-3333</span> (<code>retry_of_held_write</code>)</div></dd>' in back.text
    store.close()
