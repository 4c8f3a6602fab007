"""The automations pages in Chromium, at a desktop width and on a phone: the list with live
counts, the editor (a mistake kept on the page), the dashboard's "due" panel and a
subscriber's automated messages; nothing may scroll sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.automations import entering, lifecycle
from broadside.campaigns.automations import service as automations
from broadside.core.models import MailingList, Subscriber, Subscription
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("postal_address")]

WIDTHS = {"desktop": 1280, "phone": 390}


def sideways(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.fixture
def setup(app) -> dict[str, int]:
    weekly = MailingList(name="The Weekly Dispatch of Remarkably Long List Names")
    db.session.add(weekly)
    db.session.flush()
    people = []
    for i in range(3):
        s = Subscriber(email=f"reader.with.a.long.address.{i}@subscribers.example.com", name=f"Reader {i}")
        db.session.add(s)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=s.id, list_id=weekly.id, status="active"))
        people.append(s.id)
    db.session.commit()

    def make(name, steps, **extra):
        data = automations.parse_input({
            "name": name, "trigger": {"type": "joined_list", "list_id": weekly.id}, "steps": steps,
            **extra})
        return automations.enable(db.session, automations.create_automation(
            db.session, data, default_from=app.config["MAIL_FROM"]).id)

    welcome = make("Welcome series", [
        {"delay": "PT0S", "subject": "Welcome to the Weekly, {{ name }}", "body": "Hello"},
        {"delay": "P3D", "subject": "Three things our readers love most about the Weekly Dispatch",
         "body": "Tips"},
        {"delay": "P1W", "subject": "How are we doing?", "body": "Reply"}])
    paused = make("Win-back", [{"delay": "PT0S", "subject": "We miss you", "body": "Come back"}], priority=5)
    entering.enter_joined(db.session, weekly.id, people, source="joined")
    lifecycle.move(db.session, paused.id, "pause",
                   "The mail server refused the login (535 5.7.8 Authentication credentials invalid).")
    db.session.commit()
    return {"welcome": welcome.id, "person": people[0], "list": weekly.id}


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_automations_pages_fit_a_desktop_and_a_phone(page: Page, live_server, owner, setup, size,
                                                          screenshot_dir):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/automations/")
    expect(page.get_by_role("heading", name="Welcome series")).to_be_visible()
    expect(page.get_by_text("Paused by the worker")).to_be_visible()
    expect(page.locator(f"#counts-{setup['welcome']}")).to_have_attribute("hx-trigger", "every 2s")
    assert sideways(page) <= 0, "the automations list scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"automations-{size}.png"), full_page=True)

    page.goto(live_server.url + f"/automations/{setup['welcome']}/edit")
    page.get_by_label("Delay after step 1").fill("a month")
    page.get_by_role("button", name="Save", exact=True).last.click()
    expect(page.locator("#editor-error")).to_contain_text("whole number of days")
    expect(page.locator("#step-2-delay-error")).to_contain_text("whole number of days")
    expect(page.get_by_label("Delay after step 1")).to_have_value("a month")
    assert sideways(page) <= 0, "the editor scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"automation-editor-{size}.png"), full_page=True)

    page.goto(live_server.url + "/")
    expect(page.locator("#automations-due")).to_contain_text("Welcome series")
    assert sideways(page) <= 0, "the dashboard scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"dashboard-automations-{size}.png"), full_page=True)

    page.goto(live_server.url + f"/subscribers/{setup['person']}")
    expect(page.locator("#automated")).to_contain_text("Three things our readers love")
    expect(page.locator("#automated")).to_contain_text("Welcome to the Weekly, Reader 0")  # as they get it
    assert sideways(page) <= 0, "the subscriber page scrolls sideways"
    page.screenshot(path=str(screenshot_dir / f"subscriber-automated-{size}.png"), full_page=True)


def test_add_a_step_needs_no_name_and_a_refused_test_send_says_why(page: Page, live_server, owner, setup):
    """Two things only a browser shows: "Add a step" on a new automation with its (required)
    name still empty (the browser's own check blocked it), and the status line of a refused
    test send (htmx swaps no 4xx answer, so it stayed empty)."""
    sign_in(page, live_server.url)
    page.goto(live_server.url + "/automations/new")
    page.get_by_role("button", name="Add a step").click()
    expect(page.get_by_label("Delay after step 1")).to_have_value("1")
    expect(page.get_by_label("Unit of the delay of step 2")).to_have_value("days")
    expect(page.get_by_label("Name", exact=True)).to_have_value("")

    page.goto(live_server.url + f"/automations/{setup['welcome']}/edit")
    page.locator("details.step-preview summary").first.click()
    address = page.get_by_label("Send a test to").first
    address.evaluate("e => { e.type = 'text'; e.required = false; }")  # what the server must refuse
    address.fill("not an address")
    page.get_by_role("button", name="Send test").first.click()
    expect(page.locator(".test-status.error").first).to_contain_text("Test not sent")
