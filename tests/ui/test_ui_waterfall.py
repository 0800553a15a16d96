"""The item page's trace (issue 26): the waterfall drawn on the server as SVG from the spans a door kept, the tool
steps coloured by decision with the decision in words, the span a reason points to marked, times relative to the
trace's start with the exact ones on hover; the conflict's calls field by field from the field hashes; the trace
links; collapsed past its bound with the count said; an older item without spans still shown."""

from __future__ import annotations

import re
import time

from starlette.testclient import TestClient

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.pipeline.review_spans import review_spans
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app
from otel_tracefence.ui.waterfall import MAX_ROWS, duration_text, exact
from span_queue import CONFLICT, INVOICE, MS, T0, write_through_processor
from ui_helpers import make_queue

BASE = "http://127.0.0.1:8077"
TEMPO = (
    "http://localhost:3000/explore?schemaVersion=1&orgId=1&panes=%7B%22t%22:%7B%22datasource%22:%22tempo%22,%22queries%22:%5B%7B%22refId%22:%22A%22,"
    "%22datasource%22:%7B%22type%22:%22tempo%22,%22uid%22:%22tempo%22%7D,%22queryType%22:%22traceql%22,%22query%22:%22{trace_id}%22%7D%5D,"
    "%22range%22:%7B%22from%22:%22now-24h%22,%22to%22:%22now%22%7D%7D%7D"
)
LINKS = {"Jaeger": "http://localhost:16686/trace/{trace_id}", "Tempo": TEMPO, "Phoenix": "http://localhost:6006/projects/default/traces/{trace_id}"}


def page_of(store, path: str, **options) -> str:
    response = TestClient(create_app(store, **options), base_url=BASE).get(path)
    assert response.status_code == 200, response.text
    return response.text


def svg_group(html: str, span_name: str) -> str:
    """The ``<g>`` of the waterfall row whose label is ``span_name``."""
    (group,) = [g for g in re.findall(r"<g class=\"span[^>]*>.*?</g>", html) if f">{span_name}" in g or f"◆ {span_name}" in g]
    return group


def test_the_timed_out_invoice_as_a_waterfall_with_its_tool_span_marked(tmp_path):
    db = str(tmp_path / "review.db")
    write_through_processor(db)
    with SQLiteReviewStore(db, create=False) as store:
        html = page_of(store, f"/items/{INVOICE}", trace_link_templates=LINKS)
        spans = {s.name: s for s in store.spans(INVOICE).spans}
    assert "<script" not in html.split('id="waterfall"')[1].split("</svg>")[0]
    tool = svg_group(html, "execute_tool invoice.create · review")
    assert 'class="span step decision-review marked"' in tool and 'data-call-id="call-invoice"' in tool
    assert "◆ execute_tool invoice.create · review" in tool
    assert "30.00 s · write_timeout" in tool  # the duration and the reason beside the bar
    start = spans["execute_tool invoice.create"].start_time_unix_nano
    assert f"start {exact(start)} (+120 ms), end {exact(start + 30_000 * MS)}, took 30.00 s" in tool  # the hover
    assert exact(T0 + 120 * MS) == "2025-12-06T05:46:40.120000000Z"
    lookup = svg_group(html, "execute_tool customer.lookup · replay")
    assert 'class="span step decision-replay"' in lookup and "◆" not in lookup  # no reason: not marked
    http = svg_group(html, "POST /invoices")
    assert 'class="span"' in http
    assert 'id="spans-collapsed"' not in html
    assert '<td>+120 ms</td><td>30.00 s</td>' in html  # the step times table
    for label, address in (("Jaeger", f"http://localhost:16686/trace/{INVOICE}"), ("Phoenix", f"http://localhost:6006/projects/default/traces/{INVOICE}"),
                           ("Tempo", TEMPO.replace("{trace_id}", INVOICE).replace("&", "&amp;"))):  # fmt: skip
        assert f'href="{address}" rel="noopener noreferrer" target="_blank">open in {label}</a>' in html


