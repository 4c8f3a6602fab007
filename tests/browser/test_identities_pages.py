"""Sending identities in Chromium, at a desktop width and on a phone: the identities list with
"Check connection" swapping in its ✓ or ✗, the form keeping what was typed after a refusal,
the edit page, the broadcast editor's "Send from" changing the preview's From, and the System
page with two identities' streams. Nothing may scroll sideways, no text may leave its box, and
no stored secret may reach a page."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import MailingList
from broadside.core.site_settings import update_settings
from broadside.delivery.identities import lifecycle
from broadside.delivery.identities import service as identities
from broadside.delivery.lease import Lease
from broadside.delivery.streams import record_rate
from tests.browser.steps import sign_in
from tests.smtp_server import free_port
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}
TOKEN = "pm-server-token-7f3a9c1e5b-long-enough-to-wrap"
HOOK_SECRET = "whsec-signing-4c2e9a77"

# Elements whose content is wider than their own box (text spilling out), and tables that
# scroll inside their card, if any.
OVERFLOWING = """() => [...document.querySelectorAll(`main p, main dd, main dt, main li, main td, main th,
  main label, main small, main h1, main h2, main h3, main button, main .button, main code`)]
  .filter(e => e.offsetParent !== null && !e.closest('.table-wrap') && !e.closest('.sr-only')
            && e.scrollWidth > e.clientWidth + 1)
  .concat([...document.querySelectorAll('main .table-wrap')].filter(e => e.scrollWidth > e.clientWidth + 1))
  .map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 60))"""


def sideways(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def fits(page: Page, what: str) -> None:
    assert sideways(page) <= 0, f"{what} scrolls sideways"
    assert page.evaluate(OVERFLOWING) == [], f"{what}: text out of its box"
    html = page.content()
    assert TOKEN not in html and HOOK_SECRET not in html, f"{what} shows a secret"


@pytest.fixture
def setup(app, smtp_server) -> dict[str, int]:
    app.config["SMTP_URL"] = smtp_server.url
    app.config["SEND_HOURLY_LIMIT"] = 3000
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="UTC")
    weekly = MailingList(name="Monthly news")
    db.session.add(weekly)
    db.session.commit()

    def make(name, transport, **extra):
        return identities.create(db.session, identities.parse_input({
            "name": name, "from": "Acme Product Announcements <product-announcements@acme.example>",
            "transport": transport, "webhook_secret": HOOK_SECRET, **extra})).id

    product = make("Product updates", f"postmark://{TOKEN}@", delay_ms=500, hourly_limit=10000)
    relay = make("Regional relay in Frankfurt", f"smtp://127.0.0.1:{free_port()}")
    lifecycle.pause(db.session, relay, "The mail server refused the login (535 5.7.8 Authentication "
                    "credentials invalid).")
    db.session.commit()
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="November at Acme",
                                body="Hello {{ name }}", identity_id=product)
    return {"product": product, "relay": relay, "draft": draft.id}


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_identities_pages_fit_a_desktop_and_a_phone(page: Page, live_server, owner, setup, size,
                                                         screenshot_dir, redis_client, namespace):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/")
    page.get_by_role("link", name="Sending identities").click()
    expect(page.get_by_role("heading", name="Sending identities", exact=True)).to_be_visible()
    default = page.locator("#identity-default")
    default.get_by_role("button", name="Check connection").click()
    expect(page.locator("#check-identity-default")).to_contain_text("nothing sent", timeout=10_000)
    expect(page.locator("#check-identity-default .mark")).to_have_text("✓")
    relay = page.locator(f"#identity-{setup['relay']}")
    expect(relay).to_contain_text("Paused: The mail server refused the login")
    relay.get_by_role("button", name="Check connection").click()
    expect(page.locator(f"#check-identity-{setup['relay']} .mark")).to_have_text("✗", timeout=10_000)
    expect(page.locator(f"#check-identity-{setup['relay']}")).to_contain_text("host and port")
    product = page.locator(f"#identity-{setup['product']}")
    expect(product.get_by_role("button", name="Delete")).to_be_disabled()
    expect(product).to_contain_text("Used by 1 broadcast not yet sent")
    fits(page, "the identities list")
    page.screenshot(path=str(screenshot_dir / f"identities-{size}.png"), full_page=True)

    # A refusal keeps what was typed, except the secret.
    page.get_by_label("Name", exact=True).fill("Transactional")
    page.get_by_label("From", exact=True).fill("Acme <receipts@acme.example>")
    page.get_by_label("Transport URL").fill("ses://AKIAEXAMPLE:some-secret@mars-1")
    page.get_by_role("button", name="Save the identity").click()
    expect(page.locator("#identity-transport-error")).to_contain_text("is not an AWS region")
    expect(page.get_by_label("Name", exact=True)).to_have_value("Transactional")
    expect(page.get_by_label("Transport URL")).to_have_value("")
    fits(page, "the refused form")
    page.screenshot(path=str(screenshot_dir / f"identities-refused-{size}.png"), full_page=True)

    page.goto(live_server.url + f"/settings/identities/{setup['product']}/edit")
    unchanged = "unchanged (leave blank to keep)"
    expect(page.get_by_label("Transport URL")).to_have_attribute("placeholder", unchanged)
    expect(page.get_by_role("textbox", name="Webhook secret")).to_have_value("")
    expect(page.locator("main")).to_contain_text(f"/webhooks/postmark/{setup['product']}")
    fits(page, "the edit page")
    page.screenshot(path=str(screenshot_dir / f"identity-edit-{size}.png"), full_page=True)

    page.goto(live_server.url + f"/broadcasts/{setup['draft']}/edit")
    send_from = page.get_by_label("Send from")
    expect(send_from).to_have_value(str(setup["product"]))
    expect(page.locator("#preview-pane")).to_contain_text("product-announcements@acme.example")
    send_from.select_option(label="Default — Acme Weekly <news@acme.example>")
    expect(page.locator("#preview-pane")).to_contain_text("news@acme.example", timeout=10_000)
    fits(page, "the broadcast editor")
    page.screenshot(path=str(screenshot_dir / f"identities-compose-{size}.png"), full_page=True)
    send_from.select_option(value=str(setup["product"]))
    expect(page.locator("#preview-pane")).to_contain_text("product-announcements@", timeout=10_000)

    key = identities.resolve(db.session, {}, setup["product"]).key
    Lease(redis_client, namespace, identity="mail-worker-eu-1.acme.example:48213:abcdef",
          stream=key).try_acquire()
    record_rate(redis_client, namespace, key, 1.96)
    page.goto(live_server.url + "/system/")
    table = page.locator("#stream-table")
    expect(table).to_contain_text("mail-worker-eu-1.acme.example:48213")
    expect(table).to_contain_text("1.96/s")
    expect(page.locator(f"#paused-{setup['relay']}")).to_contain_text("paused: The mail server refused")
    expect(page.locator('[data-check="identity Product updates"]')).to_contain_text("not checked yet")
    fits(page, "the System page")
    page.screenshot(path=str(screenshot_dir / f"identities-system-{size}.png"), full_page=True)
