"""Settings -> Webhooks in Chromium, at a desktop width and on a phone: a refused URL keeps what
was typed, a new endpoint shows its secret, "Send a test event" goes through the real worker to
a real receiver on loopback, and the delivery log shows it delivered. Nothing may scroll
sideways and no text may leave its box."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from broadside.webhooks.signing import verify
from tests.browser.steps import fits, sign_in
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}


@pytest.mark.parametrize("size", list(WIDTHS))
def test_add_an_endpoint_send_a_test_event_and_see_it_in_the_log(
        app, page: Page, live_server, owner, run_worker_burst, screenshot_dir, size):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True  # the receiver is on loopback
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/")
    page.get_by_role("link", name="Webhooks", exact=True).click()
    expect(page.get_by_role("heading", name="Webhooks", level=1)).to_be_visible()
    expect(page.locator("#no-endpoints")).to_be_visible()

    with Receiver() as receiver:
        # A refusal keeps what was typed and ticked.
        page.get_by_label("Endpoint URL").fill("ftp://files.example.com/drop")
        page.get_by_label("subscriber.created").check()
        page.get_by_label("delivery.failed").check()
        page.get_by_role("button", name="Add the endpoint").click()
        expect(page.locator("#webhook-url-error")).to_contain_text("must start with https://")
        expect(page.get_by_label("Endpoint URL")).to_have_value("ftp://files.example.com/drop")
        expect(page.get_by_label("delivery.failed")).to_be_checked()
        expect(page.get_by_label("delivery.sent")).not_to_be_checked()
        fits(page, "the refused form")
        page.screenshot(path=str(screenshot_dir / f"webhooks-refused-{size}.png"), full_page=True)

        page.get_by_label("Endpoint URL").fill(receiver.url)
        page.get_by_role("button", name="Add the endpoint").click()
        expect(page.get_by_role("heading", name="Webhook endpoint")).to_be_visible()
        secret = page.locator("#endpoint-secret").inner_text()
        assert secret.startswith("whsec_")
        expect(page.locator("#empty-log")).to_be_visible()
        fits(page, "the new endpoint")
        page.screenshot(path=str(screenshot_dir / f"webhooks-added-{size}.png"), full_page=True)

        page.get_by_role("button", name="Send a test event").click()
        expect(page.get_by_role("status").filter(has_text="Test event evt_")).to_be_visible()
        expect(page.locator("#webhook-log")).to_contain_text("webhook.test")
        expect(page.locator("#webhook-log")).to_contain_text("pending")
        assert page.locator("#endpoint-secret").count() == 0  # shown once, then on request

        assert run_worker_burst() == 0
        page.reload()
        row = page.locator("#webhook-log tbody tr").first
        expect(row).to_contain_text("delivered")
        expect(row).to_contain_text("200")
        [request] = receiver.requests
        assert request.json()["type"] == "webhook.test"
        assert verify(secret, request.header("Broadside-Signature"), request.body, int(time.time()))
        fits(page, "the delivery log")
        page.screenshot(path=str(screenshot_dir / f"webhooks-log-{size}.png"), full_page=True)

        page.get_by_role("link", name="Back to Webhooks").click()
        card = page.locator("section.webhook")
        expect(card).to_contain_text("1 delivered")
        expect(card).to_contain_text("subscriber.created")
        fits(page, "the webhooks page")
        page.screenshot(path=str(screenshot_dir / f"webhooks-{size}.png"), full_page=True)
