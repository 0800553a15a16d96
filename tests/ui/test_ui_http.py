"""The review page and the inspector over HTTP (Starlette's TestClient, and ``tracefence ui`` run for real).

The browser tests are in ``test_ui_browser.py``; here: every example case through the inspector against
``tracefence plan``, the refusals (token, origin, CSRF token, size, host), and that an upload is neither
stored nor logged.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from case_spans import find_cases
from conftest import ROOT, SHARED_CASES
from otel_tracefence.cli import main
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.ui import create_app, open_store
from ui_helpers import CLASSES, TOKEN, make_queue, start_ui

BASE = "http://127.0.0.1:8077"  # the TestClient's own origin (its base_url)
SHARED, PROJECT = find_cases(SHARED_CASES, "shared"), find_cases(ROOT / "tests" / "cases", "tests")  # shared: only where ../shared is
CASES = [pytest.param(path, id=case_id) for case_id, path, _ in SHARED + PROJECT]


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
    """The project's own cases always; the shared cases when their folder is there (a clean clone has none)."""
    assert len(PROJECT) >= 2, "the project's example cases are missing"
    if SHARED_CASES.is_dir():
        assert len(SHARED) >= 8, f"the shared cases are missing from {SHARED_CASES}"
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
        "sample-invoice": "injected",
        "sample-keys": "review",
        "sample-page": "static",
        "sample-reads": "dynamic",
        "sample-timeout": "review",
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
    token = csrf(client)
    chunked = client.post("/inspect/plan", content=iter([b"trace_id,call_id,tool\n"] + [b"t,c,x\n"] * 30), headers={"origin": BASE, "x-csrf-token": token})
    assert "content-length" not in chunked.request.headers
    assert chunked.status_code == 413  # counted as it is read, with no length declared
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
        ({"origin": "null", "referer": BASE + "/items/t-timeout"}, form, "refused: the request comes from an opaque origin (Origin: null)"),
        ({"origin": BASE}, {**form, "csrf_token": ""}, "refused: the form's CSRF token is missing or stale"),
        ({"origin": BASE}, {**form, "csrf_token": "0" * 64}, "refused: the form's CSRF token is missing or stale"),
    ]
    for headers, data, message in cases:
        response = client.post("/items/t-timeout/resolve", data=data, headers=headers)
        assert response.status_code == 403, (headers, response.text)
        cookieless = client_for(queue).post("/items/t-timeout/resolve", data=data, headers=headers)  # as a cross-site form is sent
        assert cookieless.status_code == 403 and "set-cookie" not in cookieless.headers  # a refused POST never replaces the session
        assert message in response.text.replace("&#39;", "'"), response.text
    big = client.post("/items/t-timeout/resolve", data={**form, "note": "x" * 70_000}, headers={"origin": BASE})
    assert big.status_code == 413 and "the form is larger than 64 KiB" in big.text
    unsized = client.post("/items/t-timeout/resolve", content=iter([b"resolved_by=m"]), headers={"origin": BASE, "content-type": "application/x-www-form-urlencoded"})
    assert unsized.status_code == 411
    other = client_for(queue)  # another browser: its own session, so this session's token is stale there
    csrf(other, "/")
    assert other.post("/items/t-timeout/resolve", data=form, headers={"origin": BASE}).status_code == 403
    assert queue.get("t-timeout").state == 1  # still open
    ok = client.post("/items/t-timeout/resolve", data=form, headers={"referer": BASE + "/items/t-timeout"})
    assert ok.status_code == 303 and ok.headers["location"] == "/items/t-timeout?resolved=1"
    assert queue.get("t-timeout").resolved_by == "mallory"
    inspect = client.post("/inspect/plan", content=b"x", headers={"origin": "http://evil.example", "x-csrf-token": csrf(client)})
    assert inspect.status_code == 403 and "cross-origin" in inspect.json()["error"]


