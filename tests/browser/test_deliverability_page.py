"""The Deliverability page in Chromium at 1280 px and 390 px: each identity's two charts drawn
on the server (no script), with the warning and limit lines; the guard's pause with its reason
and the way to resume; nothing wider than the screen."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from broadside.core.timeutil import utcnow
from broadside.feedback.reputation import guard
from tests.broadside.feedback import sends
from tests.browser.steps import sign_in
from tests.helpers import make_identity
from webapp.extensions import db

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def a_month_of_mail(identity_id: int | None, per_day: int, bounces: int, complaints: int,
                    days: int = 30) -> None:
    now = utcnow()
    for back in range(days):
        newest = now - timedelta(days=back, minutes=1)
        news, sent = sends.broadcast(identity_id, sends.times(per_day, newest, timedelta(seconds=20)))
        for one in sent[:bounces + back % 3]:
            sends.bounce_delivery(news, one)
        for one in sent[bounces + 3:bounces + 3 + complaints * (back % 2)]:
            sends.complain_delivery(news, one)


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the page scrolls sideways ({width}px)"


def test_the_charts_the_lines_and_the_guards_pause_on_desktop_and_phone(
        page: Page, app, live_server, owner, screenshot_dir):
    product = make_identity("Product updates from the Remarkably Long Company Name", "outbox://", 0).id
    a_month_of_mail(None, 60, 0, 0, days=12)
    a_month_of_mail(product, 40, 1, 1, days=20)
    news, sent = sends.broadcast(product, sends.times(300))
    for one in sent[:18]:
        sends.bounce_delivery(news, one)
    assert guard.check(db.session, product, label="Product")
    db.session.commit()

    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, live_server.url)
    page.get_by_role("link", name="Deliverability").first.click()
    expect(page.get_by_role("heading", name="Deliverability", level=1)).to_be_visible()
    card = page.locator(f"#identity-{product}")
    expect(card.locator(f"#identity-{product}-state")).to_have_text("paused by the guard")
    expect(card).to_contain_text("Paused by the reputation guard:")
    bounce = card.get_by_role("img", name="Hard-bounce rate per day")
    expect(bounce).to_be_visible()
    expect(bounce.locator("rect.bar")).to_have_count(20)
    expect(bounce.locator("line.line-limit")).to_have_count(1)
    complaints = card.get_by_role("img", name="Complaint rate per day")
    expect(complaints.locator("line.line-warning")).to_have_count(1)
    assert page.evaluate("typeof window.Chart") == "undefined"
    box = bounce.bounding_box()
    assert box and box["width"] > 200 and box["height"] > 80
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshot_dir / "deliverability.png"), full_page=True)

    card.get_by_text("Numbers per day").click()
    expect(card.locator("table tbody tr")).to_have_count(20)
    page.set_viewport_size(PHONE)
    no_sideways_scroll(page)
    card_box, chart_box = card.bounding_box(), bounce.bounding_box()
    assert card_box and chart_box and chart_box["x"] + chart_box["width"] <= card_box["x"] + card_box["width"]
    page.screenshot(path=str(screenshot_dir / "deliverability-phone.png"), full_page=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(screenshot_dir / "deliverability-phone-top.png"))
    card.locator(".rate-charts").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "deliverability-phone-charts.png"))

    card.get_by_role("link", name="resume it on its page").click()
    expect(page).to_have_url(f"{live_server.url}/settings/identities/#identity-{product}")
    page.locator(f"#identity-{product}").get_by_role("button", name="Resume").click()
    page.goto(live_server.url + "/deliverability/")
    expect(page.locator(f"#identity-{product}-state")).not_to_have_text("paused by the guard")
