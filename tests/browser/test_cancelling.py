"""A large broadcast cancelled while the worker still skips its pending rows, in a real
Chromium at 1280 and 390 px: the broadcast page and the deliveries page say "Cancelled —
skipping the N recipients not sent yet", and once the worker is done the page settles by
itself on the usual cancelled summary. ("Large" is more than 5 people here.)"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from broadside.campaigns.broadcasts import cancelling, service
from broadside.campaigns.broadcasts import snapshot as audience
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

pytestmark = pytest.mark.browser


def no_sideways_scroll(page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px"


def test_the_pages_show_a_cancel_being_finished_by_the_worker(
        browser, app, live_server, owner, screenshot_dir, monkeypatch):
    monkeypatch.setattr(cancelling, "INLINE_LIMIT", 5)
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main Street", time_zone="UTC")
    broadcast_id = start_broadcast(app, make_list(db.session, 1234), subject="The autumn issue",
                                   enqueue=False).id
    while not audience.prepare(db.session, broadcast_id, seconds=30):
        pass
    service.cancel_broadcast(db.session, broadcast_id)

    sizes = ((1280, 900, "broadcast-cancelling"), (390, 844, "broadcast-cancelling-phone"))
    for width, height, name in sizes:
        context = browser.new_context(viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            sign_in(page, live_server.url)
            page.goto(f"{live_server.url}/broadcasts/{broadcast_id}")
            expect(page.locator("#cancelling-note")).to_contain_text(
                "Cancelled — skipping the 1,234 recipients not sent yet.")
            expect(page.locator("#state-words")).to_contain_text(
                "Cancelled — skipping the 1,234 recipients not sent yet")
            expect(page.locator("#cancel-button")).to_have_count(0)
            no_sideways_scroll(page)
            page.screenshot(path=str(screenshot_dir / f"{name}.png"), full_page=True)
            page.goto(f"{live_server.url}/broadcasts/{broadcast_id}/deliveries")
            expect(page.locator("#progress")).to_contain_text(
                "cancelled — skipping the 1,234 recipients not sent yet")
            no_sideways_scroll(page)
        finally:
            context.close()

    # The page polls: the worker's skip shows up without a reload, then the summary.
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        sign_in(page, live_server.url)
        page.goto(f"{live_server.url}/broadcasts/{broadcast_id}")
        expect(page.locator("#cancelling-count")).to_have_text("1,234")
        assert not cancelling.skip(db.session, broadcast_id, seconds=0, chunk=1000)
        expect(page.locator("#cancelling-count")).to_have_text("234")
        assert cancelling.skip(db.session, broadcast_id, chunk=1000)
        expect(page.locator("#cancelling-note")).to_have_count(0)
        expect(page.locator("#state-words")).to_contain_text("Cancelled at")
        expect(page.locator("#count-skipped strong")).to_have_text("1,234")
        page.screenshot(path=str(screenshot_dir / "broadcast-cancelled-after-skip.png"), full_page=True)
    finally:
        context.close()