def test_the_key_conflict_compared_field_by_field_by_hash(tmp_path):
    db = str(tmp_path / "review.db")
    write_through_processor(db)
    with SQLiteReviewStore(db, create=False) as store:
        html = page_of(store, f"/items/{CONFLICT}")
        fields = {s.call_id: {f.name: f.sha256 for f in s.fields} for s in store.spans(CONFLICT).steps}
    rows = dict(re.findall(r'<tr( class="differs")? data-field="(arguments\.[a-z_]+)"', html)[i][::-1] for i in range(3))
    assert rows == {"arguments.api_key": ' class="differs"', "arguments.state": ' class="differs"', "arguments.ticket": ""}
    ticket = re.search(r'data-field="arguments.ticket">(.*?)</tr>', html).group(1)
    assert ticket.count(f"sha256 {fields['call-ticket-1']['ticket']}") == 2 and "<td>same</td>" in ticket
    state = re.search(r'data-field="arguments.state">(.*?)</tr>', html).group(1)
    assert f"sha256 {fields['call-ticket-1']['state']}" in state and f"sha256 {fields['call-ticket-2']['state']}" in state
    assert "<strong>differs</strong>" in state


def _giant(spans: int) -> list[SpanView]:
    views = [SpanView(trace_id="g1", span_id=f"{1:016x}", name="root", attributes={}, start_time_unix_nano=T0, end_time_unix_nano=T0 + 10_000 * MS)]
    views.append(SpanView(trace_id="g1", span_id=f"{2:016x}", parent_span_id=f"{1:016x}", name="execute_tool invoice.create", status_code="error",
                          attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "w",
                                      "tracefence.effect": "write", "error.type": "timeout"},
                          start_time_unix_nano=T0 + 9_000 * MS, end_time_unix_nano=T0 + 9_500 * MS, sequence=1))  # fmt: skip
    views += [SpanView(trace_id="g1", span_id=f"{n:016x}", parent_span_id=f"{1:016x}", name=f"work {n}", attributes={},
                       start_time_unix_nano=T0 + n * MS // 10, end_time_unix_nano=T0 + n * MS // 10 + MS, sequence=n) for n in range(3, spans + 1)]  # fmt: skip
    return views


def test_a_trace_of_10000_spans_is_collapsed_past_the_bound_with_the_count_said(tmp_path):
    config = TraceFenceConfig(review_spans_max=10_000)
    views = _giant(10_000)
    plan = plan_spans("g1", views, config).plan
    with SQLiteReviewStore(tmp_path / "review.db") as store:
        store.upsert_many([(plan, "giant")], spans={"g1": review_spans(plan, views, config)})
        client = TestClient(create_app(store), base_url=BASE)
        client.get("/items/g1")
        start = time.perf_counter()
        html = client.get("/items/g1").text
        took = time.perf_counter() - start
    assert took < 1.0, took
    assert html.count('<g class="span') == MAX_ROWS
    assert f"{10_000 - MAX_ROWS} more span(s) kept but not drawn" in html
    assert "◆ execute_tool invoice.create · review" in html  # the tool span is drawn, though it starts last
    with SQLiteReviewStore(tmp_path / "bounded.db") as store:
        store.upsert_many([(plan, "giant")], spans={"g1": review_spans(plan, views, TraceFenceConfig())})
        html = page_of(store, "/items/g1")
    assert html.count('<g class="span') == MAX_ROWS and f"{500 - MAX_ROWS} more span(s) kept but not drawn" in html
    assert "9500 span(s) of the trace were not kept (past <code>review_spans_max</code>)" in html


def test_an_item_stored_without_spans_still_renders(tmp_path):
    with SQLiteReviewStore(make_queue(tmp_path / "review.db"), create=False) as store:
        html = page_of(store, "/items/t-timeout")
    assert "This item keeps no spans of its trace" in html and 'id="waterfall"' not in html
    assert 'id="call-b1"' in html and "write_timeout" in html


def test_durations_read_in_ms_or_s():
    assert [duration_text(n) for n in (0, 250_000, 12 * MS, 999 * MS, 1_250 * MS, 125_000 * MS)] == ["0", "0.25 ms", "12 ms", "999 ms", "1.25 s", "2 min 5 s"]
