"""Automations follow Settings, in Chromium at a desktop width and on a phone: an automation
without a postal address says why its messages are held and links to Settings; the Settings,
Design and identity pages say how many live automations a save reaches; saving the address
says it reached them and the held line is gone. Nothing may scroll sideways and no text may
leave its box."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import update

from broadside.campaigns.automations import service as automations
from broadside.core.models import Automation
from tests.browser.steps import sign_in
from tests.browser.test_design_page import WIDTHS, fits
from tests.helpers import make_identity, make_list
from webapp.extensions import db

pytestmark = pytest.mark.browser


def automation(app, name, list_id, identity_id=None) -> int:
    data = automations.parse_input({
        "name": name, "trigger": {"type": "joined_list", "list_id": list_id},
        "identity_id": identity_id,
        "steps": [{"delay": "PT0S", "subject": f"Welcome to {name}", "body": "Hello."},
                  {"delay": "P3D", "subject": "Three tips", "body": "Tips."}]})
    return automations.create_automation(db.session, data,
                                         default_from=app.config["MAIL_FROM"]).id


@pytest.mark.parametrize("size", list(WIDTHS))
def test_held_for_want_of_an_address_then_released_by_saving_it_in_settings(
        page: Page, live_server, app, owner, size, screenshot_dir):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    weekly = make_list(db.session, 0, name="Rocket News")
    welcome = automation(app, "Rocket News welcome", weekly.id)
    automation(app, "Rocket News onboarding series", weekly.id)
    product = make_identity("Product updates", "smtp://127.0.0.1:2525", 0)
    product_id = product.id
    automation(app, "Product tips", weekly.id, product_id)
    # Enabled before automations needed an address (an installation upgrading).
    db.session.execute(update(Automation).where(Automation.id == welcome).values(status="enabled"))
    db.session.commit()

    sign_in(page, live_server.url)
    page.goto(live_server.url + "/automations/")
    held = page.locator(f"#held-{welcome}")
    expect(held).to_contain_text("Held: add your postal address in Settings.")
    fits(page, "the automations page")
    page.screenshot(path=str(screenshot_dir / f"automations-held-{size}.png"), full_page=True)

    held.get_by_role("link", name="Open Settings").click()
    expect(page.get_by_role("heading", name="Settings", exact=True)).to_be_visible()
    reach = page.locator("#automations-reached")
    expect(reach).to_contain_text("Saving changes what the next messages of 3 live automations carry")
    fits(page, "the Settings page")
    page.locator("#sender").screenshot(path=str(screenshot_dir / f"settings-reach-{size}.png"))
    page.get_by_label("Sender name").fill("Acme Rocket News")
    page.get_by_label("Postal address").fill("Acme Ltd\n1 Launch Pad Road\nSpringfield")
    page.get_by_role("button", name="Save sender settings").click()
    expect(page.locator(".flash-success")).to_contain_text(
        "The next messages of 3 live automations carry it now.")
    fits(page, "the Settings page after saving")
    page.evaluate("window.scrollTo(0, 0)")  # the flash, above the form saved
    page.screenshot(path=str(screenshot_dir / f"settings-saved-{size}.png"))

    page.goto(live_server.url + "/automations/")
    expect(page.locator(f"#automation-{welcome}")).to_be_visible()
    expect(page.locator(".held-reason")).to_have_count(0)

    page.goto(live_server.url + "/settings/design")
    expect(page.locator("#automations-reached")).to_contain_text("3 live automations")
    fits(page, "the Design page")
    page.screenshot(path=str(screenshot_dir / f"design-reach-{size}.png"))

    page.goto(live_server.url + f"/settings/identities/{product_id}/edit")
    expect(page.locator("#automations-reached")).to_contain_text("1 live automation carry")
    fits(page, "an identity's page")
    page.screenshot(path=str(screenshot_dir / f"identity-reach-{size}.png"), full_page=True)
