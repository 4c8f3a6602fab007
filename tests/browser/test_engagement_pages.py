"""Engagement's pages in Chromium at 1280 px and 390 px: a list's tracking, Settings' wait,
the segment builder's engagement conditions, and "Send again to those who did not open"
from the sent broadcast's button through the confirmation (a refused subject, then the new
draft) to the original linking to its resend. Photographed for review; no page scrolls
sideways."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import update

from broadside.core.models import Broadcast
from broadside.core.site_settings import update_settings
from broadside.core.timeutil import utcnow
from tests.browser.steps import sign_in
from tests.webapp.test_non_openers import opened_by_some
from webapp import REPO_ROOT
from webapp.extensions import db

pytestmark = pytest.mark.browser

SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "engage"
WIDTHS = (1280, 390)


def photograph(page: Page, name: str, card: str | None = None) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"{name} scrolls sideways at {width} px ({scroll}px)"
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=card is None)
        if card is not None:
            page.locator(card).screenshot(path=str(SHOTS / f"{name}-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


def test_engagement_pages_on_desktop_and_phone(page: Page, app, live_server, owner, smtp_server,
                                               run_worker_burst):
    app.config["BASE_URL"] = live_server.url
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="1 Main Street", time_zone="Europe/Berlin")
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, live_server.url)

    # The builder before any list tracks per person: the conditions are there, disabled.
    page.goto(live_server.url + "/segments/new")
    expect(page.locator("#engagement-note")).to_be_visible()
    photograph(page, "segment-builder-unavailable", card="#builder")

    broadcast, readers = opened_by_some(app, app.test_client(), smtp_server, run_worker_burst)
    lists_page = f"/lists/{broadcast.list_id}"
    page.goto(live_server.url + lists_page)
    expect(page.locator("#list-tracking-state")).to_have_text("Per person")
    photograph(page, "list-tracking", card="#tracking")

    page.goto(live_server.url + "/settings/")
    page.locator("#resend_after_hours").fill("0")
    page.get_by_role("button", name="Save the wait").click()
    expect(page.locator("#resend-wait-error")).to_contain_text("from 1 to 720")
    photograph(page, "settings-wait-refused", card="#resend-wait")
    page.locator("#resend_after_hours").fill("24")
    page.get_by_role("button", name="Save the wait").click()
    expect(page.locator("#resend-wait")).to_be_visible()

    # The builder: "did not open" a broadcast sent with per-person tracking.
    page.goto(live_server.url + "/segments/new")
    page.locator("#c-1-field").select_option("opened")
    expect(page.locator("#c-1-op")).to_be_visible()
    page.locator("#c-1-op").select_option("is_not")
    page.locator("#c-1-value").select_option(str(broadcast.id))
    photograph(page, "segment-builder-opened", card="#builder")

    # Within the wait: the reason, with when it becomes available.
    page.goto(live_server.url + f"/broadcasts/{broadcast.id}")
    expect(page.locator("#resend-reason")).to_contain_text("it can be sent again from")
    photograph(page, "broadcast-resend-waiting", card="#resend-offer")

    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                       .values(finished_at=utcnow() - timedelta(hours=30)))
    db.session.commit()
    page.goto(live_server.url + f"/broadcasts/{broadcast.id}")
    photograph(page, "broadcast-resend-offered")
    page.locator("#resend-button").click()
    expect(page.locator("#resend-count")).to_have_text("3")
    photograph(page, "resend-confirm")
    page.locator("#subject").fill("november")
    page.get_by_role("button", name="Make the draft").click()
    expect(page.locator("#subject-error")).to_contain_text("different from the first")
    photograph(page, "resend-confirm-refused")
    page.locator("#subject").fill("In case you missed it: November")
    page.get_by_role("button", name="Make the draft").click()
    expect(page).to_have_url(re.compile(r"/broadcasts/\d+/edit$"))
    photograph(page, "resend-draft-editor")
    page.goto(live_server.url + f"/broadcasts/{broadcast.id}")
    expect(page.locator("#resend-existing")).to_be_visible()
    photograph(page, "broadcast-resent", card="#resend-offer")
