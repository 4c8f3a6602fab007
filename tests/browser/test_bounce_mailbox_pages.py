"""The bounce mailbox in Chromium, at a desktop width and on a phone: the identity form's
"Bounce mailbox" fields (a refused URL beside its field, the password never shown back), the
identities list's line for it, and the System page's table of mailboxes. Nothing may scroll
sideways, no text may leave its box."""

from __future__ import annotations

from datetime import datetime

import pytest
from playwright.sync_api import Page, expect

from broadside.core.mailbox_urls import describe, parse
from broadside.core.models import BounceMailbox
from broadside.delivery.identities import service as identities
from tests.browser.steps import sign_in
from tests.browser.test_identities_pages import OVERFLOWING, sideways
from webapp import REPO_ROOT
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}
PASSWORD = "mailbox-password-9c2e1f"
URL = f"imaps://returns%40bounces.acme-product-announcements.example:{PASSWORD}@imap.mail-hosting.example:993/INBOX"


def fits(page: Page, what: str) -> None:
    assert sideways(page) <= 0, f"{what} scrolls sideways"
    assert page.evaluate(OVERFLOWING) == [], f"{what}: text out of its box"
    assert PASSWORD not in page.content(), f"{what} shows the mailbox password"


@pytest.fixture
def product(app, smtp_server) -> int:
    app.config["SMTP_URL"] = smtp_server.url
    app.config["BOUNCE_MAILBOX_URL"] = URL
    row = identities.create(db.session, identities.parse_input({
        "name": "Product updates", "from": "Acme Product <product@acme.example>",
        "transport": "smtp+starttls://mailer:pw@smtp.acme.example:587", "bounce_mailbox": URL,
        "verp_domain": "bounces.acme.example"}))
    db.session.add(BounceMailbox(
        key=parse(URL).key, label=describe(URL), last_uid=1840, processed_count=1840,
        unrecognised_count=12, last_read_at=datetime(2026, 11, 3, 9, 14),
        last_error="The mailbox at imap.mail-hosting.example refused the login: check the user "
                   "name and password in the bounce mailbox URL.",
        last_error_at=datetime(2026, 11, 3, 9, 15)))
    db.session.commit()
    return row.id


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_bounce_mailbox_parts_fit_a_desktop_and_a_phone(page: Page, live_server, owner, product,
                                                            size):
    shots = REPO_ROOT / "test-artifacts" / "screenshots" / "mailbox"
    shots.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/identities/")
    line = page.locator(f"#identity-{product}")
    expect(line).to_contain_text("imaps://retu…:•••@imap.mail-hosting.example:993/INBOX")
    expect(line).to_contain_text("returns+…@bounces.acme.example")
    fits(page, "the identities list")
    line.screenshot(path=f"{shots}/identity-line-{size}.png")

    page.get_by_label("Name", exact=True).fill("Receipts")
    page.get_by_label("From", exact=True).fill("Acme <receipts@acme.example>")
    page.get_by_label("Mailbox URL").fill("imaps://imap.acme.example/INBOX")
    page.get_by_role("button", name="Save the identity").click()
    expect(page.locator("#identity-bounce_mailbox-error")).to_contain_text("needs the login and its password")
    expect(page.get_by_label("Mailbox URL")).to_have_value("")
    fits(page, "the refused form")
    page.locator("#identity-bounces").screenshot(path=f"{shots}/form-refused-{size}.png")

    page.goto(live_server.url + f"/settings/identities/{product}/edit")
    unchanged = "unchanged (leave blank to keep)"
    expect(page.get_by_label("Mailbox URL")).to_have_attribute("placeholder", unchanged)
    expect(page.get_by_label("Return-Path domain")).to_have_value("bounces.acme.example")
    fits(page, "the edit page")
    page.locator("#identity-bounces").screenshot(path=f"{shots}/form-edit-{size}.png")

    page.goto(live_server.url + "/system/")
    table = page.locator("#bounce-mailboxes")
    expect(table).to_contain_text("Default, Product updates")
    expect(table).to_contain_text("refused the login")
    expect(table).to_contain_text("1,840")
    fits(page, "the System page")
    table.screenshot(path=f"{shots}/system-{size}.png")
