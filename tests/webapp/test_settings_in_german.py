"""The owner's Settings, Security, sending identities, Deliverability, Webhooks and Audit log
pages in German: German words, and none of their templates' English messages left over."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_file

from tests.webapp.role_clients import signed_in
from webapp import REPO_ROOT

TEMPLATES = REPO_ROOT / "templates"
PAGES = {
    "/settings/": ("settings/index.html", ["Einstellungen", "API-Tokens", "Sendetempo"]),
    "/settings/security/": ("security/index.html", ["Sicherheit", "Sprache dieser Seiten",
                                                   "Wo Sie eingeloggt sind"]),
    "/settings/identities/": ("identities/index.html", ["Absenderidentitäten", "Neue Identität",
                                                       "Verbindung prüfen"]),
    "/deliverability/": ("deliverability/index.html", ["Zustellbarkeit", "Die Linien"]),
    "/settings/webhooks": ("settings/webhooks.html", ["Endpunkt hinzufügen"]),
    "/settings/audit/": ("audit/index.html", ["Audit-Protokoll", "Einträge", "Filtern"]),
}
OURS = ("settings/", "security/", "identities/", "deliverability/", "audit/", "auth/")
WORDS_ONLY = re.compile(r"^[^%<>&]*$")


def english_messages(template: str) -> list[str]:
    """The template's (and its includes') plain messages: no placeholder, no markup."""
    names = {template} | set(re.findall(r'{%\s*include\s+"([^"]+)"',
                                        (TEMPLATES / template).read_text()))
    # Another area's include may still say the same words in English (its own helper's).
    others = " ".join((TEMPLATES / name).read_text() for name in names
                      if not name.startswith(OURS) and (TEMPLATES / name).exists())
    found = []
    for name in names:
        path = TEMPLATES / name
        if not path.exists():
            continue
        for _line, message, _comments, _context in extract_from_file(
                "jinja2", str(path), keywords={"_": None, "ngettext": (1, 2)}):
            for text in ([message] if isinstance(message, str) else message):
                if (text and WORDS_ONLY.match(text) and len(text.split()) >= 2
                        and text not in others):
                    found.append(text)
    return found


def visible_text(page: str) -> str:
    body = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", page)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


@pytest.mark.parametrize("url", sorted(PAGES))
def test_the_page_speaks_german_with_no_english_left(app, owner, url):
    """Each request in an app context of its own, as in production (Flask-Babel keeps a
    request's catalog in its app context)."""
    template, german = PAGES[url]
    page = signed_in(app, owner).get(url, headers={"Accept-Language": "de-DE,de;q=0.9"})
    assert page.status_code == 200 and '<html lang="de"' in page.text
    text = visible_text(page.text)
    for word in german:
        assert word in text, (url, word)
    english = english_messages(template)
    assert english, template
    left = [message for message in english if message in text]
    assert not left, f"{url}: English left over: {left}"


def test_the_english_pages_still_read_english(app, owner):
    page = signed_in(app, owner).get("/settings/")
    assert "API tokens" in page.text and "Sending pace" in page.text
    assert Path(TEMPLATES / "settings/index.html").exists()