def test_with_a_review_token_every_page_needs_a_signed_in_session(queue):
    client = client_for(queue, review_token=TOKEN)
    for path in ("/", "/items/t-conflict", "/inspect", "/inspect/sample", "/?class=review"):
        response = client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"] == "/login?" + urllib.parse.urlencode({"next": path})
    token = csrf(client, "/login?next=/items/t-conflict")
    resolve = {"resolved_by": "bob", "note": "n", "csrf_token": token}
    refused = client.post("/items/t-conflict/resolve", data=resolve, headers={"origin": BASE})
    assert refused.status_code == 403 and "refused: sign in with the review token first" in refused.text
    planned = client.post("/inspect/plan", content=b"x", headers={"origin": BASE, "x-csrf-token": token})
    assert planned.status_code == 403 and planned.json() == {"error": "refused: sign in with the review token first (a review token is configured)"}
    for given in ("", "wrong", TOKEN + "x"):
        response = client.post("/login", data={"review_token": given, "next": "/items/t-conflict", "csrf_token": token}, headers={"origin": BASE})
        assert response.status_code == 403 and "refused: that is not the review token" in response.text
    cross = client.post("/login", data={"review_token": TOKEN, "csrf_token": token}, headers={"origin": "http://evil.example"})
    assert cross.status_code == 403 and "cross-origin" in cross.text
    assert client.get("/").status_code == 303
    assert queue.get("t-conflict").state == 1
    old_session = client.cookies.get("tracefence_session_8077")
    signed = client.post("/login", data={"review_token": TOKEN, "next": "/items/t-conflict", "csrf_token": token}, headers={"origin": BASE})
    assert signed.status_code == 303 and signed.headers["location"] == "/items/t-conflict"
    assert client.cookies.get("tracefence_session_8077") != old_session  # a new session at sign-in
    assert client.get("/").status_code == 200
    token = csrf(client, "/items/t-conflict")
    assert 'id="sign-out"' in client.get("/").text
    stale = client.post("/items/t-conflict/resolve", data=resolve, headers={"origin": BASE})
    assert stale.status_code == 403 and "CSRF token is missing or stale" in stale.text  # the pre-sign-in token
    done = client.post("/items/t-conflict/resolve", data={**resolve, "note": "ticket 7 is closed once", "csrf_token": token}, headers={"origin": BASE})
    assert done.status_code == 303
    item = queue.get("t-conflict")
    assert (item.state, item.resolved_by, item.resolution_note) == (2, "bob", "ticket 7 is closed once")
    missing_by = client.post("/items/t-conflict/resolve", data={**resolve, "resolved_by": " ", "csrf_token": token}, headers={"origin": BASE})
    assert missing_by.status_code == 400 and "say who resolved the item" in missing_by.text
    unknown = client.post("/items/nope/resolve", data={**resolve, "csrf_token": token}, headers={"origin": BASE})
    assert unknown.status_code == 404
    out = client.post("/logout", data={"csrf_token": token}, headers={"origin": BASE})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert client.get("/").status_code == 303


def test_a_sign_in_is_bound_to_its_session_and_expires():
    from starlette.requests import Request
    from starlette.responses import Response

    from otel_tracefence.ui.security import SIGN_IN_TTL_S, SessionGuard

    now = [1_800_000_000.0]
    guard = SessionGuard(TOKEN, b"k" * 32, clock=lambda: now[0])
    def request(cookie_map):
        header = "; ".join(f"{k}={v}" for k, v in cookie_map.items())
        return Request({"type": "http", "method": "GET", "path": "/", "headers": [(b"cookie", header.encode())]})

    response = Response()
    guard.sign_in(request({}), TOKEN, response)
    cookies = dict(c.split(";")[0].split("=", 1) for c in response.headers.getlist("set-cookie"))

    assert guard.signed_in(request(cookies))
    assert not guard.signed_in(request({**cookies, "tracefence_session": SessionGuard.new_session()}))  # another session
    assert not guard.signed_in(request({"tracefence_session": cookies["tracefence_session"]}))
    issued, mac = cookies["tracefence_signed_in"].split(".")
    assert not guard.signed_in(request({**cookies, "tracefence_signed_in": f"{int(issued) + 1}.{mac}"}))  # forged time
    assert not SessionGuard(TOKEN, b"j" * 32, clock=lambda: now[0]).signed_in(request(cookies))  # a restart: another key
    now[0] += SIGN_IN_TTL_S
    assert guard.signed_in(request(cookies))
    now[0] += 1
    assert not guard.signed_in(request(cookies))
    with pytest.raises(Exception, match="not the review token"):
        guard.sign_in(request({}), "nope", Response())


def test_sign_in_sends_the_browser_back_only_within_the_site():
    from otel_tracefence.ui.app import local_path

    assert local_path("/items/t1?resolved=1") == "/items/t1?resolved=1"
    for target in ("//evil.example/", "/\\evil.example", "https://evil.example/", "evil", "", "/a\\b"):
        assert local_path(target) == "/", target


