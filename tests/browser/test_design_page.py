"""Settings -> Design in Chromium, at a desktop width and on a phone: upload a logo, change the
colour and the footer text and watch the sample email's preview follow (HTMX), save; then a
visitor's sign-up page and unsubscribe page carry the logo and the colour. Nothing may scroll
sideways and no text may leave its box."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from broadside.audience import lists as lists
from broadside.core.models import Subscriber, Subscription
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from tests.design_images import png
from tests.helpers import make_token
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}
OVERFLOWING = """() => [...document.querySelectorAll(`main p, main li, main label, main small,
  main h1, main h2, main h3, main button, main code`)]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 60))"""
LOADED = "e => e.complete && e.naturalWidth > 0"


def fits(page: Page, what: str) -> None:
    wider = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wider <= 0, f"{what} scrolls sideways ({wider}px)"
    assert page.evaluate(OVERFLOWING) == [], f"{what}: text out of its box"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_design_a_logo_and_colour_with_a_live_preview_then_see_them_on_public_pages(
        page: Page, live_server, owner, size, screenshot_dir):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    update_settings(db.session, sender_name="Acme Rocket News", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Launch Pad Road\nSpringfield", time_zone="UTC")
    weekly = lists.create_list(db.session, "Rocket News", "Launch reports every Friday",
                               signup_enabled=True)
    reader = Subscriber(email="reader@example.org", name="Reader", attributes={})
    db.session.add(reader)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=reader.id, list_id=weekly.id, status="active"))
    db.session.commit()

    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/")
    page.locator("#design-link").click()
    expect(page.get_by_role("heading", name="Design", exact=True)).to_be_visible()

    page.get_by_label("Logo image").set_input_files(
        {"name": "rocket.png", "mimeType": "image/png", "buffer": png(480, 120, (20, 20, 90))})
    page.get_by_role("button", name="Upload the logo").click()
    expect(page.locator(".flash-success")).to_contain_text("Logo saved")
    expect(page.locator("#current-logo")).to_be_visible()
    assert page.locator("#current-logo").evaluate(LOADED)
    preview = page.frame_locator("#design-preview-frame")
    expect(preview.locator("img").first).to_have_attribute("alt", "Acme Rocket News logo")
    assert preview.locator("img").first.evaluate(LOADED)

    # The preview follows the typing, before anything is saved (and the CSRF token stays out
    # of its URLs, which servers log).
    previews: list[str] = []
    page.on("request", lambda r: previews.append(r.url) if "/design/preview" in r.url else None)
    page.get_by_label("Brand colour").fill("#aa3300")
    expect(page.locator("#design-preview-frame")).to_have_attribute("src", re.compile("aa3300"))
    expect(preview.locator("td.content")).to_have_css("border-top-color", "rgb(170, 51, 0)")
    page.get_by_label("Footer text").fill("You get this because you love rockets.")
    expect(preview.locator("td.footer")).to_contain_text("You get this because you love rockets.")
    page.get_by_label("Email width (pixels)").fill("300")
    expect(page.locator("#design-preview .preview-problem")).to_contain_text("from 480 to 800")
    page.get_by_label("Email width (pixels)").fill("640")
    expect(page.locator("#design-preview .preview-problem")).to_have_count(0)
    page.get_by_label("Font", exact=True).select_option("serif")
    expect(preview.locator("td.content")).to_have_css("font-family", re.compile("Georgia"))
    assert previews and not any("csrf" in url for url in previews)
    fits(page, "the Design page")
    page.screenshot(path=str(screenshot_dir / f"design-{size}.png"), full_page=True)
    page.locator("#design-preview").screenshot(
        path=str(screenshot_dir / f"design-preview-{size}.png"))

    page.get_by_role("button", name="Save the design").click()
    expect(page.locator(".flash-success")).to_contain_text("Design saved")
    expect(page.get_by_label("Brand colour")).to_have_value("#aa3300")
    expect(page.get_by_label("Footer text")).to_have_value("You get this because you love rockets.")
    # Enter in a text saves the texts (the form's first button is Save, not a Reset).
    heading = page.get_by_role("textbox", name="Sign-up page: heading")
    heading.fill("Join {{ list_name }} today")
    heading.press("Enter")
    expect(page.locator(".flash-success")).to_contain_text("Texts saved")
    expect(heading).to_have_value("Join {{ list_name }} today")

    # A visitor (no session) sees the owner's brand on the public pages.
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/join/{weekly.id}")
    expect(page.get_by_role("heading", name="Join Rocket News today")).to_be_visible()
    logo = page.locator("#brand-logo")
    expect(logo).to_have_attribute("alt", "Acme Rocket News logo")
    assert logo.evaluate(LOADED)
    expect(page.locator("#brand-header")).to_have_css("border-top-color", "rgb(170, 51, 0)")
    expect(page.get_by_role("button", name="Subscribe")).to_have_css(
        "background-color", "rgb(170, 51, 0)")
    fits(page, "the sign-up page")
    page.screenshot(path=str(screenshot_dir / f"design-public-signup-{size}.png"), full_page=True)

    page.goto(f"{live_server.url}/u/{make_token(reader.id, weekly.id)}")
    expect(page.get_by_role("button", name="Unsubscribe")).to_be_visible()
    assert page.locator("#brand-logo").evaluate(LOADED)
    expect(page.get_by_role("button", name="Unsubscribe")).to_have_css(
        "background-color", "rgb(170, 51, 0)")
    fits(page, "the unsubscribe page")
    page.screenshot(path=str(screenshot_dir / f"design-public-unsubscribe-{size}.png"),
                    full_page=True)
