"""The owner's frame and pages in the person's language (issue 43): with Accept-Language: de
the dashboard, System, Media, Templates, transactional and analytics pages are German, and no
English sentence of their templates is left on them; the 404 page in French; a form's
required-field error and a CSRF refusal in Spanish; the sending-readiness banner in German;
navigation labels made at import time follow each request."""

from __future__ import annotations

import html
import re
from functools import lru_cache

import pytest
from babel.messages.extract import extract_from_file
from flask_babel import refresh

from broadside.core.i18n import speaking, translations
from tests.helpers import csrf_token_from
from tests.webapp.test_analytics_rates import sent_with
from tests.webapp.test_transactional_pages import created
from webapp import REPO_ROOT

GERMAN = {"Accept-Language": "de-DE,de;q=0.9"}
MINE = ("base.html", "error.html", "_roles.html", "_tables.html", "dashboard", "system",
        "media", "library", "transactional", "analytics", "attachments")
PLACEHOLDER = re.compile(r"%\(\w+\)s|\{\w+\}|<[^>]+>|%%")


@pytest.fixture(autouse=True)
def babel_forgets_the_last_request(app):
    """The tests' requests share one app context (tests/own_apps.py), and Flask-Babel keeps the
    locale it read in `g`: without this, every page after the first (the sign-in) would be
    rendered in the first one's language. Served apps have a context per request."""
    app.before_request(refresh)


def text_of(page: str) -> str:
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


@lru_cache(maxsize=1)
def english_runs() -> frozenset[str]:
    """The English of this area's templates, cut at each placeholder and tag into runs of at
    least three words that German writes otherwise: none may show on a German page."""
    files = []
    for name in MINE:
        path = REPO_ROOT / "templates" / name
        files += sorted(path.rglob("*.html")) if path.is_dir() else [path]
    german = translations("de")
    runs = set()
    for path in files:
        for _line, message, _comments, _context in extract_from_file(
                "jinja2", str(path), keywords={"_": None, "ngettext": (1, 2)}):
            for english in (message,) if isinstance(message, str) else message:
                if not english:
                    continue
                said = german.gettext(english) if isinstance(message, str) else \
                    german.ngettext(message[0], message[1], 2)
                for run in PLACEHOLDER.split(english):
                    run = " ".join(run.split()).strip(" .,:;()“”")
                    if len(run.split()) >= 3 and run not in said:
                        runs.add(run)
    return frozenset(runs)


def assert_german(page: str, *must: str, whole: bool = True) -> str:
    text = text_of(page)
    assert '<html lang="de"' in page or not whole
    for words in must:
        assert words in text, (words, text[:2000])
    left = sorted(run for run in english_runs() if run in text)
    assert not left, f"English left on a German page: {left}"
    return text


def test_the_english_of_this_area_is_found_for_the_check():
    runs = english_runs()
    assert "Nobody joined or left a list in the last 30 days" in runs
    assert "What the sender is doing right now" in " ".join(runs)
    assert len(runs) > 150


def test_dashboard_and_its_readiness_banner_in_german(logged_in_client):
    page = logged_in_client.get("/", headers=GERMAN).text
    text = assert_german(page, "Übersicht", "Letzte Aussendungen", "Abonnenten: letzte 30 Tage",
                         "Zum Inhalt springen", "Ausloggen", "Aussendungen", "Medien", "Einstellungen")
    banner = text_of(page.split('id="sending-banner"', 1)[1].split("</div>", 1)[0])
    assert "Der Versand steht still: Der Worker läuft nicht." in banner
    assert "Seite System" in banner
    assert "Sending is stopped" not in text


def test_navigation_labels_follow_each_request(logged_in_client):
    """Labels made at import time (`_l` in webapp/__init__.py) are translated when shown."""
    assert ">Abonnenten</a>" in logged_in_client.get("/", headers=GERMAN).text
    assert ">Abonnés</a>" in logged_in_client.get("/", headers={"Accept-Language": "fr"}).text
    assert ">Subscribers</a>" in logged_in_client.get("/").text


