"""Through Chromium: a reader signs up on the public form and confirms by the emailed link;
the owner then finds them by typing in the subscriber table (HTMX search)."""

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.audience import lists
from broadside.core.models import Subscriber, Subscription, TransactionalMessage
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, make_token
from webapp.extensions import db

pytestmark = pytest.mark.browser


def test_sign_up_confirm_and_find_them_in_the_table(page: Page, live_server, owner,
                                                    screenshot_dir):
    weekly = lists.create_list(db.session, "The Weekly", "News every Friday",
                               signup_enabled=True).id
    for i in range(60):  # more than one page, so the search has something to narrow
        db.session.add(Subscriber(email=f"reader{i}@example.com", name=f"Reader {i}",
                                  attributes={}))
    db.session.commit()

    page.goto(f"{live_server.url}/join/{weekly}")
    expect(page.get_by_role("heading", name="Subscribe to The Weekly")).to_be_visible()
    expect(page.locator("#website")).to_be_hidden()  # the honeypot
    page.get_by_label("Email").fill("Zelda.Reader@Example.com")
    page.get_by_label("Name (optional)").fill("Zelda")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "signup-check-inbox.png"), full_page=True)

    db.session.expire_all()
    message = db.session.scalar(select(TransactionalMessage))
    assert message.to_email == "zelda.reader@example.com" and message.kind == "confirmation"
    path = re.search(r"https?://[^/\s]+(/join/confirm/\S+)", message.text).group(1)
    page.goto(live_server.url + path)
    page.get_by_role("button", name="Confirm my subscription").click()
    expect(page.get_by_role("heading", name="You are subscribed")).to_be_visible()
    db.session.expire_all()
    assert db.session.scalar(select(Subscription.status)) == "active"

    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Subscribers").click()
    rows = page.locator("#subscriber-table tbody tr")
    expect(rows).to_have_count(50)
    page.get_by_label("Search email or name").press_sequentially("zel", delay=30)
    # htmx swaps the table in place (no page load) and puts the search in the address bar.
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("zelda.reader@example.com")
    expect(rows.first).to_contain_text("The Weekly: active")
    expect(page).to_have_url(re.compile(r"q=zel"))
    page.screenshot(path=str(screenshot_dir / "subscribers-search.png"), full_page=True)
    page.get_by_role("link", name="zelda.reader@example.com").click()
    expect(page.get_by_role("heading", name="zelda.reader@example.com")).to_be_visible()
    expect(page.locator("#history")).to_contain_text("confirmed")


def test_an_old_confirmation_link_after_leaving_shows_the_way_back(page: Page, live_server,
                                                                    screenshot_dir):
    weekly = lists.create_list(db.session, "The Weekly", "News every Friday",
                               signup_enabled=True).id
    page.goto(f"{live_server.url}/join/{weekly}")
    page.get_by_label("Email").fill("reader@example.com")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    db.session.expire_all()
    message = db.session.scalar(select(TransactionalMessage))
    path = re.search(r"https?://[^/\s]+(/join/confirm/\S+)", message.text).group(1)
    person = db.session.scalar(select(Subscriber.id))
    page.goto(f"{live_server.url}/u/{make_token(person, weekly)}")  # the link in an email
    page.get_by_role("button", name="Unsubscribe").click()
    expect(page.get_by_role("heading", name="You are unsubscribed")).to_be_visible()

    for width, name in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(live_server.url + path)
        expect(page.get_by_role("heading", name="This link no longer subscribes you")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(screenshot_dir / f"signup-left-since-{name}.png"), full_page=True)
    page.get_by_role("link", name="Sign up again").click()
    expect(page.get_by_role("heading", name="Subscribe to The Weekly")).to_be_visible()
    db.session.expire_all()
    assert db.session.scalar(select(Subscription.status)) == "unsubscribed"
