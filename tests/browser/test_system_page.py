import pytest
from playwright.sync_api import Page, expect

from tests.browser.steps import sign_in

pytestmark = pytest.mark.browser


def test_system_page_follows_the_worker_starting_and_stopping(
    page: Page, app, live_server, owner, smtp_server, worker_factory, screenshot_dir
):
    app.config["SMTP_URL"] = smtp_server.url
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
    sign_in(page, live_server.url)
    page.get_by_role("navigation").get_by_role("link", name="System", exact=True).click()
    expect(page.get_by_role("heading", name="System", exact=True)).to_be_visible()
    state = page.locator("#worker-state")
    expect(state).to_contain_text("No worker is running")
    expect(page.locator('[data-check="worker"]')).to_contain_text("no worker holds the sending lease")
    expect(page.locator('[data-check="SMTP"]')).to_contain_text("not checked yet")

    worker = worker_factory()
    # The sender panel refreshes itself (htmx polling): no reload needed.
    expect(state).to_contain_text("Worker running", timeout=20_000)
    expect(state).to_contain_text("holds the sending lease since")
    expect(page.locator("#queue-table")).to_contain_text("broadcasts")

    page.get_by_role("button", name="Check SMTP now").click()
    smtp_line = page.locator('[data-check="SMTP"]')
    expect(smtp_line).to_contain_text("nothing sent", timeout=10_000)
    expect(smtp_line.locator(".mark")).to_have_text("✓")
    page.screenshot(path=str(screenshot_dir / "system-running.png"), full_page=True)

    assert worker.terminate(timeout=15) == 0
    expect(state).to_contain_text("No worker is running", timeout=15_000)
    expect(page.locator('[data-check="worker"] .mark')).to_have_text("✗", timeout=15_000)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(screenshot_dir / "system-stopped-phone.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
    assert smtp_server.messages == []
    assert not [c for c in console if "Content Security Policy" in c or "Refused" in c], console
