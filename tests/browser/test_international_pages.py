"""International addresses on the owner's pages, in Chromium at a desktop width and on a
phone: the import report says how many addresses need SMTPUTF8 and which identities cannot
reach them; a sign-up with such an address leaves the same warning on the person's page (and
the person signing up sees the usual answer)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.audience import lists
from broadside.core.models import Import, MailingList, Subscriber
from broadside.delivery.identities import service as identities
from tests.browser.steps import fits, sign_in
from tests.provider_servers import PostmarkServer
from webapp import REPO_ROOT
from webapp.extensions import db

pytestmark = pytest.mark.browser
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "intl"

WIDTHS = {"desktop": 1280, "phone": 390}
CSV = "email,name\nJürgen@Exämple.de,Jürgen\nann@exämple.de,Ann\nbob@example.com,Bob\n"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_import_report_and_signup_warn_of_addresses_that_need_smtputf8(
        page: Page, app, live_server, owner, size, tmp_path):
    app.config["SMTP_URL"] = ""  # the outbox reaches everyone
    with PostmarkServer() as postmark:
        identities.create(db.session, identities.parse_input({
            "name": "Postmark broadcasts", "from": "News <news@example.com>",
            "transport": postmark.transport_url()}))
        weekly = lists.create_list(db.session, "Monthly news")
        db.session.execute(MailingList.__table__.update().values(signup_enabled=True))
        db.session.commit()
        page.set_viewport_size({"width": WIDTHS[size], "height": 900})

        page.goto(f"{live_server.url}/join/{weekly.id}")
        page.fill("input[name=email]", "Chloé@exämple.de")
        page.get_by_role("button", name="Subscribe").click()
        page.wait_for_url("**/check-inbox")
        expect(page.locator("body")).not_to_contain_text("SMTPUTF8")  # the person sees the usual

        sign_in(page, live_server.url)
        upload = tmp_path / "people.csv"
        upload.write_text(CSV, encoding="utf-8")
        page.goto(f"{live_server.url}/subscribers/import?list={weekly.id}")
        page.get_by_label("CSV file").set_input_files(str(upload))
        page.get_by_role("radio", name="They already opted in").check()
        page.get_by_role("button", name="Import").click()
        note = page.locator("#smtputf8-note")
        expect(note).to_contain_text("1 imported address has characters outside ASCII")
        expect(note).to_contain_text("Postmark broadcasts (Postmark does not take it)")
        fits(page, "the import report")
        page.screenshot(path=f"{SHOTS}/import-report-{size}.png", full_page=True)
        assert db.session.scalar(select(Import.imported)) == 3

        chloe = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "chloé@exämple.de"))
        page.goto(f"{live_server.url}/subscribers/{chloe}")
        history = page.locator("#history")
        expect(history).to_contain_text("address_warning")
        expect(history).to_contain_text("Postmark broadcasts (Postmark does not take it)")
        fits(page, "the person's page")
        page.screenshot(path=f"{SHOTS}/signup-warning-{size}.png", full_page=True)
        assert chloe is not None, "the sign-up form did not take the address"
