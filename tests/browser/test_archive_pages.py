"""Through Chromium: the owner turns a list's public archive on and publishes a sent
broadcast; a visitor (no cookie) reads the index and the issue at desktop width and on a
phone, sees nobody's data, and reaches the sign-up form from it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from broadside.audience import lists as lists
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Subscriber, Subscription
from tests.browser.steps import sign_in
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.browser

BODY = """# What changed this month

Hi {{ name }}, here is the news from {{ attributes.city or "everywhere" }}.

- Exports are **twice as fast**
- A dark mode, at last
- Read the notes at https://acme.example.com/changelog/2026/november-release-notes-with-a-very-long-address

> Quoted from a reader who wrote in with a long and thoughtful letter about the changes.

```
flask --app webapp db upgrade && flask --app webapp worker --with-a-very-long-option-name
```
"""
NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def test_the_owner_publishes_and_a_visitor_reads_the_archive_on_desktop_and_phone(
        page: Page, browser: Browser, live_server, owner, smtp_server, run_worker_burst,
        screenshot_dir):
    weekly = lists.create_list(db.session, "The Acme Weekly", "News from Acme, every Friday.",
                               signup_enabled=True)
    person = Subscriber(email="zebediah.quux@example.org", name="Zebediah Quuxley",
                        attributes={"city": "Xyloville"})
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
    db.session.commit()
    draft = create_draft(db.session, list_id=weekly.id, subject="November at Acme, {{ name }}",
                         body=BODY)
    broadcast_id = send_broadcast(db.session, draft.id, default_from="news@acme.example",
                                  jobs=get_jobs()).id
    run_worker_burst()

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/lists/{weekly.id}")
    page.get_by_role("button", name="Turn the public archive on").click()
    expect(page.locator("#archive")).to_contain_text("On: the issues you publish")
    page.goto(f"{live_server.url}/broadcasts/{broadcast_id}")
    page.get_by_role("button", name="Publish to the archive").click()
    expect(page.get_by_text("Published in the public archive.")).to_be_visible()
    card = page.locator("#archive")
    expect(card.get_by_role("link", name="the public page")).to_be_visible()
    page.set_viewport_size({"width": 390, "height": 800})
    card.screenshot(path=str(screenshot_dir / "archive-broadcast-card-390.png"))

    visitor = browser.new_context()  # no owner's cookie
    reader = visitor.new_page()
    reader.set_default_timeout(5_000)
    for width in (1280, 390):
        reader.set_viewport_size({"width": width, "height": 800})
        reader.goto(f"{live_server.url}/archive/{weekly.id}/")
        expect(reader.get_by_role("heading", name="The Acme Weekly")).to_be_visible()
        expect(reader.locator("#archive-issues li")).to_have_count(1)
        assert reader.evaluate(NO_SIDEWAYS), f"the index scrolls sideways at {width} px"
        reader.screenshot(path=str(screenshot_dir / f"archive-index-{width}.png"), full_page=True)

        reader.get_by_role("link", name="November at Acme, reader").click()
        expect(reader).to_have_url(re.compile(rf"/archive/{weekly.id}/{broadcast_id}-november-at-acme-reader$"))
        expect(reader.get_by_role("heading", name="What changed this month")).to_be_visible()
        article = reader.locator("#archive-issue")
        expect(article).to_contain_text("Hi reader, here is the news from everywhere.")
        text = reader.locator("body").inner_text()
        assert "Zebediah" not in text and "Xyloville" not in text and "Unsubscribe" not in text
        assert reader.evaluate(NO_SIDEWAYS), f"the issue scrolls sideways at {width} px"
        reader.screenshot(path=str(screenshot_dir / f"archive-issue-{width}.png"), full_page=True)

    reader.get_by_role("link", name="Subscribe to The Acme Weekly").click()
    expect(reader.get_by_role("heading", name="Subscribe to The Acme Weekly")).to_be_visible()
    visitor.close()
