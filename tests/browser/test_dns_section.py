"""The DNS section of each identity on Settings → Sending identities in Chromium, at a desktop
width and on a phone: sections that load themselves after the page (htmx), a badge and a
sentence per check, a long DKIM record in a code block that wraps, "Check DNS again" swapping
the section once a record is published. Nothing scrolls sideways; no private key is shown."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from playwright.sync_api import Page, expect

from broadside.core.models import Identity
from broadside.core.site_settings import update_settings
from broadside.delivery.identities import service as identities
from tests.browser.steps import sign_in
from tests.browser.test_identities_pages import WIDTHS, fits
from webapp.extensions import db

pytestmark = pytest.mark.browser


@pytest.fixture
def relay(app, dns_server) -> int:
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="UTC")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    identity_id = identities.create(db.session, identities.parse_input({
        "name": "Newsletter relay", "from": "Acme Weekly <weekly@newsletter.acme.example>",
        "transport": "smtp://127.0.0.1:2525"})).id
    row = db.session.get(Identity, identity_id)
    row.verp_domain, row.dkim_selector, row.dkim_private_key = "bounces.acme.example", "s2026", key
    db.session.commit()
    identities.create(db.session, identities.parse_input({
        "name": "Receipts", "from": "Acme <receipts@acme.example>", "transport": "resend://re_key@"}))
    dns_server.add("bounces.acme.example", "TXT", "v=spf1 include:_spf.acme.example -all")
    dns_server.add("_spf.acme.example", "TXT", "v=spf1 ip4:127.0.0.1 -all")
    dns_server.add("_dmarc.acme.example", "TXT", "v=DMARC1; p=quarantine; aspf=r")
    dns_server.add("send.acme.example", "TXT", "v=spf1 include:amazonses.com ~all")
    return identity_id


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_dns_sections_fit_a_desktop_and_a_phone(page: Page, live_server, owner, relay, size,
                                                    screenshot_dir, dns_server):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/identities/")
    section = page.locator(f"#dns-identity-{relay}")
    expect(section.locator(".badge").first).to_be_visible(timeout=10_000)  # loaded by htmx
    expect(section).to_contain_text("SPF: ok")
    expect(section).to_contain_text("DKIM: missing")
    expect(section).to_contain_text("MX: missing")
    expect(section.locator("pre.dns-record").first).to_contain_text(
        's2026._domainkey.newsletter.acme.example. TXT "v=DKIM1; k=rsa; p=')
    receipts = page.locator(".dns").nth(2)
    expect(receipts).to_contain_text("DKIM: missing", timeout=10_000)
    expect(page.locator("#dns-identity-default")).to_contain_text("the outbox sends nothing",
                                                                  timeout=10_000)
    # The key never shows (the DKIM form's placeholder names the PEM's first line, no key).
    assert "PRIVATE KEY-----\n" not in page.content() and "-----END" not in page.content()
    fits(page, "the identities list with DNS checks")
    page.screenshot(path=str(screenshot_dir / f"identities-dns-{size}.png"), full_page=True)
    section.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / f"identities-dns-section-{size}.png"))

    dns_server.add("bounces.acme.example", "MX", "10 mx.acme.example.")
    section.get_by_role("button", name="Check DNS again").click()
    expect(page.locator(f"#dns-identity-{relay}")).to_contain_text("MX: ok", timeout=10_000)
    fits(page, "the section checked again")
