"""Instructions per span of the ``--workers N`` router's own reading of a request: ``read_request`` (the Export
path's id checks) then ``sharding.split_request`` into 2 workers' parts, the split reading each span's head
(``heads``) or taking the trace ids ``read_request`` read (``ids``, docs/DECISIONS.md 321).

    .venv/bin/python bench/router_split.py [--rounds 2]

bench/service.py's requests (20 of 512 agent-shaped spans); counted by callgrind as bench/service_path.py counts:
a child doing ``--rounds`` rounds less one doing none, over the spans read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUESTS, BATCH = 20, 512


def child(mode: str, rounds: int) -> None:
    sys.path[:0] = [str(HERE.parent), str(HERE)]
    from service import build_requests  # noqa: PLC0415 - this checkout's

    from otel_tracefence.service.otlp_bytes import LazyRequest
    from otel_tracefence.service.otlp_spans import read_request
    from otel_tracefence.service.router import _read_trace_ids
    from otel_tracefence.service.sharding import split_request

    datas = [r.SerializeToString() for r in build_requests(1, REQUESTS * BATCH // 10 + 10, BATCH)[:REQUESTS]]
    for _ in range(rounds):
        for data in datas:
            request = LazyRequest.FromString(data)
            items, _ = read_request(request)
            split_request(request, 2, _read_trace_ids(request, items) if mode == "ids" else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", choices=("heads", "ids"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rounds)
        return
    from callgrind import count_instructions  # noqa: PLC0415 - bench/ is the script's folder

    for mode in ("heads", "ids"):
        counts = [count_instructions([__file__, "--child", mode, "--rounds", str(rounds)]) for rounds in (0, args.rounds)]
        print(f"{mode}: {(counts[1] - counts[0]) / (args.rounds * REQUESTS * BATCH):,.0f} instructions per span (read_request + split_request)")


if __name__ == "__main__":
    main()
