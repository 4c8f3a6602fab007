"""A subscriber's own data through a real Chromium, JavaScript off, at 390 px and desktop width:
from the preferences page of their link, download the JSON file, then erase everything after
the confirmation page; the link then says the address is no longer on our lists."""

import json

import pytest
from playwright.sync_api import Browser, Page, expect

from broadside.core.models import Subscriber, TransactionalMessage
from broadside.core.timeutil import utcnow
from tests.helpers import make_token
from tests.webapp.test_unsubscribe import add_list, add_subscriber
from webapp.extensions import db

pytestmark = pytest.mark.browser

PHONE, DESKTOP = 390, 1280
EMAIL = "maximiliana.featherstonehaugh-worthington@correspondence.remarkably-long-name.example.com"


def look(page: Page, folder, name: str) -> None:
    """Both widths: nothing scrolls sideways; a screenshot of each."""
    for width in (PHONE, DESKTOP):
        page.set_viewport_size({"width": width, "height": 800})
        overflow = page.evaluate("() => document.documentElement.scrollWidth"
                                 " - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow} px at {width} px"
        page.screenshot(path=str(folder / f"personal-data-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": PHONE, "height": 800})


def test_download_my_data_then_erase_me_from_the_preferences_page(
    browser: Browser, live_server, screenshot_dir
):
    weekly, daily = add_list("Weekly Notes"), add_list("Daily Digest")
    person = add_subscriber(EMAIL, {weekly: "active", daily: "unsubscribed"},
                            name="Maximiliana", attributes={"city": "Llandudno"})
    db.session.add(TransactionalMessage(kind="confirmation", to_email=EMAIL, subscriber_id=person,
                                        subject="Confirm your subscription", status="sent",
                                        sent_at=utcnow()))
    db.session.commit()
    preferences = f"{live_server.url}/u/{make_token(person, weekly)}/preferences"

    context = browser.new_context(java_script_enabled=False, accept_downloads=True)
    try:
        page = context.new_page()
        page.set_viewport_size({"width": PHONE, "height": 800})
        page.goto(preferences)
        expect(page.get_by_role("heading", name="Your data")).to_be_visible()
        look(page, screenshot_dir, "preferences")

        with page.expect_download() as download_info:
            page.get_by_role("button", name="Download my data").click()
        download = download_info.value
        assert download.suggested_filename.startswith("my-data-")
        assert download.suggested_filename.endswith(".json")
        data = json.loads(download.path().read_text(encoding="utf-8"))
        assert data["person"] == {"email": EMAIL, "name": "Maximiliana",
                                  "attributes": {"city": "Llandudno"},
                                  "added_at": data["person"]["added_at"]}
        assert {s["list"]: s["status"] for s in data["subscriptions"]} == {
            "Weekly Notes": "active", "Daily Digest": "unsubscribed"}
        assert [m["subject"] for m in data["messages"]] == ["Confirm your subscription"]
        expect(page.get_by_role("heading", name="Your data")).to_be_visible()  # still here

        page.get_by_role("link", name="Erase me…").click()
        expect(page.get_by_role("heading", name="Erase your data?")).to_be_visible()
        expect(page.get_by_text("This cannot be undone.")).to_be_visible()
        look(page, screenshot_dir, "erase-confirm")
        db.session.rollback()
        assert db.session.get(Subscriber, person) is not None  # asking changed nothing

        page.get_by_role("button", name="Erase everything about me").click()
        expect(page.get_by_role("heading", name="This address is no longer on our lists")).to_be_visible()
        expect(page.get_by_text(EMAIL)).to_be_visible()
        look(page, screenshot_dir, "erased")
        db.session.rollback()
        assert db.session.get(Subscriber, person) is None

        response = page.goto(preferences)  # the link in an older email, later
        assert response is not None and response.status == 404
        expect(page.get_by_role("heading", name="This address is no longer on our lists")).to_be_visible()
        expect(page.get_by_text(EMAIL)).to_have_count(0)
        look(page, screenshot_dir, "link-after-erase")
        assert context.cookies() == []
    finally:
        context.close()
