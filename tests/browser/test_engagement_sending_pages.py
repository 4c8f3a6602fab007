"""What the owner sees while an A/B test or "at each reader's own hour" holds a broadcast, in
Chromium at 1280 and 390 px: the send page with both choices on it (and why they do not go
together), the progress of a test waiting for its winner and of a broadcast waiting for its
readers' hours. Nothing scrolls sideways, no text leaves its box."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import update

from broadside.campaigns.analytics import modes
from broadside.campaigns.broadcasts.ab_tests import clean_ab_test
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, Subscriber
from broadside.core.timeutil import utcnow
from tests.browser.steps import fits, sign_in
from tests.helpers import make_list
from webapp import REPO_ROOT
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.browser
WIDTHS = (1280, 390)
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots" / "engagement"


def photograph(page: Page, name: str, part: str = "main") -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        fits(page, f"{name} at {width} px")
        page.locator(part).first.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


def test_send_page_with_a_test_and_each_readers_hour(app, page: Page, live_server, owner):
    weekly = make_list(db.session, 12)
    weekly.per_person_tracking = True
    draft = create_draft(db.session, list_id=weekly.id, subject="Spring news",
                         body="Hello {{ name }}")
    draft.ab_test = clean_ab_test({"variants": [{"subject": "Spring news"},
                                                {"subject": "What spring brought us"}],
                                   "share": 20, "measure": "opens", "wait_hours": 4})
    db.session.execute(update(Subscriber).values(timezone="Asia/Tokyo"))
    db.session.commit()
    modes.choose(db.session, draft.id, modes.PER_PERSON)
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    photograph(page, "send-page-with-a-test")
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id).values(send_at_local="09:00"))
    db.session.commit()
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    expect(page.locator("main")).to_contain_text("An A/B test sends at one time")
    # Said among what stands in the way, before Send is pressed.
    expect(page.locator(".problems")).to_contain_text("choose a test or each reader's own hour")
    photograph(page, "send-page-test-and-hours")


def test_progress_while_the_winner_and_the_hours_are_awaited(app, page: Page, live_server, owner):
    weekly = make_list(db.session, 40)
    weekly.per_person_tracking = True
    tested = create_draft(db.session, list_id=weekly.id, subject="Spring news", body="Hello")
    tested.ab_test = clean_ab_test({"variants": [{"subject": "Spring news"},
                                                 {"subject": "What spring brought us"}],
                                    "share": 50, "measure": "clicks", "wait_hours": 4})
    db.session.commit()
    modes.choose(db.session, tested.id, modes.PER_PERSON)
    later = create_draft(db.session, list_id=weekly.id, subject="Good morning", body="Coffee?")
    later.send_at_local = "09:00"
    db.session.commit()
    for draft in (tested, later):
        send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    until = utcnow() + timedelta(hours=4)
    db.session.execute(update(Broadcast).where(Broadcast.id == tested.id).values(
        status="sending", ab_wait_until=until, waiting_until=until))
    db.session.execute(update(Broadcast).where(Broadcast.id == later.id).values(
        status="sending", waiting_until=utcnow() + timedelta(hours=3)))
    db.session.commit()

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{tested.id}")
    expect(page.locator("#state-words")).to_contain_text("the winner is chosen at")
    expect(page.locator("#eta")).to_have_text("the rest go once the winner is chosen")
    photograph(page, "progress-ab-waiting", "#progress")
    page.goto(f"{live_server.url}/broadcasts/{later.id}")
    expect(page.locator("#state-words")).to_contain_text("Waiting for readers' own hour")
    expect(page.locator("#eta")).to_have_text("as each reader's hour comes")
    photograph(page, "progress-hours-waiting", "#progress")