def test_the_session_cookie_is_strict_and_pages_carry_security_headers(queue):
    client = client_for(queue)
    page = client.get("/")
    cookie = page.headers["set-cookie"]
    assert "tracefence_session_8077=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
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
    assert html.count('<td class="mono">tk-1</td>') == 2 and html.count("<code>idempotency_key_conflict</code>") == 2
    assert '"state": "closed"' not in html and "closed" not in html  # no raw argument value: none was stored
    assert client.get("/items/unknown").status_code == 404
    with pytest.raises(ValueError, match="must start with http:// or https://"):
        create_app(queue, trace_url_template="javascript:alert('{trace_id}')")


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
    assert "refusing to start: the review page would listen on 0.0.0.0:0, beyond loopback, with no review token" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "otel_tracefence", "ui", "--db", str(tmp_path / "none.db")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no review database there" in missing.stderr


def test_tracefence_ui_on_a_taken_port_says_so_in_one_line_before_announcing_the_page(tmp_path):
    import socket

    db = make_queue(tmp_path / "review.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run([sys.executable, "-m", "otel_tracefence", "ui", "--db", str(db), "--listen", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert (refused.returncode, refused.stderr) == (2, f"tracefence ui: cannot listen on 127.0.0.1:{port}: Address already in use\n")


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
        assert marker in answer["output"] and json.loads(answer["output"])["replayClass"] == "review"
    finally:
        log = ui.stop()
    assert "POST /inspect/plan" in log  # the access log is on, and it holds no body
    assert marker not in log
    for path in tmp_path.glob("review.db*"):
        assert marker.encode() not in path.read_bytes(), path
    with SQLiteReviewStore(db, create=False) as store:
        items, _ = store.list(page_size=100)
    assert sorted(i.trace_id for i in items) == sorted(CLASSES)


def test_the_item_page_shows_the_stores_history(tmp_path):
    """The item page shows the store's append-only history: resolving twice adds two events."""
    db = make_queue(tmp_path / "review.db")
    with SQLiteReviewStore(db, create=False) as store:
        client = client_for(store)
        token = csrf(client, "/items/t-static")
        for note in ("first look: page p-1 was sent", "checked again: sent once"):
            response = client.post("/items/t-static/resolve", data={"resolved_by": "carol", "note": note, "csrf_token": token}, headers={"origin": BASE})
            assert response.status_code == 303
        html = client.get("/items/t-static").text
        history = re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td><td class=\"verdict\">[^<]+</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td></tr>", html)
        assert [row[1:] for row in history] == [
            ("plan written", "pager", "-", "open", "static"),
            ("resolved", "carol", "first look: page p-1 was sent", "resolved", "static"),
            ("resolved", "carol", "checked again: sent once", "resolved", "static"),
        ]
        assert [e.kind for e in store.history("t-static")] == ["plan_written", "resolved", "resolved"]


def test_a_trace_id_with_a_slash_is_shown_and_resolved(tmp_path):
    from otel_tracefence.pipeline.documents import plan_document

    db = make_queue(tmp_path / "review.db")
    with SQLiteReviewStore(db, create=False) as store:
        text = '{"trace_id": "run/42", "call_id": "c1", "tool": "x", "effect": "write", "status": "timeout"}'
        store.upsert(plan_document(text, "ndjson", TraceFenceConfig()).plans[0])
        client = client_for(store)
        assert 'href="/items/run/42"' in client.get("/").text
        assert client.get("/items/run/42").status_code == 200
        token = csrf(client, "/items/run/42")
        done = client.post("/items/run/42/resolve", data={"resolved_by": "dan", "csrf_token": token}, headers={"origin": BASE})
        assert done.status_code == 303 and done.headers["location"] == "/items/run%2F42?resolved=1"
        assert client.get(done.headers["location"]).status_code == 200
        assert store.get("run/42").resolved_by == "dan"


