"""The pages that name broadcasts, in Chromium at 1280 and 390 px: the dashboard, the
broadcasts list and a broadcast's page name a segment broadcast by its segment and a gone one
for what it was, show subjects as the newest reader reads them, and the opens and clicks card
gives rates beside its counts in English. Each page photographed at both widths, none
scrolling sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import update

from broadside.campaigns.analytics import modes
from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription, TrackingDay
from broadside.segments import service as segments
from tests.browser.steps import sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
SUBJECT = "{{ name }}, your autumn notes from {{ attributes.city or 'us' }} are here"
AS_READ = "Ana, your autumn notes from Berlin are here"


def sent(app, draft: Broadcast, *, sent_count: int) -> int:
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=None)
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id).values(
        status="sent", sent_count=sent_count, pending_count=0, total=sent_count))
    db.session.commit()
    return draft.id


@pytest.fixture
def broadcasts(app) -> dict[str, int]:
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    for email, name, city in [("olga@example.com", "Olga", "Oslo"), ("ana@example.com", "Ana", "Berlin")]:
        person = Subscriber(email=email, name=name, attributes={"city": city})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
    db.session.commit()
    everyone = {"all": [{"field": "email", "op": "contains", "value": "@"}]}
    berlin = segments.create_segment(db.session, "Berlin readers", everyone)
    gone = segments.create_segment(db.session, "Summer readers", everyone)
    tracked = drafts.create_draft(db.session, segment_id=berlin.id, subject=SUBJECT, body="Hi {{ name }}")
    modes.choose(db.session, tracked.id, modes.AGGREGATE)
    made = {"segment": sent(app, tracked, sent_count=2),
            "gone": sent(app, drafts.create_draft(db.session, segment_id=gone.id,
                                                  subject="Summer is over", body="x"), sent_count=2),
            "list": drafts.create_draft(db.session, list_id=weekly.id, subject="Winter plans", body="x").id}
    db.session.add(TrackingDay(broadcast_id=made["segment"], day=0, opens=1, clicks=1, bot_clicks=1))
    db.session.commit()
    segments.delete_segment(db.session, gone.id)
    return made


def photograph(page: Page, folder, name: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        width_seen = page.evaluate("document.documentElement.scrollWidth")
        assert width_seen <= width, f"{name} scrolls sideways at {width}px ({width_seen}px)"
        page.screenshot(path=str(folder / f"honest-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_audiences_subjects_and_rates_on_the_pages_that_name_broadcasts(
        page: Page, live_server, owner, broadcasts, screenshot_dir):
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    sign_in(page, live_server.url)

    recent = page.locator("#recent-broadcasts")
    expect(recent.get_by_role("row", name=AS_READ)).to_contain_text("segment Berlin readers")
    expect(recent.get_by_role("row", name="Summer is over")).to_contain_text("(segment deleted)")
    expect(recent.get_by_role("row", name="Winter plans")).to_contain_text("Weekly")
    expect(recent).not_to_contain_text("{{")
    photograph(page, screenshot_dir, "dashboard")

    page.goto(f"{live_server.url}/broadcasts/")
    expect(page.get_by_role("row", name=AS_READ)).to_contain_text("segment Berlin readers")
    expect(page.get_by_role("row", name="Summer is over")).to_contain_text("(segment deleted)")
    photograph(page, screenshot_dir, "broadcasts")

    page.get_by_role("link", name=AS_READ).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(AS_READ)
    expect(page).to_have_title(f"{AS_READ} · Broadside")
    expect(page.locator(".page-head")).to_contain_text("to segment Berlin readers")
    card = page.locator("#analytics")
    expect(card.locator(".analytics-totals")).to_contain_text("1 open (50% of 2 sent)")
    expect(card.locator(".analytics-totals")).to_contain_text("1 click (50% of 2 sent)")
    expect(card.locator("#analytics-bots")).to_have_text("0 opens, 1 click")
    photograph(page, screenshot_dir, "broadcast")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        card.screenshot(path=str(screenshot_dir / f"honest-analytics-{width}.png"))
    assert problems == []
