"""A feed automation's pages in Chromium at 1280 px and 390 px: the editor's "New items in a
feed" trigger (a refused address shown at its field, what was typed kept), the automation's
page with its feed's last poll, its error and the items sent with their broadcasts, and its
card. Nothing scrolls sideways or leaves its box. Screenshots for review in
test-artifacts/screenshots/feed-*.png."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.automations import service as automations
from broadside.core.models import Broadcast, Feed, FeedItem, MailingList
from broadside.core.timeutil import utcnow
from tests.browser.steps import fits, sign_in
from webapp.extensions import db

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("postal_address")]

WIDTHS = {"desktop": 1280, "phone": 390}
URL = "https://a-rather-long-blog-name.example.com/category/announcements/feed/atom.xml"


@pytest.fixture
def feed_automation(app) -> int:
    weekly = MailingList(name="The Weekly Dispatch of Remarkably Long List Names")
    db.session.add(weekly)
    db.session.flush()
    data = automations.parse_input({
        "name": "Blog to email", "steps": [{"subject": "New on the blog: [[title]]",
                                            "body": "Hello {{ name }},\n\n[[items]]"}],
        "trigger": {"type": "feed", "url": URL, "list_id": weekly.id}})
    automation = automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])
    automations.enable(db.session, automation.id)
    feed = db.session.query(Feed).one()
    now = utcnow()
    feed.primed_at, feed.polled_at = now - timedelta(days=2), now
    feed.next_poll_at = now + timedelta(minutes=15)
    feed.error, feed.error_at = ("The feed's server answered HTTP 503 (Service Unavailable) instead "
                                 "of the feed."), now
    for n, title in enumerate(["Why we moved our whole newsletter infrastructure to a single "
                               "small server", "Release notes 4.2", "A short one"]):
        broadcast = Broadcast(list_id=weekly.id, subject=f"New on the blog: {title}", status="sent")
        db.session.add(broadcast)
        db.session.flush()
        db.session.add(FeedItem(feed_id=feed.id, key=f"{n:064d}", title=title,
                                link=f"https://a-rather-long-blog-name.example.com/posts/{n}",
                                published_at=now - timedelta(days=n), broadcast_id=broadcast.id))
    db.session.commit()
    return automation.id


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_feed_pages_fit_a_desktop_and_a_phone(page: Page, live_server, owner, feed_automation,
                                                  size, screenshot_dir):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + f"/automations/{feed_automation}/edit")
    expect(page.locator("#feed-error")).to_contain_text("HTTP 503")
    expect(page.locator("#feed-sent")).to_contain_text("Release notes 4.2")
    fits(page, "the feed automation's page")
    page.screenshot(path=str(screenshot_dir / f"feed-automation-{size}.png"), full_page=True)

    page.goto(live_server.url + "/automations/")
    expect(page.locator(f"#feed-error-{feed_automation}")).to_contain_text("HTTP 503")
    # Its card counts the items sent as broadcasts (nobody "enters" a feed automation).
    card = page.locator(f"#counts-{feed_automation}")
    expect(card).to_contain_text("3 new items sent so far, as broadcasts.")
    expect(card).not_to_contain_text("entered")
    expect(card.get_by_role("link", name="A short one")).to_be_visible()  # the newest
    fits(page, "the automations list")
    page.screenshot(path=str(screenshot_dir / f"feed-automations-{size}.png"), full_page=True)

    page.goto(live_server.url + "/automations/new")
    page.get_by_label("Name", exact=True).fill("Another feed")
    page.get_by_label("New items in a feed").check()
    page.get_by_label("Feed address").evaluate("e => { e.type = 'text'; }")  # what the server refuses
    page.get_by_label("Feed address").fill("ftp://files.example.com/feed")
    page.get_by_label("Send the new items to").select_option(
        label="The Weekly Dispatch of Remarkably Long List Names")
    page.get_by_label("A digest of the new items").check()
    page.get_by_label("Every", exact=True).select_option("weekly")
    page.get_by_label("Subject").first.fill("[[count]] new posts")
    page.get_by_role("button", name="Save", exact=True).last.click()
    expect(page.locator("#feed_url-error")).to_contain_text("https://")
    expect(page.get_by_label("Feed address")).to_have_value("ftp://files.example.com/feed")
    fits(page, "the editor with a refused feed address")
    page.screenshot(path=str(screenshot_dir / f"feed-editor-{size}.png"), full_page=True)
