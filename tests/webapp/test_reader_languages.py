"""Every reader in their own language: the sign-up page's language becomes theirs, the
confirmation email and every page of their links speak it (whatever the browser asks), the
preferences page changes it, and the owner's texts and footer have a version per language."""

from __future__ import annotations

import re

from sqlalchemy import select

from broadside.audience import lists as lists
from broadside.core.models import SiteSettings, Subscriber, TransactionalMessage
from broadside.mail.signup_texts import footer_text_for, texts_for
from broadside.mail.unsubscribe_tokens import make_token
from tests.helpers import csrf_token_from
from webapp.extensions import db

GERMAN = {"Accept-Language": "de-DE,de;q=0.9,en;q=0.5"}
ENGLISH = {"Accept-Language": "en-GB,en;q=0.9"}


def html_lang(page) -> tuple[str, str]:
    found = re.search(r'<html lang="([^"]+)" dir="(ltr|rtl)"', page.text)
    assert found, page.text[:300]
    return found.group(1), found.group(2)


def sign_up_in_german(client) -> tuple[int, Subscriber, TransactionalMessage]:
    weekly = lists.create_list(db.session, "Wochenpost", "Jeden Freitag", signup_enabled=True).id
    page = client.get(f"/join/{weekly}", headers=GERMAN)
    assert html_lang(page) == ("de", "ltr")
    assert "Abonnieren" in page.text and "Name (freiwillig)" in page.text
    answer = client.post(f"/join/{weekly}", data={"email": "anna@example.de", "name": "Anna"},
                         headers=GERMAN, environ_base={"REMOTE_ADDR": "198.51.100.21"})
    assert answer.status_code == 303
    inbox = client.get(answer.location, headers=GERMAN)
    assert "Prüfen Sie Ihren Posteingang" in inbox.text
    reader = db.session.scalar(select(Subscriber).where(Subscriber.email == "anna@example.de"))
    message = db.session.scalar(select(TransactionalMessage))
    return weekly, reader, message


def test_a_german_reader_signs_up_confirms_and_unsubscribes_in_german(client, app):
    weekly, reader, message = sign_up_in_german(client)
    assert reader.locale == "de"
    assert message.subject == "Bestätigen Sie Ihr Abonnement von Wochenpost"
    assert '<html lang="de" dir="ltr"' in message.html
    assert "Mein Abonnement bestätigen" in message.html and "jemand (hoffentlich Sie)" in message.text

    # The link's pages speak the reader's language, even in an English browser.
    link = re.search(r"(/join/confirm/\S+)", message.text).group(1)
    confirm = client.get(link, headers=ENGLISH)
    assert html_lang(confirm)[0] == "de" and "Bestätigen Sie Ihr Abonnement" in confirm.text
    confirmed = client.post(link, headers=ENGLISH)
    assert html_lang(confirmed)[0] == "de" and "Sie sind angemeldet" in confirmed.text
    assert "Danke: Sie erhalten Wochenpost." in confirmed.text

    token = make_token(reader.id, weekly, None, joined=reader.created_at,
                       secret_key=app.config["SECRET_KEY"])
    page = client.get(f"/u/{token}", headers=ENGLISH)
    assert html_lang(page)[0] == "de" and "von Wochenpost abmelden?" in page.text
    # A mail client's one-click POST gets its answer in the reader's language too.
    done = client.post(f"/u/{token}", data={"List-Unsubscribe": "One-Click"}, headers=ENGLISH)
    assert done.status_code == 200 and "Sie sind abgemeldet" in done.text
    # ?lang= asks for another language, for this page only.
    assert html_lang(client.get(f"/u/{token}?lang=es", headers=ENGLISH))[0] == "es"


def test_the_reader_chooses_french_on_the_preferences_page(client, app):
    weekly, reader, _message = sign_up_in_german(client)
    token = make_token(reader.id, weekly, None, joined=reader.created_at,
                       secret_key=app.config["SECRET_KEY"])
    prefs = client.get(f"/u/{token}/preferences", headers=ENGLISH)
    assert "Ihre Abonnements" in prefs.text and "Ihre Sprache" in prefs.text
    chosen = client.post(f"/u/{token}/preferences", data={"action": "language", "locale": "fr"},
                         headers=ENGLISH)
    assert chosen.status_code == 200
    assert html_lang(chosen)[0] == "fr" and "Vos abonnements" in chosen.text
    assert "sont désormais en Français" in chosen.text
    db.session.expire_all()
    assert db.session.get(Subscriber, reader.id).locale == "fr"
    assert "Désabonner" in client.get(f"/u/{token}", headers=GERMAN).text
    assert "Effacer vos données ?" in client.get(f"/u/{token}/erase", headers=GERMAN).text
    # Not a language offered: said, nothing changed.
    refused = client.post(f"/u/{token}/preferences", data={"action": "language",
                                                           "locale": "klingon"})
    assert refused.status_code == 422 and "l’une des langues proposées" in refused.text
    db.session.expire_all()
    assert db.session.get(Subscriber, reader.id).locale == "fr"
    # Back to the list's language (none: Settings' default, English).
    client.post(f"/u/{token}/preferences", data={"action": "language", "locale": ""})
    db.session.expire_all()
    assert db.session.get(Subscriber, reader.id).locale is None
    assert html_lang(client.get(f"/u/{token}"))[0] == "en"


