"""The System page's worker line with sending identities: it names each identity whose stream
no worker serves, and the long line stays inside its box on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.delivery.lease import Lease
from tests.browser.steps import sign_in
from tests.helpers import make_identity

pytestmark = pytest.mark.browser


def test_the_worker_line_names_the_identities_nobody_serves(page: Page, app, live_server, owner,
                                                           redis_client, namespace, screenshot_dir):
    make_identity("Product updates", "smtp://127.0.0.1:2525", 100)
    make_identity("Shop", "smtp://127.0.0.1:2526", 100, email="shop@product.example")
    assert Lease(redis_client, namespace, identity="web-1:4242:abc123").try_acquire()
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/system")
    line = page.locator('[data-check="worker"]')
    expect(line).to_contain_text("no worker serves the stream of “Product updates”, “Shop”")
    expect(line.locator(".mark")).to_have_text("✗")
    line.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "system-worker-line-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    line.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "system-worker-line-390.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