def test_system_page_in_german(logged_in_client):
    assert_german(logged_in_client.get("/system/", headers=GERMAN).text,
                  "Was der Versand gerade tut", "Stundenlimit", "Prüfungen", "Letzte Fehler",
                  "Revisionen im Umlauf")
    live = text_of(logged_in_client.get("/system/live", headers=GERMAN).text)
    assert "Es läuft kein Worker" in live and "Warteschlangen" in live


def test_media_and_library_pages_in_german(logged_in_client):
    assert_german(logged_in_client.get("/media/", headers=GERMAN).text,
                  "Ein Bild hochladen", "Alternativtext", "Noch keine Bilder.")
    assert_german(logged_in_client.get("/templates/", headers=GERMAN).text,
                  "Vorlagen", "Bausteine", "Newsletter mit Abschnitten", "Schlichter Brief",
                  "Eine Aussendung damit beginnen")
    assert_german(logged_in_client.get("/templates/blocks/", headers=GERMAN).text,
                  "Ihre Bausteine", "Neuer Baustein", "Geschrieben in")


def test_transactional_pages_in_german(logged_in_client):
    template_id = created(logged_in_client)
    assert_german(logged_in_client.get("/settings/transactional/", headers=GERMAN).text,
                  "Transaktionsvorlagen", "Zuletzt bearbeitet", "ja: darf Abgemeldete erreichen")
    assert_german(logged_in_client.get(f"/settings/transactional/{template_id}",
                                       headers=GERMAN).text,
                  "Vorschau und Test", "Beispieldaten (JSON)", "Nur-Text-Teil",
                  "1 Revision insgesamt")


def test_analytics_card_in_german(app, logged_in_client):
    broadcast_id = sent_with(app, "aggregate", sent=3, days=[
        {"opens": 1, "clicks": 1, "bot_opens": 1, "bot_clicks": 1}, {"opens": 1}])
    page = logged_in_client.get(f"/broadcasts/{broadcast_id}", headers=GERMAN).text
    card = page.split('id="analytics"', 1)[1].split("</section>", 1)[0]
    text = assert_german(card, "Öffnungen und Klicks", "2 Öffnungen (66,7% von 3 gesendeten)",
                         "1 Klick", "Tag 1: 1 maschinelle Öffnung", "nur Zählen", whole=False)
    assert "1 Klicks" not in text


def test_not_found_in_french(logged_in_client, client):
    for who in (client, logged_in_client):
        answer = who.get("/no/such/page", headers={"Accept-Language": "fr"})
        assert answer.status_code == 404
        text = text_of(answer.text)
        assert "Introuvable" in text and "Il n’y a rien ici." in text
        assert "Retour à Broadside" in text and "Not found" not in text


def test_a_required_field_and_a_csrf_refusal_in_spanish(client, owner):
    spanish = {"Accept-Language": "es"}
    page = client.get("/login", headers=spanish).text
    refused = client.post("/login", headers=spanish,
                          data={"csrf_token": csrf_token_from(page), "email": "", "password": ""})
    assert "Este campo es obligatorio." in text_of(refused.text)
    forged = client.post("/login", headers=spanish, data={"email": "a@example.com"})
    assert forged.status_code == 400
    assert "Este formulario ha caducado o no se envió desde Broadside." in text_of(forged.text)


def test_the_api_keeps_english(client, api_headers):
    answer = client.get("/api/no-such-thing", headers={**api_headers, "Accept-Language": "de"})
    assert answer.status_code == 404 and answer.json["error"] == "There is nothing here."


def test_a_refusal_by_role_names_the_roles_in_the_language():
    from broadside.core import roles
    from webapp.security import ROLE_IN_TEXT

    with speaking("de"):
        assert [str(ROLE_IN_TEXT[r]) for r in roles.ROLES] == [
            "Inhaber", "Admin", "Versender", "Redakteur", "Betrachter"]

