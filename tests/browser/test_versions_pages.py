"""A message's language versions in German at 1280 and 390 px: the broadcast editor with two
versions (one right to left), the send page's readers per version, and the automation step
editor; nothing scrolls sideways and no text leaves its box."""


import pytest
from playwright.sync_api import Page, expect

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from tests.browser.steps import fits, sign_in
from webapp.extensions import db

pytestmark = pytest.mark.browser
WIDTHS = {"wide": 1280, "narrow": 390}


@pytest.mark.parametrize("size", list(WIDTHS))
def test_versions_in_german(page: Page, live_server, owner, size, screenshot_dir):
    page.set_viewport_size({"width": WIDTHS[size], "height": 900})
    owner.locale = "de"
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="Acme GmbH\nHauptstraße 1\nBerlin", time_zone="Europe/Berlin")
    news = MailingList(name="Neuigkeiten")
    db.session.add(news)
    db.session.flush()
    for n, locale in enumerate(["de", "de-AT", "ar", None, None]):
        person = Subscriber(email=f"r{n}@example.com", locale=locale)
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status="active"))
    db.session.commit()
    broadcast = drafts.create_draft(
        db.session, list_id=news.id, subject="November news", body="# Hello\n\nWhat changed.",
        versions=[{"locale": "de", "subject": "Neuigkeiten im November",
                   "body": "# Hallo\n\nWas sich geändert hat."},
                  {"locale": "ar", "subject": "أخبار نوفمبر", "body": "# مرحبا\n\nما الذي تغير."}])

    def shot(name: str) -> None:
        path = screenshot_dir / f"versions-{name}-{size}.png"
        page.screenshot(path=str(path), full_page=True)

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/broadcasts/{broadcast.id}/edit?add_version=1#versions")
    expect(page.get_by_role("group", name="Sprachversionen")).to_be_visible()
    expect(page.locator("#version-2-subject")).to_have_attribute("dir", "rtl")
    fits(page, "the editor with versions")
    page.locator("#versions").screenshot(path=str(screenshot_dir / f"versions-field-{size}.png"))
    shot("editor")

    page.goto(f"{live_server.url}/broadcasts/{broadcast.id}/send")
    expect(page.locator("#version-counts")).to_have_text(
        "Deutsch (de): 2 Leser · Arabisch (ar): 1 Leser · Englisch (Standard): 2 Leser")
    fits(page, "the send page")
    shot("send")

    page.goto(f"{live_server.url}/automations/new")
    page.get_by_role("button", name="Version hinzufügen").first.click()
    expect(page.locator("#step-1-version-new-locale")).to_be_visible()
    fits(page, "the automation editor")
    shot("automation")
