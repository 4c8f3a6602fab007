from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.steps import fits

pytestmark = pytest.mark.browser
OUT = "/tmp/settings/shots"
PAGES = {"settings": "/settings/", "security": "/settings/security/",
         "identities": "/settings/identities/", "deliverability": "/deliverability/",
         "audit": "/settings/audit/", "webhooks": "/settings/webhooks"}


@pytest.mark.parametrize("lang", ["de", "fr"])
@pytest.mark.parametrize("width", [1280, 390])
def test_shots(page: Page, live_server, owner, width, lang):
    page.set_default_timeout(8_000)
    page.set_viewport_size({"width": width, "height": 900})
    page.set_extra_http_headers({"Accept-Language": lang})
    page.goto(live_server.url + "/login")
    page.screenshot(path=f"{OUT}/login-{lang}-{width}.png", full_page=True)
    fits(page, "login")
    page.locator("#email").fill(owner.email)
    from tests.helpers import OWNER_PASSWORD
    page.locator("#password").fill(OWNER_PASSWORD)
    page.locator("button[type=submit]").click()
    page.wait_for_url(live_server.url + "/")
    page.goto(live_server.url + "/settings/")
    page.locator("#sender-name, #sender_name").fill("Acme Weekly")
    page.locator("#sender button[type=submit]").click()
    problems = []
    for name, url in PAGES.items():
        page.goto(live_server.url + url)
        page.wait_for_timeout(300)
        page.screenshot(path=f"{OUT}/{name}-{lang}-{width}.png", full_page=True)
        try:
            fits(page, name)
        except AssertionError as exc:
            problems.append(str(exc)[:400])
    assert not problems, problems