def test_ui_settings_come_from_the_config_module(monkeypatch, tmp_path):
    from otel_tracefence.core.config import ConfigError, load_config

    monkeypatch.setenv("OTEL_TRACEFENCE_UI__LISTEN", "127.0.0.1:9001")
    monkeypatch.setenv("OTEL_TRACEFENCE_UI__TRACE_URL_TEMPLATE", "http://localhost:16686/trace/{trace_id}")
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__UI_ENDPOINT", "127.0.0.1:8078")
    config = load_config()
    assert (config.ui.listen, config.ui.trace_url_template, config.ui.insecure, config.ui.max_inspect_bytes) == (
        "127.0.0.1:9001", "http://localhost:16686/trace/{trace_id}", False, 16 * 1024 * 1024)
    assert config.service.ui_endpoint == "127.0.0.1:8078"
    for name, value, message in (
        ("OTEL_TRACEFENCE_UI__TRACE_URL_TEMPLATE", "http://localhost:16686/trace/", "must hold {trace_id}"),
        ("OTEL_TRACEFENCE_UI__TRACE_URL_TEMPLATE", "javascript:alert({trace_id})", "must start with http:// or https://"),
        ("OTEL_TRACEFENCE_UI__LISTEN", "nowhere", "expected host:port"),
    ):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config()
        monkeypatch.delenv(name)


def test_the_page_beyond_loopback_needs_a_token_or_insecure():
    from otel_tracefence.core.config import ConfigError, ServiceSettings, UiSettings
    from otel_tracefence.ui.security import check_ui_exposure, served_hosts

    open_config = TraceFenceConfig()
    assert check_ui_exposure("127.0.0.1:8077", open_config) is None
    with pytest.raises(ConfigError, match="refusing to start: the review page would listen on 0.0.0.0:8077, beyond loopback, with no review token"):
        check_ui_exposure("0.0.0.0:8077", open_config)
    assert check_ui_exposure("0.0.0.0:8077", TraceFenceConfig(service=ServiceSettings(review_token=TOKEN))) is None
    warning = check_ui_exposure("0.0.0.0:8077", TraceFenceConfig(ui=UiSettings(insecure=True)))
    assert warning.endswith("(allowed by ui.insecure)")
    assert served_hosts("127.0.0.1:8077") == ["127.0.0.1", "localhost"]
    assert served_hosts("0.0.0.0:8077") is None
    assert served_hosts("[::1]:8077") == ["127.0.0.1", "[::1]", "localhost"]  # as the Host header carries it


def test_a_planning_defect_logs_no_part_of_the_input(monkeypatch, caplog):
    import otel_tracefence.ui.app as ui_app

    def broken(data, config, **options):
        raise RuntimeError(f"cannot plan {data[:40]!r}")

    monkeypatch.setattr(ui_app, "inspect", broken)
    client = client_for(None)
    with caplog.at_level("DEBUG"):
        response = plan_via_page(client, b"trace_id,call_id\nsecret-row-value,c1\n")
    assert response.status_code == 500
    assert response.json() == {"error": "planning failed (RuntimeError); nothing was planned"}
    assert "planning failed with RuntimeError" in caplog.text and "secret-row-value" not in caplog.text


def test_serve_serves_the_page_on_ui_endpoint_from_its_own_queue(tmp_path, upstream):
    """``service.ui_endpoint``: ``tracefence serve`` serves the page from the queue it writes; the exposure rule holds."""
    from otel_tracefence.core.config import ConfigError
    from otel_tracefence.service.server import TraceFenceService
    from service_helpers import Client, agent_trace, service_config, wait_for

    with pytest.raises(ConfigError, match="refusing to start: the review page would listen on 0.0.0.0:0, beyond loopback, with no review token"):
        TraceFenceService(service_config(upstream, tmp_path / "refused.db", ui_endpoint="0.0.0.0:0"))
    service = TraceFenceService(service_config(upstream, tmp_path / "review.db", ui_endpoint="127.0.0.1:0"))
    service.start()
    try:
        client = Client(service.port)
        trace_id = agent_trace(client)
        client.shutdown()
        wait_for(lambda: service.store.get(trace_id), what="the review item")
        with urllib.request.urlopen(f"http://127.0.0.1:{service.ui_port}/?state=open") as answer:
            page = answer.read().decode()
        assert answer.status == 200
        row = page[page.index(f'<tr data-trace-id="{trace_id}">') :].split("</tr>")[0]
        assert re.findall(r"<td(?: class=\"[^\"]*\")?>([^<]*)</td>", row)[:3] == ["open", "review", "agent"]
    finally:
        service.stop()
    assert service.ui_port and service._ui_server is not None


