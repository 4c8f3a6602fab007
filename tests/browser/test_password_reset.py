"""Through Chromium: the owner forgets their password, asks for a link, follows it, chooses a
new password and is signed in, while the browser signed in elsewhere is signed out; the used,
expired and broken links each say what happened and lead back to asking again. Every page of
the way at 1280 and 390 px."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select

from broadside.core.models import TransactionalMessage
from broadside.mail.password_reset import ResetLinks
from tests.browser.steps import sign_in
from tests.helpers import OWNER_EMAIL
from webapp.extensions import db

pytestmark = pytest.mark.browser

NEW_PASSWORD = "a brand new passphrase"


def photograph(page: Page, folder, name: str) -> None:
    """The page at a desktop's and a phone's width: nothing scrolls sideways."""
    for width, label in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 800})
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), (name, width)
        page.screenshot(path=str(folder / f"password-reset-{name}-{label}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})


def test_forgotten_password_back_in_by_the_emailed_link(page: Page, browser: Browser, live_server,
                                                        owner, app, screenshot_dir):
    elsewhere = browser.new_context()
    other = elsewhere.new_page()
    sign_in(other, live_server.url)  # the laptop left signed in somewhere

    page.goto(live_server.url + "/login")
    expect(page.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()
    photograph(page, screenshot_dir, "sign-in")
    page.get_by_role("link", name="Forgot your password?").click()
    expect(page.get_by_role("heading", name="Forgot your password?")).to_be_visible()
    photograph(page, screenshot_dir, "forgot")
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_role("button", name="Email me a link").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    expect(page.get_by_text("a link is on its way")).to_be_visible()
    photograph(page, screenshot_dir, "check-inbox")

    db.session.expire_all()
    message = db.session.scalar(select(TransactionalMessage))
    assert (message.kind, message.to_email) == ("password_reset", OWNER_EMAIL)
    link = re.search(r"https?://\S+(/password/reset/\S+)", message.text).group(1)
    db.session.rollback()  # no read transaction held while the server writes
    page.goto(live_server.url + link)
    expect(page.get_by_role("heading", name="Choose a new password")).to_be_visible()
    photograph(page, screenshot_dir, "new-password")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Repeat the new password").fill(NEW_PASSWORD + "?")
    page.get_by_role("button", name="Set the new password").click()
    expect(page.get_by_text("The passwords differ.")).to_be_visible()
    photograph(page, screenshot_dir, "new-password-mistake")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Repeat the new password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Set the new password").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    expect(page.get_by_text("Your new password is set")).to_be_visible()

    other.reload()  # the other browser's session ended with the old password
    expect(other.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()
    elsewhere.close()
    page.get_by_role("button", name="Sign out").first.click()  # links mostly open signed out
    expect(page.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()

    page.goto(live_server.url + link)
    expect(page.get_by_role("heading", name="This link was already used")).to_be_visible()
    photograph(page, screenshot_dir, "link-used")
    expired = ResetLinks(app.config["SECRET_KEY"], live_server.url,
                         clock=lambda: time.time() - 3700).make(owner)
    page.goto(f"{live_server.url}/password/reset/{expired}")
    expect(page.get_by_role("heading", name="This link has expired")).to_be_visible()
    photograph(page, screenshot_dir, "link-expired")
    page.goto(live_server.url + link[:-6])
    expect(page.get_by_role("heading", name="This link is not complete")).to_be_visible()
    photograph(page, screenshot_dir, "link-broken")
    page.get_by_role("link", name="Ask for a new link").click()
    expect(page.get_by_role("heading", name="Forgot your password?")).to_be_visible()

    page.get_by_role("link", name="Back to sign in").click()
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
