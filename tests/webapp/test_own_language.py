"""Each person chooses the language of their pages (Settings -> Security -> Language): it wins
over the browser's, "Your browser's language" gives the browser back, a value Broadside does
not ship is refused with nothing saved, and every role may choose their own."""

from __future__ import annotations

import re

from broadside.core.models import Owner
from tests.helpers import csrf_token_from
from tests.webapp.role_clients import signed_in
from webapp.extensions import db


def html_lang(text: str) -> str:
    match = re.search(r'<html lang="([^"]+)"', text)
    assert match, text[:300]
    return match.group(1)


def choose(client, value: str, accept: str = "en"):
    page = client.get("/settings/security/", headers={"Accept-Language": accept})
    return client.post("/settings/security/language", headers={"Accept-Language": accept},
                       data={"locale": value, "csrf_token": csrf_token_from(page.text)})


def saved_locale(person_id: int) -> str | None:
    db.session.expire_all()
    return db.session.get(Owner, person_id).locale


def test_a_person_chooses_french_whatever_the_browser_says(logged_in_client, owner):
    answer = choose(logged_in_client, "fr", accept="de")
    assert answer.status_code == 303 and answer.location.endswith("/settings/security/#language")
    assert saved_locale(owner.id) == "fr"
    page = logged_in_client.get("/settings/security/", headers={"Accept-Language": "de"})
    assert html_lang(page.text) == "fr"
    assert "Votre langue est enregistrée." in page.text  # the flash, in the new language
    assert "Langue de ces pages" in page.text and "Enregistrer la langue" in page.text
    assert '<option selected value="fr">Français</option>' in page.text
    assert '<option value="de">Deutsch</option>' in page.text
    for accept in ("de", "es", "en-US"):
        home = logged_in_client.get("/", headers={"Accept-Language": accept})
        assert home.status_code == 200 and html_lang(home.text) == "fr"
    settings = logged_in_client.get("/settings/", headers={"Accept-Language": "de"})
    assert "Paramètres" in settings.text and "Jetons d'API" in settings.text


def test_the_browsers_language_follows_accept_language_again(logged_in_client, owner):
    choose(logged_in_client, "fr")
    answer = choose(logged_in_client, "", accept="es")
    assert answer.status_code == 303 and saved_locale(owner.id) is None
    assert html_lang(logged_in_client.get("/", headers={"Accept-Language": "es"}).text) == "es"
    assert html_lang(logged_in_client.get("/", headers={"Accept-Language": "de"}).text) == "de"
    assert html_lang(logged_in_client.get("/").text) == "en"


def test_a_language_not_shipped_is_refused_and_nothing_saved(logged_in_client, owner):
    choose(logged_in_client, "de")
    for bad in ("it", "xx", "de-AT", "<script>", "fr" * 40):
        answer = choose(logged_in_client, bad)
        assert answer.status_code == 422, bad
        assert saved_locale(owner.id) == "de"
        assert "Wählen Sie eine Sprache aus der Liste." in answer.text


def test_a_viewer_sets_their_own_language(app, owner_password_hash):
    viewer = Owner(email="viewer@example.com", role="viewer", password_hash=owner_password_hash)
    db.session.add(viewer)
    db.session.commit()
    client = signed_in(app, viewer)
    answer = choose(client, "es")
    assert answer.status_code == 303
    assert saved_locale(viewer.id) == "es"
    assert html_lang(client.get("/", headers={"Accept-Language": "fr"}).text) == "es"


def test_the_choice_is_in_the_audit_log(logged_in_client, owner):
    from broadside.core.models import AuditEntry

    choose(logged_in_client, "es")
    db.session.expire_all()
    row = db.session.query(AuditEntry).order_by(AuditEntry.id.desc()).first()
    assert row.summary == "Language changed" and row.details.get("locale") == "es"


def test_sign_in_pages_follow_the_browser_and_lang(client, owner):
    spanish = client.get("/login", headers={"Accept-Language": "es"})
    assert html_lang(spanish.text) == "es" and "Contraseña" in spanish.text
    french = client.get("/login?lang=fr", headers={"Accept-Language": "es"})
    assert html_lang(french.text) == "fr" and "Mot de passe" in french.text
