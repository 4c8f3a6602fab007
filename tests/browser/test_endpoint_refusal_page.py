"""The identity form refusing a provider endpoint inside the owner's network, in Chromium at a
desktop width and on a phone: the sentence under the transport field names the address and
the flag, fits its box, and the typed token is not shown back."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.steps import sign_in
from tests.browser.test_identities_pages import WIDTHS, sideways

pytestmark = pytest.mark.browser

TOKEN = "0f9a1b2c-3d4e-5f60-7182-93a4b5c6d7e8"


@pytest.mark.parametrize("size", list(WIDTHS))
def test_an_endpoint_inside_is_refused_under_the_field_and_fits(page: Page, app, live_server, owner,
                                                                 size, screenshot_dir):
    app.config["PROVIDER_ENDPOINTS_ALLOW_PRIVATE"] = False
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/identities/")
    page.get_by_label("Name", exact=True).fill("Relay")
    page.get_by_label("From", exact=True).fill("Acme <news@acme.example>")
    page.get_by_label("Transport URL").fill(f"postmark://{TOKEN}@?endpoint=http://[64:ff9b::a00:8]:8025")
    page.get_by_role("button", name="Save the identity").click()
    error = page.locator("#identity-transport-error")
    expect(error).to_contain_text("10.0.0.8 inside NAT64 64:ff9b::/96")
    expect(error).to_contain_text("PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1")
    assert sideways(page) <= 0
    assert error.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    assert TOKEN not in page.content()
    page.screenshot(path=str(screenshot_dir / f"identity-endpoint-refused-{size}.png"), full_page=True)
