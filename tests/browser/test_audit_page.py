"""Settings -> Audit log in Chromium at a desktop width and on a phone: changes made through
the pages are listed newest first with who, from where and what, a settings change opens to
its before and after, the filters narrow the list, and nothing scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.steps import fits, sign_in
from tests.browser.test_webhooks_page import WIDTHS

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_audit_log_lists_changes_and_filters_them(page: Page, live_server, owner,
                                                      screenshot_dir, size):
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/")
    sender = page.locator("#sender")
    sender.get_by_label("Sender name").fill("Acme Weekly")
    sender.get_by_label("Postal address").fill("Acme Ltd, 1 Main Street, Springfield")
    sender.get_by_role("button", name="Save sender settings").click()
    expect(page.locator(".flash")).to_contain_text("Settings saved")
    page.goto(live_server.url + "/lists/")
    page.get_by_label("Name", exact=True).first.fill("Weekly news")
    page.get_by_role("button", name="Create list").click()
    expect(page.locator("h1")).to_contain_text("Weekly news")

    page.goto(live_server.url + "/settings/")
    page.locator("#audit-link").click()
    rows = page.locator("#audit-entries tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("list.create")
    expect(rows.first.get_by_role("link", name="list 1")).to_be_visible()
    expect(rows.nth(1)).to_contain_text("settings.sender")
    expect(rows.nth(1)).to_contain_text("127.0.0.1")
    rows.nth(1).locator("summary").click()
    expect(rows.nth(1).locator("details")).to_contain_text('"Acme Weekly"')
    fits(page, "the audit log")
    page.screenshot(path=str(screenshot_dir / f"audit-log-{size}.png"), full_page=True)

    page.get_by_label("Action").fill("settings")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("settings.sender")
    fits(page, "the filtered audit log")
