"""The identities page groups identities by provider account, with the account's limit, at a
desktop width and on a phone; saving an identity that shares an account says with whom."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.delivery.identities import service as identities
from tests.browser.steps import sign_in
from tests.browser.test_identities_pages import WIDTHS, fits
from webapp import REPO_ROOT
from webapp.extensions import db

pytestmark = pytest.mark.browser

TOKEN = "pm-server-token-7f3a9c1e5b-long-enough-to-wrap"
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "ceiling"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_identities_are_grouped_by_account_and_a_shared_account_is_said(
        page: Page, live_server, owner, app, smtp_server, size):
    app.config["SMTP_URL"] = smtp_server.url
    for name, rate in (("Product updates", 10), ("Receipts", None)):
        identities.create(db.session, identities.parse_input({
            "name": name, "from": f"Acme <{name.split()[0].lower()}@acme.example>",
            "transport": f"postmark://{TOKEN}@", "account_rate": rate}))
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/identities/")
    group = page.locator(".account-group", has_text="Postmark key")
    expect(group.locator(".account-limit")).to_contain_text(
        "at most 10 requests a second across its 2 identities")
    expect(group.locator(".identity")).to_have_count(2)
    expect(group).to_contain_text("10 requests a second, shared with its account")
    fits(page, "the identities grouped by account")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"identities-accounts-{size}.png"), full_page=True)

    page.get_by_label("Name", exact=True).fill("Onboarding")
    page.get_by_label("From", exact=True).fill("Acme <hello@acme.example>")
    page.get_by_label("Transport URL").fill(f"postmark://{TOKEN}@")
    page.get_by_role("button", name="Save the identity").click()
    warning = page.locator(".flash-warning")
    expect(warning).to_contain_text("same provider account as “Product updates”, “Receipts”")
    fits(page, "the shared-account warning")
    page.screenshot(path=str(SHOTS / f"identities-shared-warning-{size}.png"), full_page=True)
