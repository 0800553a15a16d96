"""The review page and the inspector in a real browser: Debian's Chromium driven by Playwright,
against ``tracefence ui`` started on 127.0.0.1 by the test. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from conftest import SHARED_CASES
from otel_tracefence.review.store import SQLiteReviewStore
from ui_helpers import CHROMIUM_ARGS, TOKEN, ensure_chromium, free_port, make_queue, screenshot, start_ui


@pytest.fixture(scope="module")
def browser():
    executable = ensure_chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


@pytest.fixture
def ui(tmp_path):
    """``tracefence ui`` with a review token and a Jaeger trace link, on a fresh queue."""
    db = make_queue(tmp_path / "review.db")
    server = start_ui(db, tmp_path, "--review-token", TOKEN, "--trace-url-template", "http://localhost:16686/trace/{trace_id}")
    server.db = db
    yield server
    server.stop()


@pytest.fixture
def open_ui(tmp_path):
    """``tracefence ui`` with no review token: only the origin and CSRF checks stand between a POST and the queue."""
    db = make_queue(tmp_path / "review.db")
    server = start_ui(db, tmp_path)
    server.db = db
    yield server
    server.stop()


def sign_in(page, url: str, token: str = TOKEN) -> None:
    """Go to ``url``, which sends the browser to the sign-in page, and sign in with ``token``."""
    page.goto(url)
    page.wait_for_url("**/login?next=**")
    page.fill("#login-form input[name=review_token]", token)
    page.click("#login-form button[type=submit]")


def rows(page) -> list[str]:
    return page.locator("#queue tbody tr").evaluate_all("rows => rows.map(r => r.dataset.traceId)")


def test_list_and_filter(page, ui):
    sign_in(page, ui.url + "/")
    page.wait_for_url(ui.url + "/")
    assert rows(page) == ["t-injected", "t-static", "t-timeout", "t-conflict"]
    screenshot(page, "queue")
    page.select_option("select[name=class]", "review")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**/?state=open&class=review&service=&q=&order=newest")  # the form's fields, the order last
    assert rows(page) == ["t-timeout", "t-conflict"]
    page.select_option("select[name=class]", "")
    page.fill("input[name=service]", "pager")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**service=pager&q=&order=newest")
    assert rows(page) == ["t-injected", "t-static"]
    page.select_option("select[name=state]", "resolved")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**state=resolved**")
    expect(page.locator("#empty")).to_have_text("No review items match.")
    page.goto(ui.url + "/?page_size=3")
    assert rows(page) == ["t-injected", "t-static", "t-timeout"]
    page.click("#next-page")
    page.wait_for_url("**page_token=**")
    assert rows(page) == ["t-conflict"]
    screenshot(page, "queue-next-page")


def test_the_queue_with_the_keyboard_alone_and_a_bulk_resolve(page, ui):
    sign_in(page, ui.url + "/")
    page.wait_for_url(ui.url + "/")
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator("#queue tbody tr.current")).to_have_attribute("data-trace-id", "t-static")
    page.keyboard.press("x")
    page.keyboard.press("j")
    page.keyboard.press("x")  # t-timeout ticked too
    page.keyboard.press("k")
    expect(page.locator("#queue tbody tr.current")).to_have_attribute("data-trace-id", "t-static")
    page.keyboard.press("/")
    expect(page.locator("#q")).to_be_focused()
    page.keyboard.type("j")  # typed into the search box, not a move
    expect(page.locator("#q")).to_have_value("j")
    page.locator("#q").fill("")
    page.locator("#bulk-by").fill("ada")
    page.select_option("#bulk-verdict", "absent")
    page.locator("#bulk-note").fill("no charge in the ledger")
    screenshot(page, "queue-bulk-resolve")
    page.click("#bulk-resolve")
    page.wait_for_url("**/?resolved=2")
    expect(page.locator("#bulk-resolved")).to_have_text("2 item(s) resolved.")
    assert rows(page) == ["t-injected", "t-conflict"]
    page.goto(ui.url + "/?order=oldest")
    assert rows(page) == ["t-conflict", "t-injected"]
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url("**/items/t-conflict")
    with SQLiteReviewStore(ui.db, create=False) as store:
        assert [(store.get(t).resolved_by, store.get(t).verdict_by) for t in ("t-static", "t-timeout")] == [("ada", "ada")] * 2


def test_the_queue_and_an_item_fit_375_px_with_every_control_labelled(browser, ui):
    context = browser.new_context(viewport={"width": 375, "height": 740})
    page = context.new_page()
    try:
        sign_in(page, ui.url + "/")
        page.wait_for_url(ui.url + "/")
        for path in ("/", "/items/t-conflict"):
            page.goto(ui.url + path)
            assert page.evaluate("document.documentElement.scrollWidth") <= 375, path  # wide tables scroll in their own box
            unlabelled = page.evaluate(
                """[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
                   .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !(e.tagName === 'BUTTON' && e.textContent.trim()))
                   .map(e => e.outerHTML)"""
            )
            assert unlabelled == [], (path, unlabelled)
            screenshot(page, "narrow-" + ("queue" if path == "/" else "item"))
    finally:
        context.close()


def test_open_an_item_and_follow_a_related_call(page, ui):
    sign_in(page, ui.url + "/")
    page.wait_for_url(ui.url + "/")
    page.click("a[href='/items/t-conflict']")
    page.wait_for_url("**/items/t-conflict")
    expect(page.locator("#class")).to_have_text("review")
    expect(page.locator("tr#call-a1 td.decision")).to_have_text("conflict")
    expect(page.locator("#trace-link")).to_have_attribute("href", "http://localhost:16686/trace/t-conflict")
    page.locator("tr#call-a1 a.related", has_text="a2").click()
    page.wait_for_url("**/items/t-conflict#call-a2")
    assert page.evaluate("document.querySelector('tr:target').dataset.callId") == "a2"
    screenshot(page, "item-related-call")


def test_resolve_with_a_note_refused_without_the_token(page, ui):
    sign_in(page, ui.url + "/items/t-timeout", token="not-the-token")
    expect(page.locator("#error-message")).to_have_text("refused: that is not the review token")
    screenshot(page, "sign-in-refused")
    refused = page.request.post(ui.url + "/items/t-timeout/resolve", form={"resolved_by": "mallory", "note": "x", "csrf_token": "x"}, headers={"origin": ui.url})
    assert refused.status == 403 and "refused: sign in with the review token first" in refused.text()
    with SQLiteReviewStore(ui.db, create=False) as store:
        assert store.get("t-timeout").state == 1  # still open
    sign_in(page, ui.url + "/items/t-timeout")
    page.wait_for_url(ui.url + "/items/t-timeout")
    form = page.locator("#resolve-form")
    form.locator("input[name=resolved_by]").fill("alice")
    form.locator("textarea[name=note]").fill("invoice in_78 exists once in billing; safe")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/items/t-timeout?resolved=1")
    expect(page.locator("#state")).to_have_text("resolved")
    expect(page.locator("#resolved-by")).to_have_text("alice")
    expect(page.locator("#note")).to_have_text("invoice in_78 exists once in billing; safe")
    screenshot(page, "item-resolved")
    with SQLiteReviewStore(ui.db, create=False) as store:
        item = store.get("t-timeout")
        assert (item.state, item.resolved_by, item.resolution_note) == (2, "alice", "invoice in_78 exists once in billing; safe")
    history = page.locator("#history tbody tr")
    expect(history.last).to_contain_text("resolved")
    expect(history.last).to_contain_text("alice")
    expect(history.last).to_contain_text("invoice in_78 exists once in billing; safe")


class _AttackerPage(http.server.BaseHTTPRequestHandler):
    """Another origin whose page posts a resolve form to the review page (a cross-site request forgery)."""

    target = ""

    def do_GET(self):  # noqa: N802
        body = (
            f'<form id="f" method="post" action="{self.target}/items/t-conflict/resolve">'
            '<input name="resolved_by" value="mallory"><input name="note" value="forged">'
            '<input name="csrf_token" value="guess"></form>'
            "<button id=go onclick=\"document.getElementById('f').submit()\">go</button>"
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_cross_origin_post_is_refused(page, open_ui):
    ui = open_ui
    page.goto(ui.url + "/items/t-conflict")  # the reviewer has a session on the page
    _AttackerPage.target = ui.url
    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _AttackerPage)
    thread = threading.Thread(target=attacker.serve_forever, daemon=True)
    thread.start()
    try:
        page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
        page.click("#go")
        expect(page.locator("#error-message")).to_contain_text(f"refused: cross-origin request from http://127.0.0.1:{attacker.server_address[1]}")
        screenshot(page, "cross-origin-refused")
    finally:
        attacker.shutdown()
        attacker.server_close()
    with SQLiteReviewStore(ui.db, create=False) as store:
        assert store.get("t-conflict").state == 1


def _cli_json(path: Path) -> bytes:
    proc = subprocess.run([sys.executable, "-m", "otel_tracefence", "plan", str(path), "--format", "json"], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("case", ["charge_retry.otlp.json", "key_conflict.ndjson"])
def test_inspector_file_export_matches_tracefence_plan(page, ui, case, tmp_path):
    path = SHARED_CASES / case
    if not path.exists():
        pytest.skip(f"{path} is not there (../shared/cases)")
    sign_in(page, ui.url + "/inspect")
    page.wait_for_url(ui.url + "/inspect")
    page.set_input_files("#file", str(path))
    expect(page.locator("#result")).to_have_attribute("data-state", "planned")
    expected = _cli_json(path)
    plans = [json.loads(line) for line in expected.decode().splitlines()]
    for plan in plans:
        section = page.locator(f"section.trace[data-trace-id='{plan['traceId']}']")
        expect(section.locator("h2 .class")).to_have_text(plan["replayClass"])
        assert section.locator("table.plan tbody tr").count() == len(plan["steps"])
    screenshot(page, f"inspector-{path.stem}")
    with page.expect_download() as download:
        page.click("#export")
    saved = tmp_path / "export.json"
    download.value.save_as(saved)
    assert saved.read_bytes() == expected
    page.click("#clear")
    expect(page.locator("#result")).to_be_empty()
    expect(page.locator("#export")).to_be_disabled()
    assert page.locator("#input").input_value() == ""


def test_inspector_sample_paste_and_rejection(page, ui, tmp_path):
    sign_in(page, ui.url + "/inspect")
    page.wait_for_url(ui.url + "/inspect")
    page.click("#sample")
    expect(page.locator("#result")).to_have_attribute("data-state", "planned")
    expect(page.locator("section.trace[data-trace-id='sample-keys'] h2 .class")).to_have_text("review")
    expect(page.locator("section.trace[data-trace-id='sample-reads'] h2 .class")).to_have_text("dynamic")
    screenshot(page, "inspector-sample")
    page.fill("#input", "trace_id,call_id,tool,effect,status\nt1,c1,charge,sideways,ok\n")
    page.click("#plan")
    expect(page.locator("#result")).to_have_attribute("data-state", "rejected")
    expect(page.locator("#messages li").first).to_contain_text("line 2: effect:")
    expect(page.locator("#messages li").last).to_have_text("rejected, 1 error(s); nothing was planned")
    expect(page.locator("#export")).to_be_disabled()
    screenshot(page, "inspector-rejected")
    # A file dropped on the page (a real DragEvent carrying a File) is planned as its bytes.
    text = "trace_id,call_id,tool,effect,status\nt-drop,c1,read_file,read,ok\n"
    page.evaluate(
        """text => {
            const dt = new DataTransfer();
            dt.items.add(new File([text], "dropped.csv", {type: "text/csv"}));
            document.getElementById("drop").dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
        }""",
        text,
    )
    expect(page.locator("#source")).to_have_text("dropped.csv: planned")
    expect(page.locator("section.trace[data-trace-id='t-drop'] h2 .class")).to_have_text("dynamic")
    expect(page.locator("#messages li")).to_have_count(0)
