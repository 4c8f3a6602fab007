"""The dashboard's growth chart beside the recent broadcasts, and the System page's checks, in
Chromium at desktop width and at 390 px: drawn without JavaScript, readable as words, nothing
wider than the screen."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect
from redis import Redis
from sqlalchemy import insert

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from broadside.core.timeutil import utcnow
from tests.browser.steps import sign_in
from tests.smtp_server import free_port
from webapp.extensions import db

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def a_month_of_people() -> tuple[set[int], set[int]]:
    """Joins on most days and some leaves, like a small growing list; returns the days (back from
    today) with joins and those with leaves."""
    weekly = MailingList(name="The Weekly")
    db.session.add(weekly)
    db.session.flush()
    rng = random.Random(17)
    today = utcnow().replace(hour=12, minute=0, second=0, microsecond=0)
    people, joined_days, left_days = [], set(), set()
    for back in range(30):
        for n in range(rng.choice([0, 1, 2, 3, 5, 8])):
            joined_days.add(back)
            people.append({"at": today - timedelta(days=back, minutes=n), "left": None})
        if back % 6 == 2:
            left_days.add(back)
            people.append({"at": today - timedelta(days=90), "left": today - timedelta(days=back)})
    db.session.execute(insert(Subscriber), [
        {"email": f"reader{i}@example.com", "name": f"Reader {i}", "attributes": {}}
        for i in range(len(people))])
    db.session.flush()
    ids = [s.id for s in db.session.query(Subscriber).order_by(Subscriber.id)]
    db.session.execute(insert(Subscription), [
        {"subscriber_id": sid, "list_id": weekly.id, "created_at": p["at"], "unsubscribed_at": p["left"],
         "status": "unsubscribed" if p["left"] else "active"} for sid, p in zip(ids, people, strict=True)])
    drafts.create_draft(db.session, list_id=weekly.id, subject="November news from the workshop")
    db.session.commit()
    return joined_days, left_days


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the page scrolls sideways ({width}px)"


def test_growth_beside_the_broadcasts_the_system_pages_button_and_a_missing_redis_on_desktop_and_phone(
    page: Page, app, live_server, owner, screenshot_dir
):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="Europe/London")
    joined_days, left_days = a_month_of_people()
    app.config["SMTP_URL"] = ""  # the outbox
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, live_server.url)

    card = page.locator(".growth-card")
    expect(card.get_by_role("heading", name="Subscribers: last 30 days")).to_be_visible()
    chart = card.get_by_role("img", name="Subscriber growth")
    expect(chart).to_be_visible()
    expect(chart.locator("rect.bar-joined")).to_have_count(len(joined_days))
    expect(chart.locator("rect.bar-left")).to_have_count(len(left_days))
    assert page.evaluate("typeof window.Chart") == "undefined"
    # Beside the recent broadcasts on a desktop: the same row, to its right.
    recent = page.locator("section[aria-labelledby=recent-heading]").bounding_box()
    growth = card.bounding_box()
    assert recent and growth and abs(recent["y"] - growth["y"]) < 2
    assert growth["x"] > recent["x"] + recent["width"]
    box = chart.bounding_box()
    assert box and box["width"] > 200 and box["height"] > 80
    page.screenshot(path=str(screenshot_dir / "dashboard-growth.png"), full_page=True)

    card.get_by_text("Numbers per day").click()
    expect(card.locator("table.growth-table tbody tr")).to_have_count(len(joined_days | left_days))
    no_sideways_scroll(page)

    page.set_viewport_size(PHONE)
    expect(chart).to_be_visible()
    no_sideways_scroll(page)
    card_box, chart_box = card.bounding_box(), chart.bounding_box()
    assert card_box and chart_box and chart_box["x"] >= card_box["x"] and \
        chart_box["x"] + chart_box["width"] <= card_box["x"] + card_box["width"]
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "dashboard-growth-phone.png"), full_page=True)

    # The System page: the outbox line waiting for a check names the button it shows.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(live_server.url + "/system/")
    expect(page.locator('[data-check="outbox"]')).to_contain_text("press “Check the outbox now”")
    expect(page.get_by_role("button", name="Check the outbox now")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "system-outbox.png"), full_page=True)
    page.set_viewport_size(PHONE)
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshot_dir / "system-outbox-phone.png"), full_page=True)

    # Nothing listening at REDIS_URL: the banner says where and how to start it, and fits a phone.
    working, working_url = app.extensions["broadside_redis"], app.config["REDIS_URL"]
    port = free_port()
    app.config["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    app.extensions["broadside_redis"] = Redis.from_url(app.config["REDIS_URL"], socket_connect_timeout=1)
    try:
        page.goto(live_server.url + "/")
        banner = page.locator("#sending-banner")
        expect(banner).to_contain_text(f"Redis is not answering at redis://127.0.0.1:{port}/0: start it, "
                                       "e.g. `sudo apt-get install redis-server`")
        no_sideways_scroll(page)
        page.screenshot(path=str(screenshot_dir / "dashboard-redis-down-phone.png"))
        page.set_viewport_size({"width": 1280, "height": 900})
        page.screenshot(path=str(screenshot_dir / "dashboard-redis-down.png"))
    finally:
        app.extensions["broadside_redis"].close()
        app.extensions["broadside_redis"] = working
        app.config["REDIS_URL"] = working_url
