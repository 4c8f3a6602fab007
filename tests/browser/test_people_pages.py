"""Through Chromium: the owner invites someone from Settings -> People, the invitee opens the
emailed link, sets their name and password and lands signed in with their role; the owner
then sees them, changes their role and removes them. People, the removal's confirmation, the
invitation page and its refusal, each at 1280 and 390 px: nothing scrolls sideways, no text
leaves its box, the wide tables are one labelled block per row on a phone, and axe-core finds
nothing serious (these pages are walked here, not in test_every_page.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.core import accounts
from broadside.core.models import TransactionalMessage
from tests.browser.steps import OVERFLOWING, sign_in, table_problems
from webapp.extensions import db

pytestmark = pytest.mark.browser

LONG_EMAIL = "maximiliana.featherstonehaugh-worthington@correspondence.remarkably-long.example.com"
LONG_NAME = "Maximiliana Alexandrovna Featherstonehaugh-Worthington"
PASSWORD = "a brand new passphrase"
AXE_SOURCE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text()
AXE_RUN = """async () => {
  const result = await axe.run(document, {
    runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
    resultTypes: ['violations'], iframes: false});
  return result.violations.filter(v => ['serious', 'critical'].includes(v.impact)).flatMap(
    v => v.nodes.map(n => `axe ${v.id}: ${v.help}; at ${n.target.join(' ')}`));
}"""


def look(page: Page, folder: Path, name: str, stacked: tuple[str, ...] = ()) -> None:
    """The page at a desktop's and a phone's width, photographed and checked."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), \
            (name, width)
        assert page.evaluate(OVERFLOWING) == [], (name, width)
        if width == 390:
            assert table_problems(page, stacked) == [], name
        page.evaluate(AXE_SOURCE)
        assert page.evaluate(AXE_RUN) == [], (name, width)
        page.screenshot(path=str(folder / f"people-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})


def invitation_link() -> str:
    db.session.expire_all()
    message = db.session.scalars(select(TransactionalMessage)
                                 .order_by(TransactionalMessage.id.desc())).first()
    assert message is not None and message.kind == "invitation"
    path = re.search(r"https?://\S+(/invitation/\S+)", message.text).group(1)
    db.session.rollback()  # no read transaction held while the server writes
    return path


def test_invite_accept_change_and_remove(page: Page, browser, live_server, owner, make_person,
                                         screenshot_dir):
    viewer = make_person("viewer", LONG_EMAIL, LONG_NAME)
    viewer.totp_secret, viewer.totp_enabled_at = "JBSWY3DPEHPK3PXP", viewer.created_at
    db.session.commit()
    accounts.create_token(db.session, owner.id, "Zapier: the weekly dispatch")
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/")
    page.locator("#people-link").click()
    expect(page.get_by_role("heading", name="People", exact=True).first).to_be_visible()

    page.get_by_label("Email address").fill("bo@example.com")
    page.get_by_label("Writer").check()
    page.get_by_role("button", name="Send the invitation").click()
    expect(page.get_by_text("Invitation sent to bo@example.com as writer")).to_be_visible()
    page.get_by_label("Email address").fill(LONG_EMAIL)
    page.get_by_role("button", name="Send the invitation").click()
    expect(page.get_by_text("already signs in")).to_be_visible()
    look(page, screenshot_dir, "index", ("#people-table", "#invitation-table"))
    page.get_by_role("button", name=f"Reset two-factor of {LONG_EMAIL}").click()
    expect(page.get_by_text(f"Two-factor sign-in is off for {LONG_EMAIL}")).to_be_visible()

    link = invitation_link()
    invitee = browser.new_context().new_page()
    invitee.goto(live_server.url + link)
    expect(invitee.get_by_role("heading", name="Join Broadside")).to_be_visible()
    invitee.get_by_label("Your name").fill("Bo Writer")
    invitee.get_by_label("Password", exact=True).fill(PASSWORD)
    invitee.get_by_label("Repeat the password").fill(PASSWORD + "?")
    invitee.get_by_role("button", name="Join and sign in").click()
    expect(invitee.get_by_text("The passwords differ.")).to_be_visible()
    look(invitee, screenshot_dir, "invitation")
    invitee.get_by_label("Password", exact=True).fill(PASSWORD)
    invitee.get_by_label("Repeat the password").fill(PASSWORD)
    invitee.get_by_role("button", name="Join and sign in").click()
    expect(invitee.get_by_text("Welcome to Broadside, Bo Writer")).to_be_visible()

    used = browser.new_context().new_page()
    used.goto(live_server.url + link)
    expect(used.get_by_role("heading", name="This invitation was already used")).to_be_visible()
    look(used, screenshot_dir, "invitation-used")

    page.goto(live_server.url + "/settings/people/")
    row = page.locator("tr", has_text="bo@example.com")
    row.get_by_label("Role of bo@example.com").select_option("sender")
    row.get_by_role("button", name="Change").click()
    expect(page.get_by_text("bo@example.com is now sender (was writer)")).to_be_visible()
    page.locator("tr", has_text="bo@example.com").get_by_role("link", name="Remove").click()
    expect(page.get_by_role("heading", name="Remove Bo Writer?")).to_be_visible()
    look(page, screenshot_dir, "remove")
    page.get_by_role("button", name="Remove bo@example.com").click()
    expect(page.get_by_text("bo@example.com is removed")).to_be_visible()

    invitee.reload()  # their session ended with them
    expect(invitee.get_by_role("heading", name="Sign in to Broadside")).to_be_visible()

    page.goto(live_server.url + "/settings/")  # the tokens say whose and what they may do
    page.get_by_label("Token name").fill("Reports")
    page.get_by_label("Read-only: GET requests only").check()
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#token-table")).to_contain_text("full (owner)")
    expect(page.locator("#token-table")).to_contain_text("read-only")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        assert table_problems(page, ("#token-table",) if width == 390 else ()) == []
        page.locator("#tokens").screenshot(path=str(screenshot_dir / f"people-tokens-{width}.png"))
