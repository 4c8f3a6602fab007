"""Settings -> History of sent broadcasts, and the broadcast page's sentence once a compaction
removed the step-by-step history, in Chromium at a desktop width and on a phone: a refused
number says why and keeps the choice, a saved one is shown again, nothing scrolls sideways."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import compaction
from broadside.core.timeutil import utcnow
from tests.browser.steps import sign_in
from tests.browser.test_webhooks_page import WIDTHS, fits
from tests.jobs.test_compaction import sent_broadcast
from webapp.extensions import db

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", list(WIDTHS))
def test_choose_a_retention_and_see_it_on_a_compacted_broadcast(
        app, page: Page, live_server, owner, screenshot_dir, size):
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/#history")
    history = page.locator("#history")
    expect(history.get_by_label("Forever (the default)")).to_be_checked()
    history.get_by_label("A number of days").check()
    history.get_by_label("Days", exact=True).fill("ninety")
    history.get_by_role("button", name="Save the history setting").click()
    expect(page.locator("#retention_days-error")).to_contain_text("whole number from 1 to 3650")
    expect(page.locator("#history").get_by_label("A number of days")).to_be_checked()
    fits(page, "the refused retention")
    page.locator("#history").scroll_into_view_if_needed()
    page.locator("#history").screenshot(path=str(screenshot_dir / f"history-refused-{size}.png"))

    page.locator("#history").get_by_label("Days", exact=True).fill("30")
    page.locator("#history").get_by_role("button", name="Save the history setting").click()
    expect(page.locator(".flash")).to_contain_text("lose their step-by-step history")
    expect(page.locator("#history").get_by_label("Days", exact=True)).to_have_value("30")
    fits(page, "the saved retention")
    page.locator("#history").screenshot(path=str(screenshot_dir / f"history-saved-{size}.png"))

    with app.app_context():
        broadcast_id = sent_broadcast(app)
        compaction.compact_due(db.session, now=utcnow() + timedelta(days=31))
        db.session.remove()
    page.goto(f"{live_server.url}/broadcasts/{broadcast_id}")
    expect(page.locator("#history-compacted")).to_contain_text(
        "after 30 days; each recipient's final state is kept")
    fits(page, "a compacted broadcast")
    page.locator("#deliveries").screenshot(
        path=str(screenshot_dir / f"history-compacted-broadcast-{size}.png"))
