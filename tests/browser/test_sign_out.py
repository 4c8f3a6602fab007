"""Through Chromium: the owner signs out, and a copy of their session cookie taken before (in
another browser) lands on the sign-in page afterwards; a browser signed in on its own stays
signed in."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.steps import sign_in

pytestmark = pytest.mark.browser


def test_signing_out_ends_the_session_a_copied_cookie_carried(page: Page, browser: Browser,
                                                              live_server, owner):
    sign_in(page, live_server.url)
    copied = browser.new_context()
    copied.add_cookies(page.context.cookies())  # the cookie as another machine would replay it
    thief = copied.new_page()
    own = browser.new_context()
    phone = own.new_page()
    sign_in(phone, live_server.url)
    try:
        thief.goto(live_server.url + "/lists/")
        expect(thief.get_by_role("heading", name="Lists", exact=True)).to_be_visible()

        page.get_by_role("button", name="Sign out").first.click()
        expect(page.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()
        expect(page.get_by_text("You are signed out.")).to_be_visible()

        thief.reload()
        expect(thief.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()
        phone.goto(live_server.url + "/lists/")
        expect(phone.get_by_role("heading", name="Lists", exact=True)).to_be_visible()
    finally:
        copied.close()
        own.close()
