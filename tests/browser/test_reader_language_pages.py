"""Through Chromium: a German browser signs up on the German page and gets the German
confirmation email (through the real SMTP server), confirms on a German page, and unsubscribes
on a German page even from an English browser; the archive's German and Arabic versions (the
Arabic right to left); the owner's Design page in German. Each page at 1280 and 390 px, with no
sideways scrolling, screenshots in /tmp/reader/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from broadside.audience import lists as lists
from broadside.core.models import Owner, SiteSettings, Subscriber
from broadside.mail.unsubscribe_tokens import make_token
from tests.browser.steps import sign_in
from tests.webapp.test_archive_languages import published_issue_in_three_languages
from webapp.extensions import db

pytestmark = pytest.mark.browser

NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
SHOTS = Path("/tmp/reader")


def look(page: Page, name: str, url: str) -> None:
    """The page at both widths: no sideways scrolling, a screenshot of each."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        assert page.evaluate(NO_SIDEWAYS), f"{name} scrolls sideways at {width} px"
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)


def test_a_german_reader_is_written_to_in_german_everywhere(
        browser: Browser, live_server, app, smtp_server, run_worker_burst):
    weekly = lists.create_list(db.session, "Die Wochenpost", "Neuigkeiten aus Berlin, jeden Freitag.",
                               signup_enabled=True)
    german = browser.new_context(locale="de-DE", extra_http_headers={"Accept-Language": "de-DE,de;q=0.9"})
    page = german.new_page()
    page.set_default_timeout(5_000)
    look(page, "signup-join-de", f"{live_server.url}/join/{weekly.id}")
    page.set_viewport_size({"width": 390, "height": 900})
    page.get_by_label("E-Mail").fill("anna.schmidt@example.de")
    page.get_by_role("button", name="Abonnieren").click()
    expect(page.get_by_role("heading", name="Prüfen Sie Ihren Posteingang")).to_be_visible()
    page.screenshot(path=str(SHOTS / "signup-check-inbox-de-390.png"), full_page=True)
    reader = db.session.query(Subscriber).filter_by(email="anna.schmidt@example.de").one()
    assert reader.locale == "de"

    run_worker_burst()
    (received,) = [m for m in smtp_server.messages if "anna.schmidt@example.de" in m.rcpt_tos]
    assert received.message["Subject"] == "Bestätigen Sie Ihr Abonnement von Die Wochenpost"
    html = received.message.get_body(("html",)).get_content()
    assert '<html lang="de"' in html and "Mein Abonnement bestätigen" in html
    link = re.search(r"(/join/confirm/\S+)", received.message.get_body(("plain",)).get_content()).group(1)

    look(page, "signup-confirm-de", f"{live_server.url}{link}")
    page.get_by_role("button", name="Mein Abonnement bestätigen").click()
    expect(page.get_by_role("heading", name="Sie sind angemeldet")).to_be_visible()
    assert page.locator("html").get_attribute("lang") == "de"
    page.screenshot(path=str(SHOTS / "signup-confirmed-de-390.png"), full_page=True)
    german.close()

    # From an English browser: the reader's pages stay German.
    english = browser.new_context(extra_http_headers={"Accept-Language": "en-US,en;q=0.9"})
    page = english.new_page()
    page.set_default_timeout(5_000)
    token = make_token(reader.id, weekly.id, None, joined=reader.created_at,
                       secret_key=app.config["SECRET_KEY"])
    look(page, "unsubscribe-confirm-de", f"{live_server.url}/u/{token}")
    expect(page.get_by_role("button", name="Abmelden")).to_be_visible()
    look(page, "unsubscribe-preferences-de", f"{live_server.url}/u/{token}/preferences")
    look(page, "unsubscribe-erase-de", f"{live_server.url}/u/{token}/erase")
    page.goto(f"{live_server.url}/u/{token}")
    page.get_by_role("button", name="Abmelden").click()
    expect(page.get_by_role("heading", name="Sie sind abgemeldet")).to_be_visible()
    page.screenshot(path=str(SHOTS / "unsubscribe-done-de-390.png"), full_page=True)
    page.goto(f"{live_server.url}/u/{token}/preferences")
    page.get_by_label("Seiten und E-Mails von uns auf").select_option("fr")
    page.get_by_role("button", name="Sprache speichern").click()
    expect(page.get_by_role("heading", name="Vos abonnements")).to_be_visible()
    page.screenshot(path=str(SHOTS / "unsubscribe-preferences-fr-390.png"), full_page=True)
    english.close()


def test_the_archive_versions_and_the_owner_pages_in_german_and_right_to_left(
        page: Page, browser: Browser, live_server, app, owner, logged_in_client, smtp_server,
        run_worker_burst):
    weekly, path = published_issue_in_three_languages(app, logged_in_client, run_worker_burst)
    db.session.get(Owner, owner.id).locale = "de"
    db.session.commit()
    sign_in(page, live_server.url)

    visitor = browser.new_context().new_page()
    visitor.set_default_timeout(5_000)
    look(visitor, "archive-issue-de", f"{live_server.url}{path}?lang=de")
    expect(visitor.get_by_role("heading", name="Die Herbstausgabe")).to_be_visible()
    assert visitor.locator("html").get_attribute("lang") == "de"
    look(visitor, "archive-issue-ar", f"{live_server.url}{path}?lang=ar")
    assert visitor.locator("html").get_attribute("dir") == "rtl"
    heading = visitor.get_by_role("heading", name="عدد الخريف").bounding_box()
    assert heading is not None and heading["x"] + heading["width"] > 300  # starts on the right
    look(visitor, "archive-index-de", f"{live_server.url}/archive/{weekly.id}/?lang=de")

    # A Hebrew list whose owner wrote the sign-up texts in Hebrew: the page right to left.
    shalom = lists.create_list(db.session, "שלום", "חדשות כל יום שישי.", signup_enabled=True)
    shalom.language = "he"
    settings = db.session.get(SiteSettings, 1) or SiteSettings(id=1)
    settings.signup_texts = {"join_heading": "הירשמו ל{{ list_name }}"}
    db.session.add(settings)
    db.session.commit()
    look(visitor, "signup-join-he", f"{live_server.url}/join/{shalom.id}")
    assert visitor.locator("html").get_attribute("dir") == "rtl"
    settings.signup_texts = None
    db.session.commit()

    look(page, "design-texts-de", f"{live_server.url}/settings/design?texts=de")
    expect(page.locator("#localized-form")).to_be_visible()
    look(page, "design-de", f"{live_server.url}/settings/design")
    look(page, "list-show-de", f"{live_server.url}/lists/{weekly.id}")
    look(page, "lists-index-de", f"{live_server.url}/lists/")

