"""The segment builder's "Edit as JSON" in Chromium: the box shows what the builder holds as
the owner types, and saving uses whichever of the two the owner changed last, as the page
says beside the Save button."""

import json

import pytest
from playwright.sync_api import Page, expect

from broadside.core.models import MailingList, Segment, Subscriber, Subscription
from broadside.segments import service
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser


def joined_within(days: int) -> dict:
    return {"all": [{"field": "joined", "op": "within_days", "value": days}]}


@pytest.fixture
def segment_id(app) -> int:
    weekly = MailingList(name="Weekly")
    person = Subscriber(email="ann@example.com", name="Ann")
    db.session.add_all([weekly, person])
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
    db.session.commit()
    return service.create_segment(db.session, "Newcomers", joined_within(30)).id


def saved_rules(segment_id: int) -> dict:
    db.session.expire_all()
    return db.session.get(Segment, segment_id).rules


def open_json(page: Page):
    page.get_by_text("Edit as JSON").click()
    return page.get_by_label("The rules as JSON")


def test_the_json_box_follows_the_builder_and_saving_uses_the_last_changed(
        page: Page, live_server, owner, segment_id, screenshot_dir):
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    sign_in(page, live_server.url)
    edit_url = f"{live_server.url}/segments/{segment_id}/edit"
    note = page.locator("#rules-source")

    # The builder changed: the box shows 7, not the saved 30.
    page.goto(edit_url)
    page.get_by_label("Condition 1: value").fill("7")
    box = open_json(page)
    expect(box).to_have_value(json.dumps(joined_within(7), indent=2))
    expect(note).to_have_text("Saving will use the builder.")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.locator("#segment-form").screenshot(path=str(screenshot_dir / f"segment-json-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})

    # Then the box: saving uses the JSON.
    box.fill(json.dumps(joined_within(14)))
    expect(note).to_have_text("Saving will use the JSON you edited.")
    page.set_viewport_size({"width": 390, "height": 900})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.locator("#segment-form").screenshot(path=str(screenshot_dir / "segment-json-edited-390.png"))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("button", name="Save segment").click()
    expect(page.get_by_text("The segment “Newcomers” is saved.")).to_be_visible()
    assert saved_rules(segment_id) == joined_within(14)

    # The reverse: the box, then the builder. Saving uses the builder, and the box shows it.
    page.goto(edit_url)
    expect(page.get_by_label("Condition 1: value")).to_have_value("14")
    box = open_json(page)
    box.fill(json.dumps(joined_within(21)))
    expect(note).to_have_text("Saving will use the JSON you edited.")
    page.get_by_label("Condition 1: value").fill("3")
    expect(note).to_have_text("Saving will use the builder.")
    expect(box).to_have_value(json.dumps(joined_within(3), indent=2))
    page.get_by_role("button", name="Save segment").click()
    expect(page.get_by_text("The segment “Newcomers” is saved.")).to_be_visible()
    assert saved_rules(segment_id) == joined_within(3)

    # Saved at once after typing, before the box caught up: still the builder's 5.
    page.goto(edit_url)
    open_json(page).fill(json.dumps(joined_within(60)))
    page.get_by_label("Condition 1: value").fill("5")
    page.get_by_label("Condition 1: value").press("Enter")
    expect(page.get_by_text("The segment “Newcomers” is saved.")).to_be_visible()
    assert saved_rules(segment_id) == joined_within(5)
    assert problems == []