def test_a_new_reader_keeps_their_language_and_a_form_never_overwrites_it(client):
    weekly = lists.create_list(db.session, "Weekly", "", signup_enabled=True).id
    client.post(f"/join/{weekly}?lang=es", data={"email": "eva@example.es"},
                environ_base={"REMOTE_ADDR": "198.51.100.22"})
    reader = db.session.scalar(select(Subscriber).where(Subscriber.email == "eva@example.es"))
    assert reader.locale == "es"
    page = client.get(f"/join/{weekly}?lang=es")
    assert f'action="/join/{weekly}?lang=es"' in page.text  # the POST in the same language
    client.post(f"/join/{weekly}", data={"email": "eva@example.es"}, headers=GERMAN,
                environ_base={"REMOTE_ADDR": "198.51.100.23"})
    db.session.expire_all()
    assert db.session.get(Subscriber, reader.id).locale == "es"


def test_a_list_language_speaks_to_readers_who_have_none(client, logged_in_client):
    weekly = lists.create_list(db.session, "Semanal", "", signup_enabled=True).id
    page = logged_in_client.get(f"/lists/{weekly}")
    data = {"csrf_token": csrf_token_from(page.text), "name": "Semanal", "description": "",
            "signup_enabled": "y", "language": "es"}
    assert logged_in_client.post(f"/lists/{weekly}", data=data).status_code == 303
    assert html_lang(client.get(f"/join/{weekly}", headers={"Accept-Language": "it"}))[0] == "es"
    # The browser, when it asks for a language Broadside speaks, comes first.
    assert html_lang(client.get(f"/join/{weekly}", headers=GERMAN))[0] == "de"
    refused = logged_in_client.post(f"/lists/{weekly}", data={**data, "language": "not a tag"})
    assert refused.status_code == 422 and "is not a language tag" in refused.text
    db.session.expire_all()
    assert lists.get_list(db.session, weekly).language == "es"


def test_a_hebrew_list_lays_its_sign_up_page_out_right_to_left(client):
    shalom = lists.create_list(db.session, "Shalom", "", signup_enabled=True)
    shalom.language = "he"
    settings = db.session.get(SiteSettings, 1) or SiteSettings(id=1)
    settings.signup_texts = {"join_heading": "הירשמו ל־{{ list_name }}"}
    db.session.add(settings)
    db.session.commit()
    page = client.get(f"/join/{shalom.id}")
    assert html_lang(page) == ("he", "rtl") and "הירשמו ל־Shalom" in page.text


def save_localized(client, tag: str, values: dict):
    page = client.get(f"/settings/design?texts={tag}")
    return client.post(f"/settings/design/texts/{tag}",
                       data={**values, "csrf_token": csrf_token_from(page.text)})


def test_the_owner_writes_a_german_footer_and_texts_that_fall_back_key_by_key(logged_in_client):
    page = logged_in_client.get("/settings/design?texts=de")
    assert 'id="localized-form"' in page.text and 'id="texts-de"' in page.text
    settings = db.session.get(SiteSettings, 1)
    settings.footer_text = "Thanks for reading, from Berlin."
    db.session.commit()
    answer = save_localized(logged_in_client, "de", {
        "footer_text": "Danke fürs Lesen, aus Berlin.", "join_heading": "Willkommen bei {{ list_name }}",
        "optin_subject": "", "optin_body": "", "join_intro": "", "check_inbox": "", "confirmed": ""})
    assert answer.status_code == 303
    db.session.expire_all()
    settings = db.session.get(SiteSettings, 1)
    assert footer_text_for(settings, "de") == "Danke fürs Lesen, aus Berlin."
    assert footer_text_for(settings, "de-AT") == "Danke fürs Lesen, aus Berlin."
    assert footer_text_for(settings, "fr") == "Thanks for reading, from Berlin."
    german = texts_for(settings, "de")
    assert german["join_heading"] == "Willkommen bei {{ list_name }}"
    # Blank: Broadside's own words, in German; French: its own.
    assert german["optin_subject"] == "Bestätigen Sie Ihr Abonnement von {{ list_name }}"
    assert texts_for(settings, "fr")["join_heading"] == "S’abonner à {{ list_name }}"
    assert settings.localized_texts == {"de": {"footer_text": "Danke fürs Lesen, aus Berlin.",
                                               "join_heading": "Willkommen bei {{ list_name }}"}}
    shown = logged_in_client.get("/settings/design?texts=de")
    assert "Danke fürs Lesen, aus Berlin." in shown.text

    # A mistake in one text: said, nothing saved.
    wrong = save_localized(logged_in_client, "de", {"footer_text": "Neu",
                                                    "optin_body": "Hallo {{ lst_name }}"})
    assert wrong.status_code == 422 and "{{ list_name }}" in wrong.text
    db.session.expire_all()
    assert footer_text_for(db.session.get(SiteSettings, 1), "de") == "Danke fürs Lesen, aus Berlin."
    # A language Broadside does not speak, or the default one: refused, nothing saved.
    for tag in ("xx", "en"):
        refused = save_localized(logged_in_client, tag, {"footer_text": "Nope"})
        assert refused.status_code == 302
    db.session.expire_all()
    assert set(db.session.get(SiteSettings, 1).localized_texts) == {"de"}


def test_the_default_language_for_readers_is_chosen_and_validated(client, logged_in_client):
    weekly = lists.create_list(db.session, "Weekly", "", signup_enabled=True).id
    page = logged_in_client.get("/settings/design")
    token = csrf_token_from(page.text)
    refused = logged_in_client.post("/settings/design/language",
                                    data={"default_language": "it", "csrf_token": token})
    assert refused.status_code == 422 and "not a language Broadside speaks" in refused.text
    assert logged_in_client.post("/settings/design/language", data={
        "default_language": "fr", "csrf_token": token}).status_code == 303
    assert html_lang(client.get(f"/join/{weekly}", headers={"Accept-Language": "it"}))[0] == "fr"
