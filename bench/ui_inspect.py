"""Inspector benchmark: what the page adds over ``tracefence plan``'s own function.

Run by hand::

    .venv/bin/python bench/ui_inspect.py [--traces 2000] [--runs 9]

The input is the inspector's sample (``otel_tracefence/ui/static/sample.ndjson``)
repeated under new trace ids until it holds ``--traces`` traces. Paired,
interleaved runs (the order alternates each round) time, with
``time.perf_counter``:

* ``direct``: :func:`otel_tracefence.pipeline.documents.plan_document` on the decoded text,
  plus ``json_lines()`` (what ``tracefence plan --format json`` prints): the baseline;
* ``page``: a POST of the same bytes to ``/inspect/plan`` of ``tracefence ui``'s
  app served by uvicorn on 127.0.0.1 (a thread of this process), through httpx,
  including the HTML plan tables the page renders and the JSON answer.

Printed: min / median / max seconds of each, and the ratio page / direct of each
pair (min / median / max). The ratio is what to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import threading
import time

import httpx
import uvicorn

from otel_tracefence.pipeline.documents import plan_document
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.ui import create_app
from otel_tracefence.ui.app import SAMPLE


def make_input(traces: int) -> bytes:
    """NDJSON rows: the sample's traces in turn, trace ``n`` under the id ``<sample trace id>-<n>``."""
    by_trace: dict[str, list[dict]] = {}
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        by_trace.setdefault(row["trace_id"], []).append(row)
    ids = list(by_trace)
    lines = [json.dumps({**row, "trace_id": f"{ids[n % len(ids)]}-{n}"}) for n in range(traces) for row in by_trace[ids[n % len(ids)]]]
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    data = make_input(args.traces)
    config = TraceFenceConfig()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(None, config=config, max_inspect_bytes=1 << 30), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, timeout=600) as client:
        while True:
            try:
                page = client.get("/inspect")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        token = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)

        def direct() -> str:
            return plan_document(data.decode("utf-8-sig"), "auto", config).json_lines()

        def via_page() -> str:
            response = client.post("/inspect/plan", content=data, headers={"origin": base, "x-csrf-token": token})
            response.raise_for_status()
            return response.json()["output"]

        assert direct() == via_page(), "the page's output differs from tracefence plan's"
        times: dict[str, list[float]] = {"direct": [], "page": []}
        for round_ in range(args.runs):
            order = [("direct", direct), ("page", via_page)]
            for name, fn in order if round_ % 2 == 0 else reversed(order):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    server.should_exit = True
    thread.join(timeout=10)
    print(f"input: {args.traces} traces, {len(data)} bytes; {args.runs} paired runs, interleaved")
    for name, values in times.items():
        print(f"{name:7s} s   min {min(values):.3f}  median {statistics.median(values):.3f}  max {max(values):.3f}")
    ratios = [p / d for p, d in zip(times["page"], times["direct"])]
    print(f"page/direct  min {min(ratios):.2f}  median {statistics.median(ratios):.2f}  max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
