"""The language of a request: the person's choice, else the browser's; `?lang=` on public
pages; English for the API. Numbers, percentages and times follow it."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from broadside.core.i18n import clean_locale, current_locale, negotiate, reader_locale, speaking
from broadside.core.timeutil import local_format
from webapp.extensions import db
from webapp.templating import num, percent


def html_lang(response) -> str:
    match = re.search(r'<html lang="([^"]+)" dir="(ltr|rtl)"', response.text)
    assert match, response.text[:300]
    return match.group(1)


def test_the_browser_chooses_until_the_person_does(client, logged_in_client, owner):
    assert html_lang(logged_in_client.get("/", headers={"Accept-Language": "de-DE,de;q=0.9"})) == "de"
    assert html_lang(logged_in_client.get("/", headers={"Accept-Language": "it, fr;q=0.5"})) == "fr"
    assert html_lang(logged_in_client.get("/", headers={"Accept-Language": "it"})) == "en"
    owner.locale = "es"
    db.session.commit()
    assert html_lang(logged_in_client.get("/", headers={"Accept-Language": "de"})) == "es"


def test_public_pages_follow_lang_and_the_api_speaks_english(client, api_headers):
    assert html_lang(client.get("/login?lang=fr")) == "fr"
    assert html_lang(client.get("/login?lang=xx", headers={"Accept-Language": "es"})) == "es"
    answer = client.get("/api/lists/999999", headers={**api_headers, "Accept-Language": "de"})
    assert answer.status_code == 404
    assert current_locale() == "en"  # the request's language ended with it


def test_tags_are_cleaned_and_readers_fall_back_to_a_shipped_language():
    assert clean_locale("DE") == "de" and clean_locale("pt_br") == "pt-BR"
    assert clean_locale("zh-Hant-TW") == "zh-Hant-TW"
    assert clean_locale("klingon") is None and clean_locale("") is None and clean_locale(3) is None
    assert clean_locale("de;q=1") is None and clean_locale("x" * 40) is None
    assert reader_locale("de-AT", "fr") == "de"
    assert reader_locale("it", "es-MX", "en") == "es"
    assert reader_locale(None, None, "ar") == "en"
    assert negotiate("fr-CA;q=0.3, de;q=0.8") == "de"
    assert negotiate("*;q=1, es;q=0") == "en"
    assert negotiate("de;q=abc, fr") == "fr"


def test_numbers_percentages_and_times_follow_the_language():
    moment = datetime(2025, 3, 1, 14, 5)
    berlin = ZoneInfo("Europe/Berlin")
    assert (num(1234567), percent(412, 1000)) == ("1,234,567", "41.2%")
    assert local_format(moment, berlin, "%Y-%m-%d %H:%M %Z") == "2025-03-01 15:05 CET"
    with speaking("de"):
        assert (num(1234567), percent(412, 1000)) == ("1.234.567", "41,2%")
        assert local_format(moment, berlin, "%Y-%m-%d %H:%M %Z") == "01.03.2025 15:05 CET"
        assert local_format(moment, berlin, "%A %d %B") == "Samstag 01 März"
    with speaking("fr"):
        assert num(1234567) == "1\u202f234\u202f567"
        assert local_format(moment, berlin, "%Y-%m-%d") == "1 mars 2025"
