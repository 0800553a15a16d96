"""Review page benchmark: the item page of a trace of 10,000 spans against the plain list page (issue 26).

Run by hand::

    .venv/bin/python bench/review_page.py [--spans 10000] [--runs 15]

One SQLite review queue (a temporary file) holds 50 small review items and one giant trace: ``--spans`` spans, a
root, 100 agent turns under it, each with a model call and a tool call (one in ten a write that timed out, held)
and HTTP client spans under the tools, the rest plain internal spans. The giant trace is planned as the doors plan
it (:func:`otel_tracefence.pipeline.plan.plan_spans`) and its ``ReviewSpans`` built as the doors build them
(:func:`otel_tracefence.pipeline.review_spans.review_spans`) with ``review_spans_max`` = ``--spans``, so every span
is kept and the page must collapse past its drawing bound (``ui.waterfall.MAX_ROWS``).

Paired, interleaved runs (the order alternates each round) time, with ``time.perf_counter``, a GET through
Starlette's ``TestClient`` (the app in this process: the server's time, no network) of:

* ``list``: ``/`` (the queue's first page, 50 items): the baseline;
* ``item``: ``/items/<giant trace>`` (the item, its history, its 10,000 spans read, the waterfall drawn).

Printed: min / median / max seconds of each, the ratio item / list of each pair (min / median / max), and the
build time of the ``ReviewSpans`` (what a door pays when it writes the item). The item page must stay under one
second of server time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.pipeline.documents import plan_document
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.pipeline.review_spans import review_spans
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app

GIANT = "b1b1" + "0" * 28
MS = 1_000_000
T0 = 1_765_000_000_000_000_000


def giant_views(spans: int) -> list[SpanView]:
    """``spans`` span views of one trace, as the module says."""
    views = [SpanView(trace_id=GIANT, span_id=f"{1:016x}", name="invoke_agent giant", attributes={"gen_ai.operation.name": "invoke_agent"},
                      start_time_unix_nano=T0, end_time_unix_nano=T0 + 100_000 * MS, sequence=0)]  # fmt: skip
    n = 2
    for turn in range(100):
        start = T0 + turn * 1000 * MS
        turn_id = f"{n:016x}"
        views.append(SpanView(trace_id=GIANT, span_id=turn_id, parent_span_id=f"{1:016x}", name=f"turn {turn}", attributes={}, start_time_unix_nano=start,
                              end_time_unix_nano=start + 900 * MS, sequence=n))  # fmt: skip
        views.append(SpanView(trace_id=GIANT, span_id=f"{n + 1:016x}", parent_span_id=turn_id, name="chat model", kind="client",
                              attributes={"gen_ai.operation.name": "chat"}, start_time_unix_nano=start + MS, end_time_unix_nano=start + 300 * MS, sequence=n + 1))  # fmt: skip
        write = turn % 10 == 0
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create" if write else "customer.lookup",
                      "gen_ai.tool.call.id": f"call-{turn}", "gen_ai.tool.call.arguments": json.dumps({"customer": f"c-{turn}", "amount_cents": turn}),
                      "tracefence.effect": "write" if write else "read"}  # fmt: skip
        if write:
            attributes["error.type"] = "timeout"
        tool_id = f"{n + 2:016x}"
        views.append(SpanView(trace_id=GIANT, span_id=tool_id, parent_span_id=turn_id, name="execute_tool", attributes=attributes,
                              start_time_unix_nano=start + 310 * MS, end_time_unix_nano=start + 800 * MS, status_code="error" if write else "unset", sequence=n + 2))  # fmt: skip
        views.append(SpanView(trace_id=GIANT, span_id=f"{n + 3:016x}", parent_span_id=tool_id, name="POST /api", kind="client", attributes={},
                              start_time_unix_nano=start + 320 * MS, end_time_unix_nano=start + 790 * MS, sequence=n + 3))  # fmt: skip
        n += 4
    while len(views) < spans:
        parent = f"{2 + 4 * (len(views) % 100):016x}"
        start = T0 + (len(views) % 100) * 1000 * MS + 850 * MS
        views.append(SpanView(trace_id=GIANT, span_id=f"{n:016x}", parent_span_id=parent, name=f"step {n}", attributes={}, start_time_unix_nano=start,
                              end_time_unix_nano=start + 10 * MS, sequence=n))  # fmt: skip
        n += 1
    return views[:spans]


def stats(values: list[float]) -> str:
    return f"min {min(values):.4f}  median {statistics.median(values):.4f}  max {max(values):.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    config = TraceFenceConfig(review_spans_max=args.spans)
    views = giant_views(args.spans)
    plan = plan_spans(GIANT, views, config).plan
    built = time.perf_counter()
    kept = review_spans(plan, views, config)
    built = time.perf_counter() - built
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteReviewStore(Path(tmp) / "review.db")
        for n in range(50):
            text = json.dumps({"trace_id": f"small-{n:03d}", "call_id": "w", "tool": "invoice.create", "effect": "write", "status": "timeout", "arguments": {"n": n}})
            store.upsert(plan_document(text, "ndjson", config).plans[0], service_name="billing")
        store.upsert_many([(plan, "giant")], spans={GIANT: kept})
        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        timings: dict[str, list[float]] = {"list": [], "item": []}
        pages = {"list": "/", "item": f"/items/{GIANT}"}
        for name, path in pages.items():  # warm both (templates compiled, caches filled)
            assert client.get(path).status_code == 200, name
        body = client.get(pages["item"]).text
        for run in range(args.runs):
            for name in (("list", "item") if run % 2 == 0 else ("item", "list")):
                start = time.perf_counter()
                response = client.get(pages[name])
                timings[name].append(time.perf_counter() - start)
                assert response.status_code == 200
        store.close()
    ratios = [i / q for i, q in zip(timings["item"], timings["list"])]
    print(f"trace: {len(views)} spans, {len(plan.steps)} steps, {len(kept.spans)} kept (ReviewSpans built in {built:.4f} s, {kept.ByteSize()} bytes)")
    print(f"item page: {len(body)} bytes of HTML, 'kept but not drawn' said: {'spans-collapsed' in body}")
    for name in ("list", "item"):
        print(f"{name:5s} s: {stats(timings[name])}")
    print(f"ratio item / list: {stats(ratios)}")
    print(f"item page under 1 s of server time: {max(timings['item']) < 1.0}")


if __name__ == "__main__":
    main()