def test_the_page_reads_and_resolves_a_postgresql_queue(pg_url):
    """``tracefence ui --db postgresql://...``: the page lists, shows and resolves the shared queue."""
    make_queue(pg_url)
    store = open_store(pg_url)
    try:
        client = client_for(store)
        listed = re.findall(r'<tr data-trace-id="([^"]+)">', client.get("/").text)
        assert listed == list(reversed(list(CLASSES)))
        token = csrf(client, "/items/t-timeout")
        response = client.post("/items/t-timeout/resolve", data={"resolved_by": "dana", "note": "checked in billing", "csrf_token": token}, headers={"origin": BASE})
        assert response.status_code == 303
    finally:
        store.close()
    with open_store(pg_url) as again:
        item = again.get("t-timeout")
        assert (item.state, item.resolved_by, item.resolution_note) == (2, "dana", "checked in billing")
        assert [e.kind for e in again.history("t-timeout")] == ["plan_written", "resolved"]


def test_the_inspector_refuses_an_input_that_plans_to_more_steps_than_the_page_shows(queue):
    config = TraceFenceConfig.model_validate({"ui": {"max_inspect_steps": 3}})
    rows = "\n".join(f'{{"trace_id": "t-{i % 2}", "call_id": "c{i}", "tool": "invoice.create", "effect": "write", "status": "ok", "idempotency_key": "k{i}"}}' for i in range(4))
    client = client_for(queue, config=config)
    answer = plan_via_page(client, rows.encode(), input_format="ndjson")
    assert (answer.status_code, answer.json()) == (413, {"error": "the input plans to 4 steps, more than the page shows (3, ui.max_inspect_steps): plan it with `tracefence plan`; nothing is shown"})
    assert plan_via_page(client, rows.encode().rsplit(b"\n", 1)[0], input_format="ndjson").status_code == 200


def test_the_page_says_503_when_the_queue_file_is_gone(tmp_path):
    """A review file deleted under ``tracefence ui``: a page saying the queue cannot be read, not a bare 500."""
    db = make_queue(tmp_path / "review.db")
    store = SQLiteReviewStore(db, create=False)
    try:
        for path in tmp_path.glob("review.db*"):
            path.unlink()
        answer = client_for(store).get("/")
        assert answer.status_code == 503
        assert "the review queue cannot be read right now" in answer.text
    finally:
        store.close()


def test_a_long_unknown_trace_id_is_not_echoed_in_full(queue):
    answer = client_for(queue).get("/items/" + "x" * 5000)
    assert answer.status_code == 404
    assert f"no review item for trace id &#39;{'x' * 100}&#39;... (5000 characters)" in answer.text and "x" * 101 not in answer.text


def test_two_pages_on_one_host_keep_their_sessions_apart(tmp_path):
    """Browsers share a host's cookies between ports (RFC 6265, 8.5): signing in to one page must not sign
    the other out (``tracefence ui`` beside ``service.ui_endpoint``)."""
    db = make_queue(tmp_path / "review.db")
    with SQLiteReviewStore(db, create=False) as store:
        first = TestClient(create_app(store, review_token="token-a"), base_url="http://127.0.0.1:8077", follow_redirects=False)
        second = TestClient(create_app(store, review_token="token-b"), base_url="http://127.0.0.1:8078", follow_redirects=False)
        for client, token in ((first, "token-a"), (second, "token-b")):
            for name, value in (first if client is second else second).cookies.items():  # one browser: one cookie jar
                client.cookies.set(name, value)
            csrf_token = csrf_of(client.get("/login"))
            signed_in = client.post("/login", data={"review_token": token, "csrf_token": csrf_token}, headers={"origin": str(client.base_url).rstrip("/")})
            assert signed_in.status_code == 303
        for name, value in second.cookies.items():
            first.cookies.set(name, value)
        assert first.get("/").status_code == 200  # still signed in to the first page
        assert sorted({name for name in first.cookies.keys() if name.startswith("tracefence_")}) == [
            "tracefence_session_8077", "tracefence_session_8078", "tracefence_signed_in_8077", "tracefence_signed_in_8078",
        ]


def csrf_of(page) -> str:
    return re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)


def test_tracefence_ui_names_an_unusable_database_once_and_masks_a_password(tmp_path, capsys):
    empty = tmp_path / "empty.db"
    empty.touch()
    assert main(["ui", "--db", str(empty)]) == 2
    assert capsys.readouterr().err.strip() == f"tracefence ui: {empty}: not a tracefence review database (no review schema)"
    assert main(["ui", "--db", "postgresql://u:hunter2@127.0.0.1:1/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracefence ui: postgresql://u:***@127.0.0.1:1/x: ") and "hunter2" not in err
