"""The segment builder in Chromium: built with the visual controls, the live count following
each change without a reload, then saved and listed."""

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.core.models import MailingList, Segment, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser


def settled(page: Page) -> None:
    """Swapped-in controls carry htmx's `htmx-added` class until htmx has settled them and
    bound their requests: wait for that before using them."""
    expect(page.locator(".htmx-added")).to_have_count(0)


def sideways(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.fixture
def audience(app) -> dict[str, int]:
    weekly, monthly = MailingList(name="Weekly"), MailingList(name="Monthly")
    db.session.add_all([weekly, monthly])
    db.session.flush()
    for email, city, mailing_list, days_ago in [
        ("ann@example.com", "Berlin", weekly, 400),   # matches: Berlin, on Weekly
        ("bob@example.com", "Berlin", monthly, 3),    # matches: Berlin, joined lately
        ("cem@example.com", "Berlin", monthly, 400),  # Berlin only
        ("dee@example.com", "Paris", weekly, 3),      # not Berlin
    ]:
        person = Subscriber(email=email, name=email.split("@")[0].title(), attributes={"city": city})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=mailing_list.id, status="active",
                                    created_at=utcnow() - timedelta(days=days_ago)))
    db.session.commit()
    return {"weekly": weekly.id}


def test_build_a_segment_watch_the_count_and_save_it(page: Page, live_server, owner, audience):
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    sign_in(page, live_server.url)
    page.get_by_role("navigation").get_by_role("link", name="Segments", exact=True).click()
    expect(page.get_by_role("heading", name="No segments yet")).to_be_visible()
    page.get_by_role("link", name="New segment").click()
    expect(page.get_by_role("heading", name="New segment")).to_be_visible()
    page.evaluate("window.stillTheSamePage = true")
    count = page.locator("#preview-result")
    expect(count).to_contain_text("Condition 1: choose a field.")

    page.get_by_label("Name", exact=True).fill("Berlin regulars")
    # Choosing a field swaps in the controls that fit it (htmx), no reload.
    page.get_by_label("Condition 1: field").select_option(label="Attribute")
    expect(page.get_by_label("Condition 1: attribute name")).to_be_visible()
    settled(page)
    page.get_by_label("Condition 1: attribute name").fill("city")
    expect(page.get_by_label("Condition 1: operator")).to_have_value("equals")
    page.get_by_label("Condition 1: value").fill("Berlin")
    expect(page.locator("#preview-count")).to_have_text("3 people match")

    # Add group: a nested "any" group, its first field focused once htmx has set it up.
    page.get_by_role("button", name="Add group", exact=True).click()
    expect(page.get_by_label("Condition 2.1: field")).to_be_focused()
    expect(page.get_by_label("Group 2: how conditions combine")).to_have_value("any")
    expect(count).to_contain_text("Condition 2.1: choose a field.")
    page.get_by_label("Condition 2.1: field").select_option(label="List")
    expect(page.get_by_label("Condition 2.1: operator")).to_have_value("is_on")
    settled(page)
    page.get_by_label("Condition 2.1: value").select_option(label="Weekly")
    expect(page.locator("#preview-count")).to_have_text("1 person matches")  # Berlin and Weekly
    page.get_by_role("button", name="Add condition to group 2").click()
    expect(page.get_by_label("Condition 2.2: field")).to_be_focused()
    expect(count).to_contain_text("Condition 2.2: choose a field.")
    page.get_by_label("Condition 2.2: field").select_option(label="Joined a list")
    expect(page.get_by_label("Condition 2.2: operator")).to_have_value("before")
    settled(page)
    page.get_by_label("Condition 2.2: operator").select_option(label="within the last N days")
    expect(page.get_by_label("Condition 2.2: value")).to_have_attribute("type", "number")
    settled(page)
    page.get_by_label("Condition 2.2: value").fill("30")
    expect(page.locator("#preview-count")).to_have_text("2 people match")
    expect(page.locator("#preview-sample")).to_contain_text("ann@example.com")
    expect(page.locator("#preview-sample")).to_contain_text("bob@example.com")
    assert page.evaluate("window.stillTheSamePage") is True

    page.get_by_role("button", name="Save segment").click()
    expect(page.get_by_text("The segment “Berlin regulars” is saved.")).to_be_visible()
    row = page.locator(".segment-item", has_text="Berlin regulars")
    expect(row).to_contain_text("city is Berlin and (on Weekly or joined within the last 30 days)")
    expect(row.locator(".count")).to_have_text("2 people")
    db.session.expire_all()
    assert db.session.scalar(select(Segment.rules)) == {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"},
        {"any": [{"field": "list", "op": "is_on", "value": audience["weekly"]},
                 {"field": "joined", "op": "within_days", "value": 30}]},
    ]}

    # On a phone the list and the builder with its nested group stay inside the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    assert sideways(page) <= 0, "the segments list scrolls sideways on a phone"
    page.get_by_role("link", name="Berlin regulars", exact=True).click()
    expect(page.get_by_label("Condition 2.2: value")).to_have_value("30")
    assert sideways(page) <= 0, "the builder scrolls sideways on a phone"
    assert problems == []
