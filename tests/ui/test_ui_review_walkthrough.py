"""Issue 26's done-when, in Chromium (Playwright) against ``tracefence ui`` run for real, on a queue the span
processor wrote from OpenTelemetry SDK spans (tests/span_queue.py), on SQLite and on PostgreSQL: open the queue,
search by tool, open the timed-out invoice, see the waterfall with the tool span marked and the reason explained,
compare the two calls of the key conflict field by field, resolve with a verdict, see it in the history. A
screenshot of each page goes to ``test-artifacts/review-<store>-<page>.png``."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect, sync_playwright

from span_queue import CONFLICT, INVOICE, write_through_processor
from ui_helpers import CHROMIUM_ARGS, ensure_chromium, screenshot, start_ui

JAEGER = "http://localhost:16686/trace/{trace_id}"
PHOENIX = "http://localhost:6006/projects/default/traces/{trace_id}"


@pytest.fixture(scope="module")
def browser():
    executable = ensure_chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def test_a_reviewer_decides_on_the_held_invoice(browser, target, tmp_path):
    store = "sqlite" if "://" not in target else "postgresql"
    write_through_processor(target)
    links = '{"Phoenix": "' + PHOENIX + '"}'
    ui = start_ui(target, tmp_path, "--trace-url-template", JAEGER, env={"OTEL_TRACEFENCE_UI__TRACE_LINKS": links})
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        page.goto(ui.url + "/")
        expect(page.locator("#queue tbody tr")).to_have_count(2)
        screenshot(page, f"review-{store}-queue")
        page.fill("#q", "invoice.create")
        page.keyboard.press("Enter")
        page.wait_for_url("**q=invoice.create**")
        assert page.locator("#queue tbody tr").evaluate_all("rows => rows.map(r => r.dataset.traceId)") == [INVOICE]
        screenshot(page, f"review-{store}-search")

        page.click(f"a[href='/items/{INVOICE}']")
        page.wait_for_url(f"**/items/{INVOICE}")
        tool = page.locator("#waterfall g.marked")
        expect(tool).to_have_count(1)
        expect(tool).to_have_attribute("data-call-id", "call-invoice")
        expect(tool).to_have_attribute("data-decision", "review")
        expect(tool.locator("text").first).to_have_text("◆ execute_tool invoice.create · review")
        expect(tool.locator("text.bar-label")).to_have_text("30.00 s · write_timeout")
        expect(page.locator("#waterfall g.decision-replay")).to_have_attribute("data-call-id", "call-lookup")
        expect(page.locator("#reason-write_timeout")).to_contain_text("write_timeout")
        assert "Check:" in page.locator("#reasons").inner_text()
        page.locator("#reason-write_timeout a.to-span").click()
        assert page.evaluate("location.hash") == "#span-" + tool.get_attribute("data-span-id")
        expect(page.locator("#trace-link")).to_have_attribute("href", JAEGER.replace("{trace_id}", INVOICE))
        expect(page.locator("a.trace-link", has_text="open in Phoenix")).to_have_attribute("href", PHOENIX.replace("{trace_id}", INVOICE))
        screenshot(page, f"review-{store}-item")

        page.goto(f"{ui.url}/items/{CONFLICT}")
        table = page.locator("table.compare")
        expect(table.locator("tr[data-field^='arguments.']")).to_have_count(3)
        assert table.locator("tr.differs").evaluate_all("rows => rows.map(r => r.dataset.field)") == ["span id", "arguments", "arguments.api_key", "arguments.state"]
        expect(table.locator("tr[data-field='arguments.ticket'] td").last).to_have_text("same")
        state = table.locator("tr[data-field='arguments.state'] td.compared").all_inner_texts()
        assert len(state) == 2 and state[0] != state[1] and all(text.startswith("sha256 ") for text in state)
        screenshot(page, f"review-{store}-conflict")

        page.goto(f"{ui.url}/items/{INVOICE}")
        page.fill("#resolve-form input[name=resolved_by]", "rita")
        page.select_option("#verdict", "absent")
        page.fill("#resolve-form textarea[name=note]", "billing has no invoice for inv-1: safe to retry")
        page.click("#resolve-form button[type=submit]")
        page.wait_for_url(f"**/items/{INVOICE}?resolved=1")
        expect(page.locator("#state")).to_have_text("resolved")
        last = page.locator("#history tbody tr").last
        expect(last.locator("td").nth(1)).to_have_text("resolved")
        expect(last.locator("td").nth(2)).to_have_text("rita")
        expect(last.locator("td.verdict")).to_have_text("absent")
        expect(last.locator("td").nth(4)).to_have_text("billing has no invoice for inv-1: safe to retry")
        screenshot(page, f"review-{store}-resolved")

        page.set_viewport_size({"width": 375, "height": 740})  # the waterfall scrolls in its own box, not the page
        page.goto(f"{ui.url}/items/{CONFLICT}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        expect(page.locator("#waterfall g.marked")).to_have_count(2)
        screenshot(page, f"review-{store}-narrow-conflict")
    finally:
        context.close()
        ui.stop()
