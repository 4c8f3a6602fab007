"""At the reader's own hour, in Chromium: the sign-up form stores the zone the browser says
(Playwright's `timezone_id`), the reader chooses theirs on the preferences page, the owner sees
and edits it, chooses "at 09:00 in each reader's time zone" on the send page and reads what
waits for which hour on the progress bar. Every page at 1280 and 390 px, photographed, with
no sideways scroll and no text out of its box."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select, update

from broadside.audience import lists
from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import Broadcast, Delivery, Subscriber
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.mail.unsubscribe_tokens import make_token
from tests.browser.steps import fits, sign_in
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

pytestmark = pytest.mark.browser
WIDTHS = (1280, 390)


def photograph(page: Page, name: str, folder: Path) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        fits(page, f"{name} at {width} px")
        page.screenshot(path=str(folder / f"zones-{name}-{width}.png"), full_page=True)


def reader(email: str) -> Subscriber:
    db.session.expire_all()
    found = db.session.scalar(select(Subscriber).where(Subscriber.email == email))
    assert found is not None
    return found


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/Argentina/Buenos_Aires"])
def test_the_sign_up_form_stores_the_zone_the_browser_says(browser: Browser, live_server, zone,
                                                           screenshot_dir):
    weekly = lists.create_list(db.session, "The Weekly", "News every Friday",
                               signup_enabled=True).id
    context = browser.new_context(timezone_id=zone, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{live_server.url}/join/{weekly}")
    field = page.locator("input[name=timezone]")
    expect(field).not_to_have_value("")
    # Chromium's ICU may say an older name for the same zone (America/Buenos_Aires): the tz
    # database keeps it as a link, and it is stored as said.
    said = field.input_value()
    moment = datetime(2026, 1, 15, 12)
    assert ZoneInfo(said).utcoffset(moment) == ZoneInfo(zone).utcoffset(moment), said
    if zone == "Asia/Tokyo":
        photograph(page, "signup", screenshot_dir)
    page.get_by_label("Email").fill("zelda@example.com")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    context.close()
    assert reader("zelda@example.com").timezone == said


def test_the_embedded_form_on_another_site_stores_the_zone_too(browser: Browser, page: Page, app,
                                                               live_server, owner):
    """The list page's HTML to paste on the owner's own site carries the field and the line
    that fills it: pasted into a page of another origin, it signs a reader up with their zone."""
    app.config["BASE_URL"] = live_server.url  # the snippet's form posts to the installation
    weekly = lists.create_list(db.session, "The Weekly", signup_enabled=True).id
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/lists/{weekly}")
    snippet = page.locator("#signup-snippet").text_content() or ""
    assert 'name="timezone"' in snippet
    context = browser.new_context(timezone_id="Asia/Tokyo")
    elsewhere = context.new_page()
    elsewhere.set_content(f"<!doctype html><title>My blog</title><main>{snippet}</main>")
    expect(elsewhere.locator("input[name=timezone]")).to_have_value("Asia/Tokyo")
    elsewhere.get_by_label("Email").fill("yuki@example.com")
    elsewhere.get_by_role("button", name="Subscribe").click()
    expect(elsewhere.get_by_role("heading", name="Check your inbox")).to_be_visible()
    context.close()
    assert reader("yuki@example.com").timezone == "Asia/Tokyo"


def test_the_reader_chooses_their_zone_on_the_preferences_page(page: Page, live_server, app,
                                                               screenshot_dir):
    weekly = lists.create_list(db.session, "The Weekly")
    person, _created = subscribers.save_subscriber(db.session, email="ann@example.com",
                                                   list_ids=[weekly.id])
    token = make_token(person.id, weekly.id, None, joined=person.created_at,
                       secret_key=app.config["SECRET_KEY"])
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/u/{token}/preferences?lang=de")
    expect(page.get_by_role("heading", name="Ihre Zeitzone")).to_be_visible()
    page.get_by_label("Wo Sie unsere E-Mails lesen").select_option("Europe/Berlin")
    page.get_by_role("button", name="Zeitzone speichern").click()
    expect(page.locator("#preferences-message")).to_contain_text("Europe/Berlin")
    assert reader("ann@example.com").timezone == "Europe/Berlin"
    page.locator("#your-timezone").scroll_into_view_if_needed()
    photograph(page, "preferences", screenshot_dir)


def test_the_owner_edits_a_zone_chooses_the_readers_hour_and_watches_it_wait(
        page: Page, live_server, owner, app, screenshot_dir):
    get_settings(db.session).time_zone = "America/New_York"
    db.session.commit()
    weekly = make_list(db.session, 30)
    ids = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
    for chosen, zone in ((ids[:12], "Asia/Tokyo"), (ids[12:20], "Europe/Berlin"),
                         (ids[20:24], "Europe/Paris"), (ids[24:27], "Australia/Sydney")):
        db.session.execute(update(Subscriber).where(Subscriber.id.in_(chosen))
                           .values(timezone=zone))
    db.session.commit()
    sign_in(page, live_server.url)
    page.set_viewport_size({"width": 1280, "height": 900})

    # The owner's subscriber pages.
    page.goto(f"{live_server.url}/subscribers/{ids[0]}")
    expect(page.locator("#subscriber-timezone")).to_contain_text("Asia/Tokyo")
    photograph(page, "subscriber", screenshot_dir)
    page.goto(f"{live_server.url}/subscribers/{ids[29]}/edit")
    page.get_by_label("Time zone").select_option("America/Chicago")
    photograph(page, "subscriber-edit", screenshot_dir)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#subscriber-timezone")).to_contain_text("America/Chicago")
    page.goto(f"{live_server.url}/subscribers/new")
    photograph(page, "subscriber-new", screenshot_dir)

    # The send page: choose 09:00 in each reader's time zone.
    draft = create_draft(db.session, list_id=weekly.id, subject="Morning news", body="Hello")
    page.goto(f"{live_server.url}/broadcasts/{draft.id}/send")
    card = page.locator("#local-time")
    card.get_by_label("At a time of day in each reader's time zone").check()
    card.get_by_label("Time of day (HH:MM)").fill("09:00")
    card.get_by_role("button", name="Save when it is sent").click()
    expect(page.locator("#local-time-plan")).to_contain_text("12 in Asia/Tokyo at")
    expect(page.locator("#local-time-plan")).to_contain_text("without a time zone")
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).send_at_local == "09:00"
    page.locator("#local-time").scroll_into_view_if_needed()
    photograph(page, "send-page", screenshot_dir)

    # The progress bar of a broadcast whose copies wait for their readers' hours.
    sending = start_broadcast(app, weekly, subject="Evening news", enqueue=False)
    now = utcnow().replace(microsecond=0)
    tokyo, europe, owners = now + timedelta(hours=3), now + timedelta(hours=11), now + timedelta(hours=15)
    rows = db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == sending.id)
                              .order_by(Delivery.id)).all()
    for chosen, due in ((rows[:12], tokyo), (rows[12:24], europe), (rows[24:], owners)):
        db.session.execute(update(Delivery).where(Delivery.id.in_(chosen))
                           .values(next_attempt_at=due))
    db.session.execute(update(Broadcast).where(Broadcast.id == sending.id).values(
        status="sending", send_at_local="09:00",
        local_due={"Asia/Tokyo": tokyo.isoformat(), "Europe/Berlin": europe.isoformat(),
                   "Europe/Paris": europe.isoformat(), "Australia/Sydney": now.isoformat(),
                   "": owners.isoformat()}))
    db.session.commit()
    page.goto(f"{live_server.url}/broadcasts/{sending.id}")
    waiting = page.locator("#local-waiting")
    expect(waiting).to_contain_text("12 for 09:00 Asia/Tokyo")
    expect(waiting).to_contain_text("12 for 09:00 Europe/Berlin, Europe/Paris")
    expect(waiting).to_contain_text("6 without a time zone, for ")
    photograph(page, "progress", screenshot_dir)
