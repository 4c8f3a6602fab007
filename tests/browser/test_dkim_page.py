"""An identity's DKIM section in Chromium, at a desktop width and on a phone: a key generated
from the edit page, the TXT record to publish shown with its name (the private key nowhere),
a pasted garbage key refused under its field and not shown again. Nothing may scroll
sideways or spill out of its box."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.core.models import Identity
from broadside.core.site_settings import update_settings
from broadside.delivery.identities import service as identities
from broadside.mail import dkim_keys
from tests.browser.steps import sign_in
from tests.browser.test_identities_pages import OVERFLOWING, WIDTHS, sideways
from tests.smtp_server import free_port
from webapp import REPO_ROOT
from webapp.extensions import db

pytestmark = pytest.mark.browser

SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "dkim"
GARBAGE = "-----BEGIN RSA PRIVATE KEY-----\nbm90LWEta2V5LWF0LWFsbA==\n-----END RSA PRIVATE KEY-----"


def fits(page: Page, what: str, key: str = "") -> None:
    assert sideways(page) <= 0, f"{what} scrolls sideways"
    assert page.evaluate(OVERFLOWING) == [], f"{what}: text out of its box"
    private = [line for line in key.splitlines() if line and not line.startswith("-----")][8:]
    html = page.content()
    assert not any(line in html for line in private), f"{what} shows the private key"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_dkim_section_generates_a_key_and_shows_its_record(page: Page, live_server, owner, app,
                                                                size, screenshot_dir):
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street", time_zone="UTC")
    relay = identities.create(db.session, identities.parse_input({
        "name": "Newsletter relay", "from": "Acme Newsletter <newsletter@mail.acme-example.org>",
        "transport": f"smtp://127.0.0.1:{free_port()}"})).id
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)

    page.goto(live_server.url + f"/settings/identities/{relay}/edit")
    section = page.locator("#dkim")
    expect(section).to_contain_text("signs its own mail with the domain you verified there")
    section.get_by_role("radio", name="Paste a private key").check()
    section.get_by_role("textbox", name="Private key to paste").fill(GARBAGE)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#identity-dkim_private_key-error")).to_contain_text("could not be read")
    expect(page.locator("#dkim").get_by_role("textbox", name="Private key to paste")).to_have_value("")
    assert "bm90LWEta2V5LWF0LWFsbA" not in page.content()
    fits(page, "the refused DKIM key")
    page.locator("#dkim").screenshot(path=str(SHOTS / f"dkim-refused-{size}.png"))

    page.locator("#dkim").get_by_label("Generate a new 2048-bit key").check()
    page.locator("#dkim").get_by_label("Selector").fill("news2026")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".flash-success")).to_contain_text("Publish its DKIM TXT record")
    db.session.expire_all()
    key = db.session.get(Identity, relay).dkim_private_key
    card = page.locator(f"#identity-{relay}")
    expect(card.locator(".dkim-name")).to_have_text("news2026._domainkey.mail.acme-example.org")
    expect(card.get_by_label("Value (TXT)")).to_have_value(dkim_keys.txt_record(key))
    expect(card).to_contain_text(dkim_keys.check_private_key(key).fingerprint)
    expect(page.locator("#identity-default")).to_contain_text("DKIM_PRIVATE_KEY_FILE")
    fits(page, "the identities list", key)
    card.screenshot(path=str(SHOTS / f"dkim-list-{size}.png"))
    page.screenshot(path=str(screenshot_dir / f"identities-dkim-{size}.png"), full_page=True)

    page.goto(live_server.url + f"/settings/identities/{relay}/edit")
    expect(page.locator("#dkim").get_by_label("Keep the stored key")).to_be_checked()
    expect(page.locator("#dkim")).to_contain_text("a 2048-bit RSA key")
    fits(page, "the edit page", key)
    page.locator("#dkim").screenshot(path=str(SHOTS / f"dkim-edit-{size}.png"))
