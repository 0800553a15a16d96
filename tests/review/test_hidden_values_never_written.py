"""No argument or result value the policy hides ever reaches the review database (its file and its write-ahead
log), a log line, ``tracefence review``'s output or any page of the review UI (issue 26). Hidden: every value by
default (hashes only); under ``store_raw_values``, the values under the redaction's keys. Each value of the traces
(tests/span_queue.py) holds a marker; the search reads the bytes, and finds the values that are not hidden (a search
that could not find anything would prove nothing)."""

from __future__ import annotations

import logging
import urllib.parse

import pytest
from starlette.testclient import TestClient

from otel_tracefence.cli import main
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app
from span_queue import CONFLICT, INVOICE, MARKERS, SECRET_MARKERS, write_through_processor

PAGES = ("/", "/?state=all", "/?q=invoice", "/?q=tk-1", "/?order=oldest", f"/items/{INVOICE}", f"/items/{CONFLICT}", "/inspect")


@pytest.mark.parametrize("raw", [False, True], ids=["hashes-only", "store-raw-values"])
def test_no_hidden_value_in_the_db_its_wal_the_logs_the_cli_or_a_page(tmp_path, caplog, capsys, raw):
    db = tmp_path / "review.db"
    keeper = SQLiteReviewStore(db)  # held open by the test: the WAL stays beside the file to be searched
    try:
        with caplog.at_level(logging.DEBUG):
            write_through_processor(str(db), store_raw_values=raw)
            client = TestClient(create_app(keeper), base_url="http://127.0.0.1:8077")
            pages = {path: client.get(path) for path in PAGES}
            for code in (main(["review", "show", INVOICE, "--db", str(db)]), main(["review", "show", CONFLICT, "--db", str(db), "--format", "json"]),
                         main(["review", "list", "--db", str(db), "--state", "all"])):  # fmt: skip
                assert code == 0
        written = {name: (tmp_path / name).read_bytes() for name in ("review.db", "review.db-wal")}
    finally:
        keeper.close()
    assert all(r.status_code == 200 for r in pages.values()), {p: r.status_code for p, r in pages.items()}
    assert len(written["review.db-wal"]) > 0
    cli = capsys.readouterr()
    places = {**written, **{f"page {p}": r.content for p, r in pages.items()}, "logs": caplog.text.encode(), "cli": (cli.out + cli.err).encode()}
    hidden = SECRET_MARKERS + (() if raw else MARKERS)
    found = {(marker, where) for marker in hidden for where, data in places.items() if marker.encode() in data}
    found |= {(marker, where) for marker in hidden for where, data in places.items() if urllib.parse.quote(marker).encode() in data}
    assert found == set()
    # The search reads what was written: the idempotency key (kept by design) is in the file or its WAL and on the
    # page; the values the policy shows are found where they are shown.
    assert any(b"inv-1" in data for data in written.values()) and b"inv-1" in pages[f"/items/{INVOICE}"].content
    shown = {(marker, where) for marker in MARKERS for where in (f"page /items/{INVOICE}", f"page /items/{CONFLICT}") if marker.encode() in places[where]}
    if raw:
        assert shown == {(MARKERS[0], f"page /items/{INVOICE}"), (MARKERS[3], f"page /items/{INVOICE}"),
                         (MARKERS[1], f"page /items/{CONFLICT}"), (MARKERS[2], f"page /items/{CONFLICT}")}  # fmt: skip
    else:
        assert shown == set()
