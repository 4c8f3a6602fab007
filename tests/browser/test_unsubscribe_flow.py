"""The unsubscribe flow once through a real Chromium, with JavaScript switched off."""

import pytest
from playwright.sync_api import Browser, expect

from tests.helpers import make_token, unsubscribe_url
from tests.webapp.test_unsubscribe import add_list, add_subscriber, events, subscription

pytestmark = pytest.mark.browser


def test_unsubscribe_undo_and_preferences_without_javascript_or_cookies(
    browser: Browser, live_server, screenshot_dir
):
    weekly = add_list("Weekly Notes")
    daily = add_list("Daily Digest")
    alice = add_subscriber("alice@example.com", {weekly: "active", daily: "active"})
    url = unsubscribe_url(make_token(alice, weekly), base_url=live_server.url)

    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(url)
        question = "Unsubscribe alice@example.com from Weekly Notes?"
        expect(page.get_by_role("heading", name=question)).to_be_visible()
        page.screenshot(path=str(screenshot_dir / "unsubscribe-confirm.png"), full_page=True)
        assert subscription(alice, weekly).status == "active"  # looking changed nothing

        page.get_by_role("button", name="Unsubscribe").click()
        expect(page.get_by_role("heading", name="You are unsubscribed")).to_be_visible()
        page.screenshot(path=str(screenshot_dir / "unsubscribe-done.png"), full_page=True)
        assert subscription(alice, weekly).status == "unsubscribed"

        page.get_by_role("button", name="Undo: resubscribe me").click()
        expect(page.get_by_role("heading", name="You are subscribed again")).to_be_visible()
        assert subscription(alice, weekly).status == "active"

        page.get_by_role("link", name="Manage all your subscriptions").click()
        expect(page.get_by_role("heading", name="Your subscriptions")).to_be_visible()
        page.get_by_role("button", name="Leave Daily Digest").click()
        expect(page.get_by_text("You have left Daily Digest.")).to_be_visible()
        expect(page.get_by_role("button", name="Rejoin Daily Digest")).to_be_visible()
        page.get_by_role("button", name="Leave every list").click()
        expect(page.get_by_text("You have left every list.")).to_be_visible()
        page.screenshot(path=str(screenshot_dir / "unsubscribe-preferences.png"), full_page=True)

        assert subscription(alice, weekly).status == "unsubscribed"
        assert subscription(alice, daily).status == "unsubscribed"
        assert [e.kind for e in events(subscriber_id=alice)] == [
            "unsubscribed", "resubscribed", "unsubscribed", "unsubscribed",
        ]
        assert context.cookies() == []  # no page in the flow set a cookie
    finally:
        context.close()
