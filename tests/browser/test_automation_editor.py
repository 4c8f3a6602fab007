"""The automation editor, the messages page and the System page's errors in Chromium, at a
desktop width and on a phone: a delay typed as a number and a unit (an API-written one shown
exactly), the merge-field report as the owner types (nothing saved) and after a save, the
failed count's link to the messages with their reasons, and the System page's link to them."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from broadside.core.models import AutomationStep, MailingList
from broadside.core.site_settings import update_settings
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = [pytest.mark.browser,
              pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")]

WIDTHS = {"desktop": 1280, "phone": 390}
REFUSED = "someone.with.a.rather.long.address@subscribers.example.com"


def sideways(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.fixture
def welcome(app, smtp_server, run_worker_burst) -> int:
    """An enabled two-step welcome (the second step 1 h 30 min later, as the API wrote it) to
    a list of three, one with a city; one of them refused by the server (a 5.1.1: suppressed as
    a hard bounce)."""
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    news = MailingList(name="The Weekly Dispatch of Remarkably Long List Names")
    db.session.add(news)
    db.session.commit()
    data = automations.parse_input({
        "name": "Welcome series", "trigger": {"type": "joined_list", "list_id": news.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome to the Weekly", "body": "Hello"},
                  {"delay": "PT1H30M", "subject": "A little later", "body": "Tips"}]})
    automation = automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)
    for email, city in ((REFUSED, None), ("ada@example.com", "Lisbon"), ("bo@example.com", None)):
        subscribers.save_subscriber(db.session, email=email, name="", list_ids=[news.id],
                                    attributes={"city": city} if city else {}, welcome=True)
    smtp_server.script.rcpt_replies = {REFUSED: ["550 5.1.1 No such user here"]}
    run_worker_burst()
    return automation.id


@pytest.mark.parametrize("size", list(WIDTHS))
def test_delay_units_and_the_live_merge_report(page: Page, live_server, owner, welcome, size,
                                                screenshot_dir):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + f"/automations/{welcome}/edit")
    amount = page.get_by_label("Delay after step 1")
    expect(amount).to_have_value("90")  # PT1H30M, exactly
    expect(page.get_by_label("Unit of the delay of step 2")).to_have_value("minutes")

    # A refused number is told under its field, and what was typed stays.
    amount.fill("soon")
    page.get_by_role("button", name="Save", exact=True).last.click()
    expect(page.locator("#step-2-delay-error")).to_contain_text("whole number of minutes")
    expect(page.get_by_label("Delay after step 1")).to_have_value("soon")
    # As the owner types, the report follows (nothing saved).
    page.get_by_label("Delay after step 1").fill("2")
    page.get_by_label("Unit of the delay of step 2").select_option("weeks")
    page.locator("#step-2-body").fill("Tips for {{ city }} and {{ attributes.city }}")
    report = page.locator("#merge-report")
    expect(report).to_contain_text("Did you mean {{ attributes.city }}?")
    # The refused one (550 5.1.1) is suppressed as a hard bounce, so no longer counted.
    expect(report).to_contain_text("1 of 2 people on its list has no city")
    step = db.session.scalars(select(AutomationStep).where(AutomationStep.position == 2)).one()
    assert step.body == "Tips"
    assert sideways(page) <= 0, "the editor scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"automation-editor-report-{size}.png"), full_page=True)

    # Saved, it comes back to the editor with the report, and the delay reads as typed.
    page.get_by_role("button", name="Save", exact=True).last.click()
    expect(page.locator(".flash-info")).to_contain_text("Check its merge fields below")
    expect(page.get_by_label("Delay after step 1")).to_have_value("2")
    expect(page.get_by_label("Unit of the delay of step 2")).to_have_value("weeks")
    expect(page.locator("#merge-report")).to_contain_text("{{ city }} is not a merge field")
    page.goto(live_server.url + "/automations/")
    expect(page.locator(f"#counts-{welcome}")).to_contain_text("2 weeks after the previous step")


@pytest.mark.parametrize("size", list(WIDTHS))
def test_a_failed_count_leads_to_the_messages_and_the_system_page_to_them(
        page: Page, live_server, owner, welcome, size, screenshot_dir):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/automations/")
    assert sideways(page) <= 0, "the automations page scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"automations-counts-{size}.png"), full_page=True)
    page.get_by_role("link", name="failed messages of step 1").click()
    expect(page.get_by_role("heading", name="Failed messages of “Welcome series”")).to_be_visible()
    table = page.locator("#message-table")
    expect(table).to_contain_text(REFUSED)
    expect(table).to_contain_text(
        "Refused by the mail server for this address (550 5.1.1 No such user here)")
    expect(table).to_contain_text("Step 1")
    assert sideways(page) <= 0, "the messages page scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"automation-messages-{size}.png"), full_page=True)

    page.goto(live_server.url + "/system/")
    errors = page.locator("#error-table")
    expect(errors).to_contain_text("Automation “Welcome series”, step 1:")
    assert sideways(page) <= 0, "the System page scrolls sideways"
    page.locator("#errors").screenshot(path=str(screenshot_dir / f"system-errors-{size}.png"))
    page.screenshot(path=str(screenshot_dir / f"system-automation-errors-{size}.png"), full_page=True)
    errors.get_by_role("link", name="Welcome to the Weekly").click()
    expect(page.locator("#message-table")).to_contain_text(REFUSED)
