"""The archive publishes each version of an issue: `?lang=<tag>` shows it, every version's page
links to all of them (hreflang, and x-default), `<html lang dir>` is the version's, and the
page's own words follow it when Broadside speaks it."""

from __future__ import annotations

import re

from sqlalchemy import select

from broadside.audience import lists as lists
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import MailingList, Revision, Subscriber, Subscription
from broadside.mail.rendering import freeze_content
from tests.helpers import csrf_token_from
from webapp.extensions import db, get_jobs

VERSIONS = {
    "de": ("Die Herbstausgabe",
           "# Neues im Herbst\n\nHallo {{ name or 'zusammen' }}, hier sind die Neuigkeiten."),
    "ar": ("عدد الخريف", "# أخبار الخريف\n\nمرحبا، هذه أخبارنا لهذا الشهر."),
}


def frozen(subject: str, body: str, language: str) -> dict:
    """A version as the send path freezes it (broadside.campaigns.content.versions)."""
    content = freeze_content(subject=subject, preheader="", body_markdown=body, from_name="Acme",
                             from_email="news@acme.example", postal_address="1 Main St",
                             language=language, direction="rtl" if language == "ar" else "ltr")
    return {"subject": subject, "preheader": "", "html_template": content.html_template,
            "text_template": content.text_template, "written": True}


def published_issue_in_three_languages(app, client, run_worker_burst) -> tuple[MailingList, str]:
    """A list with its archive on and one sent, published issue with a German and an Arabic
    version; returns the list and the issue's path."""
    weekly = lists.create_list(db.session, "The Acme Weekly", "News every Friday.",
                               signup_enabled=True)
    weekly.archive_enabled = True
    reader = Subscriber(email="zebediah@example.org", name="Zebediah")
    db.session.add(reader)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=reader.id, list_id=weekly.id, status="active"))
    db.session.commit()
    draft = create_draft(db.session, list_id=weekly.id, subject="The autumn issue",
                         body="# News this autumn\n\nHello {{ name or 'everyone' }}, here is the news.")
    broadcast_id = send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                                  jobs=get_jobs()).id
    run_worker_burst()
    revision = db.session.scalar(select(Revision).where(Revision.broadcast_id == broadcast_id))
    revision.versions = {"default_locale": "en", "messages": {
        tag: frozen(subject, body, tag) for tag, (subject, body) in VERSIONS.items()}}
    db.session.commit()
    token = csrf_token_from(client.get("/lists/").text)
    client.post(f"/archive/broadcasts/{broadcast_id}/publish",
                data={"published": "1", "csrf_token": token})
    return weekly, f"/archive/{weekly.id}/{broadcast_id}-the-autumn-issue"


def alternates(html: str) -> dict[str, str]:
    return dict(re.findall(r'<link rel="alternate" hreflang="([^"]+)" href="([^"]+)">', html))


def test_each_version_has_its_page_and_they_link_to_each_other(
        app, logged_in_client, smtp_server, run_worker_burst):
    _weekly, path = published_issue_in_three_languages(app, logged_in_client, run_worker_burst)
    visitor = app.test_client()
    base = f"http://localhost:5000{path}"
    expected = {"en": base, "de": f"{base}?lang=de", "ar": f"{base}?lang=ar", "x-default": base}

    english = visitor.get(path, headers={"Accept-Language": "en"})
    assert english.status_code == 200 and "News this autumn" in english.text
    assert '<html lang="en" dir="ltr">' in english.text
    assert alternates(english.text) == expected

    german = visitor.get(f"{path}?lang=de", headers={"Accept-Language": "en"})
    assert german.status_code == 200
    assert '<html lang="de" dir="ltr">' in german.text
    assert "Die Herbstausgabe" in german.text and "Neues im Herbst" in german.text
    assert "Hallo zusammen, hier sind die Neuigkeiten." in german.text
    assert "News this autumn" not in german.text
    assert "Alle Ausgaben" in german.text  # the page's own words in German too
    assert alternates(german.text) == expected
    assert 'aria-current="page">Deutsch</a>' in german.text
    # Nobody's data, no unsubscribe link, no footer of the email.
    assert "zebediah" not in german.text.lower() and "1 Main St" not in german.text

    arabic = visitor.get(f"{path}?lang=ar")
    assert '<html lang="ar" dir="rtl">' in arabic.text and "أخبار الخريف" in arabic.text
    assert alternates(arabic.text) == expected

    # A language with no version: the default; an old slug keeps the language asked for.
    assert '<html lang="en"' in visitor.get(f"{path}?lang=fr").text
    moved = visitor.get(f"{path.rsplit('-', 3)[0]}-old-title?lang=de")
    assert moved.status_code == 301 and moved.location.endswith(f"{path}?lang=de")
    # Each language's page is its own cached page.
    assert "Die Herbstausgabe" in visitor.get(f"{path}?lang=de").text
    assert "Die Herbstausgabe" not in visitor.get(path).text


def test_an_issue_without_versions_has_no_alternates_and_the_index_follows_the_browser(
        app, logged_in_client, smtp_server, run_worker_burst):
    weekly, path = published_issue_in_three_languages(app, logged_in_client, run_worker_burst)
    revision = db.session.scalar(select(Revision))
    revision.versions = None
    weekly.archive_changed_at = None
    db.session.commit()
    visitor = app.test_client()
    page = visitor.get(path)
    assert alternates(page.text) == {} and "archive-languages" not in page.text
    index = visitor.get(f"/archive/{weekly.id}/", headers={"Accept-Language": "fr"})
    assert '<html lang="fr"' in index.text and "1 numéro" in index.text
    assert "Accept-Language" in index.headers["Vary"]
    assert "1 issue" in visitor.get(f"/archive/{weekly.id}/").text
