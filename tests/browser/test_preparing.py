"""A broadcast whose recipient list the worker is still preparing, in a real Chromium at 1280
and 390 px: the broadcast page says "Preparing the recipient list: N of about M" above the
usual progress, the list of broadcasts and the dashboard say it too, and a pause says the
preparation carries on at Resume. ("Large" is made 5 people and a chunk 7 ids here.)"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from broadside.campaigns.broadcasts import snapshot as audience
from broadside.campaigns.broadcasts.service import pause_broadcast
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

pytestmark = pytest.mark.browser


def no_sideways_scroll(page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px"


def test_the_pages_show_the_recipient_list_being_prepared(
        browser, app, live_server, owner, screenshot_dir, monkeypatch):
    monkeypatch.setattr(audience, "INLINE_LIMIT", 5)
    monkeypatch.setattr(audience, "MIN_CHUNK", 7)
    monkeypatch.setattr(audience, "MAX_CHUNK", 7)
    monkeypatch.setattr(audience, "_rate", {})
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main Street", time_zone="UTC")
    broadcast = start_broadcast(app, make_list(db.session, 40), subject="The autumn issue",
                                enqueue=False)
    audience.prepare(db.session, broadcast.id, seconds=0)  # the worker's first chunk

    for width, height, name in ((1280, 900, "broadcast-preparing"), (390, 844, "broadcast-preparing-phone")):
        context = browser.new_context(viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            sign_in(page, live_server.url)
            page.goto(f"{live_server.url}/broadcasts/{broadcast.id}")
            expect(page.locator("#preparing")).to_contain_text(
                "Preparing the recipient list: 7 of about 40.")
            expect(page.locator("#state-words")).to_contain_text("prepares the recipient list")
            expect(page.locator("#count-pending strong")).to_have_text("7")
            no_sideways_scroll(page)
            page.screenshot(path=str(screenshot_dir / f"{name}.png"), full_page=True)
            page.goto(f"{live_server.url}/broadcasts")
            expect(page.locator(".preparing-note")).to_have_text("preparing the list")
            no_sideways_scroll(page)
            page.goto(f"{live_server.url}/")
            expect(page.locator("#recent-broadcasts .preparing-note")).to_have_text("preparing the list")
            no_sideways_scroll(page)
            if width == 390:
                page.screenshot(path=str(screenshot_dir / "dashboard-preparing-phone.png"), full_page=True)
        finally:
            context.close()

    # The page polls: the next chunk shows up without a reload, then a pause says what happens.
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        sign_in(page, live_server.url)
        page.goto(f"{live_server.url}/broadcasts/{broadcast.id}")
        audience.prepare(db.session, broadcast.id, seconds=0)
        expect(page.locator("#prepared-count")).to_have_text("14")
        pause_broadcast(db.session, broadcast.id)
        expect(page.locator("#preparing")).to_contain_text("It carries on when you press Resume.")
        page.screenshot(path=str(screenshot_dir / "broadcast-preparing-paused.png"), full_page=True)
    finally:
        context.close()
