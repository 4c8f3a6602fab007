"""Settings -> Content of one-off messages, a person's page once their messages' content was
removed, and the System page's revisions in flight, in Chromium at a desktop width and on a
phone: a refused number says why under the field, a saved one is shown again with the period
it states, the 64-digit hash and the warning fit, nothing scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.core.models import AutomationStep
from broadside.delivery.content_retention import canonical_sha256
from tests.browser.steps import sign_in
from tests.browser.test_webhooks_page import WIDTHS, fits
from tests.webapp.test_content_retention_pages import (
    a_person,
    a_step_with_two_revisions,
    a_template,
    removed_messages,
    sent_from,
)
from webapp.extensions import db

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", list(WIDTHS))
def test_set_the_content_retention_and_see_what_is_left_of_a_message(
        app, page: Page, live_server, owner, screenshot_dir, size):
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/settings/#content")
    content = page.locator("#content")
    expect(content.locator("#content-days")).to_have_text("30 days")
    content.get_by_label("Keep the content of transactional and test messages for").fill("0")
    content.get_by_role("button", name="Save the content setting").click()
    expect(page.locator("#content_days-error")).to_contain_text("whole number from 1 to 3650")
    fits(page, "the refused content retention")
    page.locator("#content").scroll_into_view_if_needed()
    page.locator("#content").screenshot(path=str(screenshot_dir / f"content-refused-{size}.png"))

    page.locator("#content").get_by_label(
        "Keep the content of transactional and test messages for").fill("14")
    page.locator("#content").get_by_role("button", name="Save the content setting").click()
    expect(page.locator(".flash")).to_contain_text("keep their content for 14 days")
    expect(page.locator("#content-days")).to_have_text("14 days")
    fits(page, "the saved content retention")
    page.locator("#content").screenshot(path=str(screenshot_dir / f"content-saved-{size}.png"))
    page.screenshot(path=str(screenshot_dir / f"content-settings-page-{size}.png"), full_page=True)

    with app.app_context():
        person_id, _ = a_person()
        removed_messages(person_id, days=14)
        db.session.remove()
    page.goto(f"{live_server.url}/subscribers/{person_id}")
    one_off = page.locator("#one-off")
    expect(one_off).to_contain_text("content removed after 14 days")
    expect(one_off).to_contain_text(canonical_sha256("Confirm, Ana", "<p>Confirm</p>", "Confirm"))
    expect(one_off).to_contain_text("Their content is kept for 14 days")
    fits(page, "a person's removed messages")
    one_off.screenshot(path=str(screenshot_dir / f"content-person-{size}.png"))


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_system_page_warns_of_mail_from_an_old_revision(
        app, page: Page, live_server, owner, screenshot_dir, size):
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    with app.app_context():
        person_id, list_id = a_person()
        step_id, old, new = a_step_with_two_revisions(app, list_id)
        automation_id = db.session.get(AutomationStep, step_id).automation_id
        sent_from(step_id, old, [person_id], automation_id)
        a_template("Order receipt for a remarkably long shop name", revisions=2)
        db.session.remove()
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/system/#revisions")
    warning = page.locator("#outdated-revisions")
    expect(warning).to_contain_text(f"Welcome, step 1 (revision {old}, frozen 2 days before the "
                                    f"newest, revision {new})")
    expect(page.locator("#revisions-table")).to_contain_text("Welcome, step 1")
    fits(page, "the revisions in flight")
    page.locator("#revisions").scroll_into_view_if_needed()
    page.locator("#revisions").screenshot(path=str(screenshot_dir / f"revisions-{size}.png"))
    page.screenshot(path=str(screenshot_dir / f"system-page-{size}.png"), full_page=True)
