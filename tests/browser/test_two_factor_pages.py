"""Through Chromium: the owner sets up two-factor sign-in from Settings -> Security (the
secret read from the page, the code computed with pyotp as their phone would), saves the
recovery codes, signs out, and signs in with the password and then a code. Every page of the
way at 1280 and 390 px: nothing scrolls sideways, no text leaves its box."""

from __future__ import annotations

import time

import pyotp
import pytest
from playwright.sync_api import Page, expect

from broadside.core.site_settings import get_settings
from tests.browser.steps import fits, sign_in, table_problems
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD
from webapp.extensions import db

pytestmark = pytest.mark.browser


def photograph(page: Page, folder, name: str, stacked: tuple[str, ...] = ()) -> None:
    for width, label in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        fits(page, f"{name} at {width} px")
        if width == 390:
            assert table_problems(page, stacked) == [], name
        page.screenshot(path=str(folder / f"two-factor-{name}-{label}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_enrol_then_sign_in_with_password_and_code(page: Page, live_server, owner,
                                                   screenshot_dir):
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/")
    page.get_by_role("link", name="Security", exact=True).click()
    expect(page.get_by_role("heading", name="Security", exact=True)).to_be_visible()
    expect(page.locator("#two-factor-state")).to_have_text("off")
    expect(page.get_by_text("this browser")).to_be_visible()
    photograph(page, screenshot_dir, "security-off", ("#session-table",))

    page.get_by_role("button", name="Set up two-factor sign-in").click()
    expect(page.get_by_role("heading", name="Set up two-factor sign-in")).to_be_visible()
    expect(page.locator("#totp-qr svg")).to_be_visible()
    photograph(page, screenshot_dir, "enrol")
    secret = page.locator("#totp-secret").inner_text().replace(" ", "")
    enrolling_code = pyotp.TOTP(secret).now()
    page.get_by_label("Code from your app").fill(enrolling_code)
    page.get_by_role("button", name="Turn on two-factor sign-in").click()

    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    expect(page.locator("#recovery-codes li")).to_have_count(10)
    photograph(page, screenshot_dir, "recovery-codes")
    page.get_by_role("link", name="I have saved them: continue").click()
    expect(page.locator("#two-factor-state")).to_have_text("on")
    photograph(page, screenshot_dir, "security-on", ("#session-table",))

    page.get_by_role("button", name="Sign out").first.click()
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()
    page.goto(live_server.url + "/lists/")  # not signed in yet: the password alone is not enough
    expect(page.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()
    photograph(page, screenshot_dir, "second-step")
    # The very code that enrolled (not `now()` again: the 30 s step may have turned since,
    # and a new step's code is rightly accepted): refused, though it is still in its window.
    page.get_by_label("Code").fill(enrolling_code)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("That code was already used")).to_be_visible()
    photograph(page, screenshot_dir, "second-step-replayed")
    page.get_by_label("Code").fill(pyotp.TOTP(secret).at(time.time() + 30))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Lists", exact=True)).to_be_visible()  # where it was going


def test_required_for_everyone_a_person_enrols_right_after_their_password(
        page: Page, live_server, owner, make_person, screenshot_dir):
    get_settings(db.session).require_two_factor = True
    db.session.commit()
    writer = make_person("writer", "writer.with-a-rather-long-address@example.com")
    page.goto(live_server.url + "/login")
    page.get_by_label("Email").fill(writer.email)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Set up two-factor sign-in")).to_be_visible()
    photograph(page, screenshot_dir, "enrol-at-sign-in")
    secret = page.locator("#totp-secret").inner_text().replace(" ", "")
    page.get_by_label("Code", exact=True).fill(pyotp.TOTP(secret).now())
    page.get_by_role("button", name="Turn on and sign in").click()
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    page.get_by_role("link", name="I have saved them: continue").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
