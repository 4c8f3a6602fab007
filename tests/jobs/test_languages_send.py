"""A broadcast in several languages through the real worker and SMTP server: each reader gets
the version of their language (theirs, else their list's, else Settings'), with Broadside's
footer in it, `Content-Language` and `<html lang dir>` saying so; everything was frozen at
Send, so a version edited afterwards changes nothing sent."""

from __future__ import annotations

import re

from sqlalchemy import select, update

from broadside.campaigns.archive.links import ViewTokens
from broadside.campaigns.archive.service import reader_view
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.content.versions import frozen_message, written_versions
from broadside.core.models import Broadcast, Delivery, MailingList, Revision, Subscriber
from broadside.core.site_settings import get_settings
from tests.helpers import make_list
from webapp.extensions import db, get_jobs

GERMAN = {"locale": "de", "subject": "Hallo {{ name }}", "preheader": "Neuigkeiten",
          "body": "Hallo **{{ name }}**, [mehr](https://example.com/de)."}
ARABIC = {"locale": "ar", "subject": "مرحبا", "preheader": "", "body": "مرحبا بكم في النشرة."}


def readers(locales: dict[str, str | None], list_language: str | None = None) -> MailingList:
    weekly = make_list(db.session, len(locales))
    weekly.language = list_language
    for index, locale in enumerate(locales.values()):
        db.session.execute(update(Subscriber).where(
            Subscriber.email == f"reader{index:05d}@example.com").values(locale=locale))
    db.session.commit()
    return weekly


def send(app, weekly: MailingList, versions: list[dict]) -> Broadcast:
    draft = create_draft(db.session, list_id=weekly.id, subject="Hello {{ name }}",
                         body="Hi **{{ name }}**, [more](https://example.com/en).")
    draft.versions = versions
    db.session.commit()
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs())


def by_reader(smtp_server) -> dict[int, object]:
    return {int(re.search(r"reader(\d+)@", m.rcpt_tos[0]).group(1)): m.message
            for m in smtp_server.messages}


def html_of(message) -> str:
    return message.get_body(("html",)).get_content()


def text_of(message) -> str:
    return message.get_body(("plain",)).get_content()


def test_each_reader_gets_their_language(app, smtp_server, run_worker_burst, postal_address):
    weekly = readers({"de": "de", "de-AT": "de-AT", "fr": "fr", "none": None, "it": "it"},
                     list_language="es")
    broadcast = send(app, weekly, [GERMAN])
    assert run_worker_burst() == 0
    got = by_reader(smtp_server)
    assert len(got) == 5

    for german in (got[0], got[1]):  # de, and de-AT reads the German version
        assert german["Subject"] == "Hallo Reader " + ("0" if german is got[0] else "1")
        assert german["Content-Language"] == "de"
        assert '<html lang="de" dir="ltr"' in html_of(german)
        assert "Abmelden" in html_of(german) and "Im Browser ansehen" not in text_of(german)
        assert "Abmelden: http" in text_of(german)
        assert "https://example.com/de" in html_of(german)

    # French: no French version, so the default's words with Broadside's French footer.
    french = got[2]
    assert french["Subject"] == "Hello Reader 2"
    assert french["Content-Language"] == "en"
    assert '<html lang="en"' in html_of(french)
    assert "Se désabonner" in html_of(french) and "https://example.com/en" in html_of(french)

    # No language of their own: their list's (Spanish) footer; Italian is not shipped, so
    # the list's too.
    for spanish in (got[3], got[4]):
        assert spanish["Content-Language"] == "en"
        assert "Darse de baja" in html_of(spanish)

    # "View in your browser" shows each reader the version they were sent.
    for index, subject in ((0, "Hallo Reader 0"), (2, "Hello Reader 2")):
        person = db.session.scalar(select(Subscriber).where(
            Subscriber.email == f"reader{index:05d}@example.com"))
        delivery = db.session.scalar(select(Delivery).where(
            Delivery.broadcast_id == broadcast.id, Delivery.subscriber_id == person.id))
        token = ViewTokens(app.config["SECRET_KEY"]).make(delivery.id, broadcast.id, person.id,
                                                          person.created_at)
        copy = reader_view(db.session, token, secret_key=app.config["SECRET_KEY"],
                           base_url=app.config["BASE_URL"])
        assert copy.subject == subject

    # Frozen at Send: the German version edited now changes nothing already frozen.
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id).values(
        versions=[{**GERMAN, "subject": "Geändert"}]))
    db.session.commit()
    revision = db.session.scalar(select(Revision).where(Revision.broadcast_id == broadcast.id))
    assert frozen_message(revision, "de").subject == "Hallo {{ name }}"
    assert [(m.locale, m.written) for m in written_versions(revision)] == [("en", True),
                                                                           ("de", True)]


def test_english_only_installations_freeze_nothing_more(app, smtp_server, run_worker_burst,
                                                        postal_address):
    weekly = readers({"a": None, "b": None})
    broadcast = send(app, weekly, [])
    revision = db.session.scalar(select(Revision).where(Revision.broadcast_id == broadcast.id))
    assert revision.versions == {"default_locale": "en", "messages": {}}
    run_worker_burst()
    message = smtp_server.messages[0].message
    assert message["Content-Language"] == "en"
    assert "Unsubscribe" in html_of(message)


def test_the_default_language_is_settings_and_right_to_left_is_laid_out(
        app, smtp_server, run_worker_burst, postal_address):
    get_settings(db.session).default_language = "fr"
    db.session.commit()
    weekly = readers({"ar": "ar", "none": None})
    send(app, weekly, [ARABIC])
    run_worker_burst()
    got = by_reader(smtp_server)
    arabic, default = html_of(got[0]), html_of(got[1])
    assert got[0]["Content-Language"] == "ar"
    assert '<html lang="ar" dir="rtl"' in arabic
    assert "text-align: right" in arabic and "text-align: left" not in arabic
    # Arabic is not shipped: Broadside's own words fall back to the default language's.
    assert "Se désabonner" in arabic
    assert got[1]["Content-Language"] == "fr" and '<html lang="fr" dir="ltr"' in default
    assert "Se désabonner" in default
