"""What a writer meets in Chromium when their role stops them (issue 41), at a desktop width
and on a phone: the save of an automation that is on, refused with the sentence above their
input, kept; a test send to another address, refused under the field; the send page's button
answered by the 403 page. Nothing scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core import roles
from broadside.core.site_settings import update_settings
from tests.browser.steps import fits
from tests.helpers import OWNER_PASSWORD, make_list
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}


def sideways(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.mark.parametrize("size", WIDTHS)
def test_a_writer_is_told_what_their_role_stops(page: Page, live_server, make_person, size,
                                                screenshot_dir):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    weekly = make_list(db.session, 2)
    draft = create_draft(db.session, list_id=weekly.id, subject="Spring news", body="Hello")
    automation = automations.create_automation(db.session, automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": "Welcome."}]}),
        default_from="news@acme.example")
    automations.enable(db.session, automation.id)
    writer = make_person(roles.WRITER, "wendy@example.com")
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    page.goto(live_server.url + "/login")
    page.get_by_label("Email").fill(writer.email)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

    # An automation that is on opens read-only for a writer, saying who can turn it off (the
    # server's refusal of a save is tests/webapp/test_role_rules.py's).
    page.goto(live_server.url + f"/automations/{automation.id}/edit")
    expect(page.get_by_text("then you can edit it here")).to_be_visible()
    expect(page.locator("#name")).to_be_disabled()
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    page.screenshot(path=str(screenshot_dir / f"role-automation-on-{size}.png"), full_page=True)
    assert sideways(page) <= 0, f"the read-only editor scrolls sideways ({size})"

    # A writer's test send goes to their own address: the field holds it, read-only.
    page.goto(live_server.url + f"/broadcasts/{draft.id}/edit")
    field = page.get_by_label("Send a test to")
    expect(field).to_have_value(writer.email)
    expect(field).not_to_be_editable()
    page.get_by_role("button", name="Send test").click()
    expect(page.locator("#test-status")).to_contain_text("Test queued for wendy@example.com")
    fits(page, f"the writer's test send ({size})")
    page.locator("#test-status").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / f"role-test-send-{size}.png"))

    page.goto(live_server.url + f"/broadcasts/{draft.id}/send")
    send = page.get_by_role("button", name="Send now")
    if send.count():  # the buttons a role cannot use are hidden elsewhere (issue 41)
        send.first.click()
        expect(page.get_by_text("does not allow this")).to_be_visible()
        fits(page, f"the refused send ({size})")
        page.screenshot(path=str(screenshot_dir / f"role-send-refused-{size}.png"), full_page=True)
