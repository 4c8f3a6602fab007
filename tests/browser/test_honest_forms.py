"""Forms that say what they did, in Chromium at a desktop width and on a phone: adding a
webhook endpoint then reloading leaves one endpoint (Post/Redirect/Get), a refused attribute
line shows under Attributes, and a test send's "Fill merge fields from" picker fills the
email with the picked subscriber's details and says whose. Nothing may scroll sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import func, select

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import drafts
from broadside.core.models import MailingList, Subscriber, Subscription, TransactionalMessage, WebhookEndpoint
from tests.browser.steps import OVERFLOWING, fits, sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}


def open_at(page: Page, live_server, size: str) -> None:
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)


@pytest.mark.parametrize("size", list(WIDTHS))
def test_adding_a_webhook_then_reloading_leaves_one_endpoint(app, page: Page, live_server, owner,
                                                             screenshot_dir, size):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True
    open_at(page, live_server, size)
    page.goto(live_server.url + "/settings/webhooks")
    page.get_by_label("Endpoint URL").fill("http://127.0.0.1:9/hook")
    page.get_by_role("button", name="Add the endpoint").click()
    # No event ticked: the refusal is at the events, the URL kept.
    expect(page.locator("#webhook-events-error")).to_contain_text("Choose at least one event")
    expect(page.get_by_label("Endpoint URL")).to_have_value("http://127.0.0.1:9/hook")
    fits(page, "the refused endpoint form")
    page.screenshot(path=str(screenshot_dir / f"honest-webhook-refused-{size}.png"), full_page=True)

    page.get_by_label("subscriber.created").check()
    page.get_by_role("button", name="Add the endpoint").click()
    expect(page.get_by_role("heading", name="Webhook endpoint")).to_be_visible()
    secret = page.locator("#endpoint-secret").inner_text()
    assert secret.startswith("whsec_") and secret not in page.url
    page.reload()
    expect(page.get_by_role("button", name="Reveal the signing secret")).to_be_visible()
    assert page.locator("#endpoint-secret").count() == 0  # shown once
    page.goto(live_server.url + "/settings/webhooks")
    expect(page.locator("section.webhook")).to_have_count(1)
    assert db.session.scalar(select(func.count()).select_from(WebhookEndpoint)) == 1


@pytest.mark.parametrize("size", list(WIDTHS))
def test_an_attribute_line_refused_shows_under_attributes(page: Page, live_server, owner,
                                                         screenshot_dir, size):
    open_at(page, live_server, size)
    page.goto(live_server.url + "/subscribers/new")
    page.get_by_label("Email").fill("ana@example.com")
    page.get_by_label("Attributes").fill("city = Oslo\nplan gold")
    page.get_by_role("button", name="Add").click()
    expect(page.locator("#attributes-error")).to_contain_text("Attribute line 2 must look like")
    expect(page.get_by_label("Attributes")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#email-error")).to_have_count(0)
    expect(page.get_by_label("Email")).to_have_value("ana@example.com")
    fits(page, "the refused subscriber form")
    page.screenshot(path=str(screenshot_dir / f"honest-subscriber-refused-{size}.png"), full_page=True)


@pytest.fixture
def draft(app):
    news = MailingList(name="News")
    db.session.add(news)
    db.session.flush()
    for email, name in (("ana@example.com", "Ana"), ("bo@example.com", "Bo")):
        person = Subscriber(email=email, name=name, attributes={})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status="active"))
    db.session.commit()
    return drafts.create_draft(db.session, list_id=news.id, subject="Hi {{ name }}", body="Hello.")


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_test_send_picker_fills_in_the_picked_subscriber(page: Page, live_server, owner, draft,
                                                            screenshot_dir, size):
    open_at(page, live_server, size)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/edit")
    picker = page.get_by_label("Fill merge fields from")
    expect(picker).to_have_value("bo@example.com")  # the newest active one
    page.locator("#send-test-button").scroll_into_view_if_needed()
    fits(page, "the test form")
    page.locator(".send-card").screenshot(path=str(screenshot_dir / f"honest-test-picker-{size}.png"))

    picker.fill("nobody@example.com")
    page.locator("#send-test-button").click()
    expect(page.locator("#fill_from-error")).to_contain_text(
        "No subscriber has the address nobody@example.com")
    expect(page.get_by_label("Fill merge fields from")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Fill merge fields from")).to_have_value("nobody@example.com")
    fits(page, "the refused pick")
    page.locator(".send-card").screenshot(path=str(screenshot_dir / f"honest-test-picker-refused-{size}.png"))

    page.get_by_label("Fill merge fields from").fill("ana@example.com")
    page.locator("#send-test-button").click()
    expect(page.locator("#test-status")).to_contain_text(
        "Merge fields filled in with Ana's details (ana@example.com).")
    expect(page.locator("#fill_from-error")).to_have_count(0)
    db.session.expire_all()
    assert db.session.scalars(select(TransactionalMessage.subject)).all() == ["[Test] Hi Ana"]
    fits(page, "the test sent")
    page.locator(".send-card").screenshot(path=str(screenshot_dir / f"honest-test-picker-sent-{size}.png"))


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_other_changed_forms_fit_and_show_their_refusals(page: Page, live_server, owner, draft,
                                                             screenshot_dir, size):
    """The sign-up form, a list's settings, an automation step's test send and the "nothing
    to send again" page, looked at on both widths."""
    news = db.session.scalar(select(MailingList).where(MailingList.name == "News"))
    news.signup_enabled = True
    db.session.add(MailingList(name="Other"))
    db.session.commit()
    data = automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": news.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome {{ name }}", "body": "Glad you came."}]})
    automation = automations.create_automation(db.session, data, default_from="news@example.com")
    step_id = automations.steps_of(db.session, automation.id)[0].id
    open_at(page, live_server, size)

    page.goto(f"{live_server.url}/lists/{news.id}")
    page.locator("#name").fill("Other")
    page.locator("#description").fill("Kept as typed")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#name-error")).to_contain_text("There is already a list called")
    expect(page.locator("#description")).to_have_value("Kept as typed")
    fits(page, "the refused list settings")
    page.screenshot(path=str(screenshot_dir / f"honest-list-refused-{size}.png"), full_page=True)

    page.goto(f"{live_server.url}/automations/{automation.id}/edit")
    page.locator(f"#preview-{step_id} summary").click()
    page.locator(f"#fill-{step_id}").fill("ana@example.com")
    page.locator(f"#preview-{step_id}").get_by_role("button", name="Send test").click()
    expect(page.locator(f"#test-status-{step_id}")).to_contain_text(
        "Merge fields filled in with Ana's details (ana@example.com).")
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    assert page.evaluate(OVERFLOWING.replace("main ", f"#preview-{step_id} ")) == []
    page.locator(f"#preview-{step_id}").screenshot(
        path=str(screenshot_dir / f"honest-automation-test-{size}.png"))

    page.goto(f"{live_server.url}/broadcasts/{draft.id}/retry/transient")
    expect(page.get_by_role("heading", name="Nothing to send again")).to_be_visible()
    fits(page, "nothing to send again")
    page.screenshot(path=str(screenshot_dir / f"honest-retry-nothing-{size}.png"), full_page=True)

    page.goto(f"{live_server.url}/join/{news.id}")
    page.get_by_label("Email").fill("dee@localhost")  # the browser's own check lets it by
    page.get_by_label("Name (optional)").fill("Dee")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.locator("#email-error")).to_contain_text("not a valid email address")
    expect(page.get_by_label("Name (optional)")).to_have_value("Dee")
    fits(page, "the refused sign-up")
    page.screenshot(path=str(screenshot_dir / f"honest-signup-refused-{size}.png"), full_page=True)
