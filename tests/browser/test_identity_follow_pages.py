"""The identities page at its bound (MAX_IDENTITIES reached: the count and the reason, no form)
and the System page with a stream still running on values saved since ("applying at the next
tick"), in Chromium at a desktop width and on a phone: nothing scrolls sideways, no text
leaves its box, no secret reaches either page."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.delivery.identities import lifecycle
from broadside.delivery.identities import service as identities
from broadside.delivery.lease import Lease
from broadside.delivery.streams import record_rate, record_running, running_values
from tests.browser.steps import sign_in
from tests.browser.test_identities_pages import TOKEN, WIDTHS, fits
from tests.smtp_server import free_port
from webapp.extensions import db

pytestmark = pytest.mark.browser


@pytest.fixture
def made(app, smtp_server) -> dict[str, int]:
    """Two identities (one paused), as the identities pages' test has them."""
    app.config["SMTP_URL"] = smtp_server.url
    app.config["SEND_HOURLY_LIMIT"] = 3000

    def make(name, transport, **extra):
        return identities.create(db.session, identities.parse_input({
            "name": name, "from": "Acme Product Announcements <product-announcements@acme.example>",
            "transport": transport, **extra})).id

    product = make("Product updates", f"postmark://{TOKEN}@", delay_ms=500, hourly_limit=10000)
    relay = make("Regional relay in Frankfurt", f"smtp://127.0.0.1:{free_port()}")
    lifecycle.pause(db.session, relay, "The mail server refused the login (535 5.7.8 Authentication "
                    "credentials invalid).")
    db.session.commit()
    return {"product": product, "relay": relay}


@pytest.fixture
def app_config(app_config):
    app_config["MAX_IDENTITIES"] = 2  # the two `made` makes
    return app_config


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_bound_and_a_stream_applying_its_changes_fit(page: Page, app, live_server, owner, made, size,
                                                         screenshot_dir, redis_client, namespace):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/identities/")
    expect(page.locator("#identity-count")).to_contain_text("2 of 2 identities besides the default")
    expect(page.locator("#identity-bound")).to_contain_text("raise MAX_IDENTITIES")
    expect(page.get_by_role("button", name="Save the identity")).to_have_count(0)
    fits(page, "the identities page at its bound")
    page.locator("#new-identity").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / f"identities-bound-{size}.png"), full_page=True)
    page.locator("#new-identity").screenshot(path=str(screenshot_dir / f"identities-bound-card-{size}.png"))

    product = identities.resolve(db.session, app.config, made["product"])
    Lease(redis_client, namespace, identity="mail-worker-eu-1.acme.example:48213:abcdef",
          stream=product.key).try_acquire()
    record_rate(redis_client, namespace, product.key, 1.96)
    record_running(redis_client, namespace, product.key, running_values(product, app.config["SECRET_KEY"]))
    identities.update(db.session, product.id, identities.parse_input(
        {"name": "Product updates", "from": "Acme Product Announcements <product-announcements@acme.example>",
         "transport": f"postmark://{TOKEN}-rotated@", "delay_ms": 250, "hourly_limit": 20000},
        updating=True))
    page.goto(live_server.url + "/system/")
    applying = page.locator(f"#applying-{product.id}")
    expect(applying).to_contain_text("applying at the next tick")
    expect(applying).to_contain_text("500 ms, cap 10,000")
    expect(applying).to_contain_text("saved: 250 ms, cap 20,000")
    fits(page, "the System page with a stream applying its changes")
    page.screenshot(path=str(screenshot_dir / f"identities-system-applying-{size}.png"), full_page=True)
    page.locator(f"#stream-{product.id}").screenshot(
        path=str(screenshot_dir / f"identities-system-applying-row-{size}.png"))
