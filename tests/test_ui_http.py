"""The review page and the inspector over HTTP (Starlette's TestClient, and ``tracefence ui`` run for real).

The browser tests are in ``test_ui_browser.py``; here: every example case through the inspector against
``tracefence plan``, the refusals (token, origin, CSRF token, size, host), and that an upload is neither
stored nor logged.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from case_spans import find_cases
from conftest import ROOT, SHARED_CASES
from otel_tracefence.cli import main
from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app, open_store
from ui_helpers import CLASSES, TOKEN, make_queue, start_ui

BASE = "http://127.0.0.1:8077"  # the TestClient's own origin (its base_url)
CASES = [pytest.param(path, id=case_id) for case_id, path, _ in find_cases(SHARED_CASES, "shared") + find_cases(ROOT / "tests" / "cases", "tests")]


@pytest.fixture
def queue(tmp_path):
    store = SQLiteReviewStore(make_queue(tmp_path / "review.db"), create=False)
    yield store
    store.close()


def client_for(store, **options) -> TestClient:
    return TestClient(create_app(store, **options), base_url=BASE, follow_redirects=False)


def csrf(client: TestClient, path: str = "/inspect") -> str:
    """Load a page (which sets the session cookie) and return the CSRF token it carries."""
    page = client.get(path)
    assert page.status_code == 200
    return re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)


def plan_via_page(client: TestClient, data: bytes, **params: str):
    token = csrf(client)
    return client.post("/inspect/plan", content=data, params=params, headers={"origin": BASE, "x-csrf-token": token})


def cli_plan(path: Path, capsys) -> tuple[int, str, list[str]]:
    """``tracefence plan PATH`` run in this process: exit code, standard output, standard-error lines without the lead."""
    code = main(["plan", str(path)])
    out, err = capsys.readouterr()
    lead = f"tracefence plan: {path}: "
    lines = err.splitlines()
    assert all(line.startswith(lead) for line in lines), err
    return code, out, [line[len(lead):] for line in lines]


def test_every_case_planned_by_the_inspector_as_by_tracefence_plan(capsys):
    assert len(CASES) >= 10, "the example cases are missing"
    client = client_for(None)
    for param in CASES:
        path = param.values[0]
        code, out, messages = cli_plan(path, capsys)
        response = plan_via_page(client, path.read_bytes())
        assert response.status_code == 200, (path, response.text)
        got = response.json()
        assert got["output"].encode("utf-8") == out.encode("utf-8"), path
        assert got["messages"] == messages, path
        assert got["rejected"] is (code == 2), path
        for plan in map(json.loads, out.splitlines()):
            assert f'data-trace-id="{plan["traceId"]}"' in got["html"], path


def test_the_malformed_case_is_rejected_with_the_cli_messages(capsys):
    path = SHARED_CASES / "malformed.csv"
    if not path.exists():
        pytest.skip(f"{path} is not there (../shared/cases)")
    code, out, messages = cli_plan(path, capsys)
    got = plan_via_page(client_for(None), path.read_bytes()).json()
    assert code == 2 and out == ""
    assert got == {"output": "", "messages": messages, "rejected": True, "html": ""}
    assert got["messages"][-1].startswith("rejected, ") and got["messages"][-1].endswith("error(s); nothing was planned")


def test_unreadable_input_says_what_the_cli_says(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"trace_id,call_id\n\xff\xfe\n")
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    got = plan_via_page(client_for(None), bad.read_bytes()).json()
    assert got["rejected"] and got["output"] == ""
    assert got["messages"] == ["line 2: invalid UTF-8 at byte 17; nothing was planned"]
    assert err == f"tracefence plan: {bad}: {got['messages'][0]}"


def test_the_sample_is_planned_as_tracefence_plan_plans_it(capsys):
    client = client_for(None)
    sample = client.get("/inspect/sample")
    assert sample.status_code == 200
    path = ROOT / "otel_tracefence" / "ui" / "static" / "sample.ndjson"
    assert sample.content == path.read_bytes()
    code, out, _ = cli_plan(path, capsys)
    got = plan_via_page(client, sample.content).json()
    assert code == 0 and got["output"] == out
    classes = {p["traceId"]: p["replayClass"] for p in map(json.loads, out.splitlines())}
    assert classes == {
        "sample-invoice": "REPLAY_CLASS_INJECTED",
        "sample-keys": "REPLAY_CLASS_REVIEW",
        "sample-page": "REPLAY_CLASS_STATIC",
        "sample-reads": "REPLAY_CLASS_DYNAMIC",
        "sample-timeout": "REPLAY_CLASS_REVIEW",
    }


def test_inspector_options_are_the_cli_options(capsys):
    """``--input-format`` and ``--on-malformed`` have their command-line meaning."""
    path = SHARED_CASES / "truncated_arguments.otlp.json"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    assert main(["plan", str(path), "--on-malformed", "reject"]) == 2
    err = capsys.readouterr().err
    got = plan_via_page(client_for(None), path.read_bytes(), on_malformed="reject", input_format="otlp-json").json()
    assert got["rejected"] and got["output"] == ""
    assert [line.split(": ", 2)[2] for line in err.splitlines()] == got["messages"]
    bad = plan_via_page(client_for(None), b"x", input_format="yaml")
    assert bad.status_code == 400 and "input format 'yaml'" in bad.json()["error"]


def test_an_upload_past_the_limit_is_refused_with_413():
    client = client_for(None, max_inspect_bytes=100)
    response = plan_via_page(client, b"trace_id,call_id,tool\n" + b"t,c,x\n" * 30)
    assert response.status_code == 413
    assert response.json() == {"error": "the input is larger than 100 bytes (ui.max_inspect_bytes): nothing was planned"}
    assert plan_via_page(client, b"trace_id,call_id,tool,effect\nt,c,x,read\n").status_code == 200


def test_a_post_from_another_origin_or_without_its_csrf_token_is_refused(queue):
    client = client_for(queue)
    token = csrf(client, "/items/t-timeout")
    form = {"resolved_by": "mallory", "note": "x", "csrf_token": token}
    cases = [
        ({"origin": "http://evil.example"}, form, "refused: cross-origin request from http://evil.example; only pages of http://127.0.0.1:8077 may post here"),
        ({"origin": "http://127.0.0.1:9999"}, form, "refused: cross-origin request from http://127.0.0.1:9999"),
        ({"referer": "http://evil.example/page"}, form, "refused: cross-origin request from http://evil.example"),
        ({}, form, "refused: the request names no origin"),
        ({"origin": BASE}, {**form, "csrf_token": ""}, "refused: the form's CSRF token is missing or stale"),
        ({"origin": BASE}, {**form, "csrf_token": "0" * 64}, "refused: the form's CSRF token is missing or stale"),
    ]
    for headers, data, message in cases:
        response = client.post("/items/t-timeout/resolve", data=data, headers=headers)
        assert response.status_code == 403, (headers, response.text)
        assert message in response.text.replace("&#39;", "'"), response.text
    other = client_for(queue)  # another browser: its own session, so this session's token is stale there
    csrf(other, "/")
    assert other.post("/items/t-timeout/resolve", data=form, headers={"origin": BASE}).status_code == 403
    assert queue.get("t-timeout").state == 1  # still open
    ok = client.post("/items/t-timeout/resolve", data=form, headers={"referer": BASE + "/items/t-timeout"})
    assert ok.status_code == 303 and ok.headers["location"] == "/items/t-timeout?resolved=1"
    assert queue.get("t-timeout").resolved_by == "mallory"
    inspect = client.post("/inspect/plan", content=b"x", headers={"origin": "http://evil.example", "x-csrf-token": csrf(client)})
    assert inspect.status_code == 403 and "cross-origin" in inspect.json()["error"]


def test_resolving_needs_the_review_token_when_one_is_configured(queue):
    client = client_for(queue, review_token=TOKEN)
    token = csrf(client, "/items/t-conflict")
    assert 'name="review_token"' in client.get("/items/t-conflict").text
    for given in ("", "wrong", TOKEN + "x"):
        response = client.post("/items/t-conflict/resolve", data={"resolved_by": "bob", "note": "n", "csrf_token": token, "review_token": given}, headers={"origin": BASE})
        assert response.status_code == 403
        assert "refused: a review token is configured and this form did not carry it" in response.text
    assert queue.get("t-conflict").state == 1
    missing_by = client.post("/items/t-conflict/resolve", data={"resolved_by": " ", "note": "n", "csrf_token": token, "review_token": TOKEN}, headers={"origin": BASE})
    assert missing_by.status_code == 400 and "say who resolved the item" in missing_by.text
    done = client.post("/items/t-conflict/resolve", data={"resolved_by": "bob", "note": "ticket 7 is closed once", "csrf_token": token, "review_token": TOKEN}, headers={"origin": BASE})
    assert done.status_code == 303
    item = queue.get("t-conflict")
    assert (item.state, item.resolved_by, item.resolution_note) == (2, "bob", "ticket 7 is closed once")
    unknown = client.post("/items/nope/resolve", data={"resolved_by": "bob", "csrf_token": token, "review_token": TOKEN}, headers={"origin": BASE})
    assert unknown.status_code == 404


def test_the_session_cookie_is_strict_and_pages_carry_security_headers(queue):
    client = client_for(queue)
    page = client.get("/")
    cookie = page.headers["set-cookie"]
    assert "tracefence_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


def test_queue_filters_and_pages(queue):
    client = client_for(queue)
    rows = lambda html: re.findall(r'<tr data-trace-id="([^"]+)"', html)  # noqa: E731
    assert rows(client.get("/").text) == ["t-injected", "t-static", "t-timeout", "t-conflict"]
    assert rows(client.get("/?class=review").text) == ["t-timeout", "t-conflict"]
    assert rows(client.get("/?service=pager").text) == ["t-injected", "t-static"]
    assert rows(client.get("/?state=resolved").text) == []
    first = client.get("/?page_size=3")
    assert rows(first.text) == ["t-injected", "t-static", "t-timeout"]
    next_url = re.search(r'href="([^"]+)" id="next-page"', first.text).group(1).replace("&amp;", "&")
    assert rows(client.get(next_url).text) == ["t-conflict"]
    assert client.get("/?state=closed").status_code == 400
    assert client.get("/?page_token=garbage").status_code == 400


def test_item_page_shows_the_plan_and_links(queue):
    client = client_for(queue, trace_url_template="http://localhost:16686/trace/{trace_id}")
    html = client.get("/items/t-conflict").text
    assert 'href="http://localhost:16686/trace/t-conflict"' in html
    assert 'id="call-a1"' in html and 'href="#call-a2"' in html
    assert "idempotency_key_conflict" in html or "conflict" in html
    assert '"state": "closed"' not in html and "closed" not in html  # no raw argument value: none was stored
    assert client.get("/items/unknown").status_code == 404


def test_a_host_name_other_than_loopback_is_refused(queue):
    client = TestClient(create_app(queue, allowed_hosts=["127.0.0.1", "localhost"]), base_url="http://rebound.example:8077")
    assert client.get("/").status_code == 400


def test_open_store_never_creates_a_database(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_store(str(tmp_path / "none.db"))
    assert not (tmp_path / "none.db").exists()


def test_tracefence_ui_refuses_to_listen_beyond_loopback_without_a_token(tmp_path):
    db = make_queue(tmp_path / "review.db")
    refused = subprocess.run([sys.executable, "-m", "otel_tracefence", "ui", "--db", str(db), "--listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "tracefence ui: refusing to start: the review page would listen on 0.0.0.0:0, beyond loopback, with no review token" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "otel_tracefence", "ui", "--db", str(tmp_path / "none.db")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no review database there" in missing.stderr


def test_an_upload_is_neither_stored_nor_logged(tmp_path):
    """The real ``tracefence ui`` at DEBUG: the inspected text shows in no log line and in no database byte."""
    db = make_queue(tmp_path / "review.db")
    marker = "zq-upload-marker-7f3a"
    ui = start_ui(db, tmp_path, "--log-level", "DEBUG")
    try:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        page = opener.open(ui.url + "/inspect").read().decode()
        token = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page).group(1)
        body = f'{{"trace_id": "t-{marker}", "call_id": "c1", "tool": "{marker}", "effect": "write", "status": "timeout", "arguments": {{"secret": "{marker}"}}}}\n'
        request = urllib.request.Request(ui.url + "/inspect/plan", data=body.encode(), headers={"origin": ui.url, "x-csrf-token": token, "content-type": "application/octet-stream"})
        answer = json.loads(opener.open(request).read())
        assert marker in answer["output"] and json.loads(answer["output"])["replayClass"] == "REPLAY_CLASS_REVIEW"
    finally:
        log = ui.stop()
    assert "POST /inspect/plan" in log  # the access log is on, and it holds no body
    assert marker not in log
    for path in tmp_path.glob("review.db*"):
        assert marker.encode() not in path.read_bytes(), path
    with SQLiteReviewStore(db, create=False) as store:
        items, _ = store.list(page_size=100)
    assert sorted(i.trace_id for i in items) == sorted(CLASSES)
