"""A reader's language in the owner's hands (issue 43): the import's `locale` column, the
API's "locale", the subscriber's page, and the audience pages in German."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from broadside.audience import lists
from broadside.audience.subscribers import service as subscribers
from broadside.core.models import ImportRejection, Subscriber
from tests.helpers import csrf_token_from
from tests.webapp.import_steps import last_import, upload
from webapp.extensions import db

DE = {"Accept-Language": "de-DE,de;q=0.9"}


def person(email: str) -> Subscriber:
    db.session.expire_all()
    found = db.session.scalar(select(Subscriber).where(Subscriber.email == email))
    assert found is not None, email
    return found


def test_an_import_sets_each_readers_language_and_refuses_a_row_with_a_bad_tag(
        logged_in_client, app):
    weekly = lists.create_list(db.session, "Weekly")
    # A known reader whose language an empty cell keeps.
    upload(logged_in_client, weekly.id, b"email,name\nkeep@example.com,Keep\n")
    known = person("keep@example.com")
    known.locale = "fr"
    db.session.commit()
    person_id = known.id
    content = (b"email,name,Language\n"
               b"ann@example.com,Ann,DE\n"            # 2: cleaned to de
               b"bea@example.com,Bea,pt_br\n"         # 3: pt-BR
               b"cy@example.com,Cy,klingon!\n"        # 4: refused
               b"dan@example.com,Dan,\n"              # 5: empty: nothing
               b"keep@example.com,Keep,\n")  # 6: keeps fr
    assert upload(logged_in_client, weekly.id, content).status_code == 303
    record = last_import()
    assert (record.status, record.rejected) == ("done", 1)
    assert person("ann@example.com").locale == "de"
    assert person("bea@example.com").locale == "pt-BR"
    assert person("dan@example.com").locale is None
    assert db.session.get(Subscriber, person_id).locale == "fr"
    assert db.session.scalar(select(Subscriber).where(Subscriber.email == "cy@example.com")) is None
    refused = db.session.scalar(select(ImportRejection).where(ImportRejection.line == 4))
    assert "not a language tag" in refused.reason and "Language" in refused.reason
    exported = logged_in_client.get(f"/subscribers/export.csv?list={weekly.id}").get_data(as_text=True)
    header, *rows = exported.splitlines()
    column = header.split(",").index("locale")
    assert {r.split(",")[0]: r.split(",")[column] for r in rows}["ann@example.com"] == "de"


def test_the_api_round_trips_locale_and_refuses_a_bad_one(client, api_headers):
    made = client.post("/api/subscribers", headers=api_headers,
                       json={"email": "ann@example.com", "locale": "de"})
    assert made.status_code == 201, made.json
    ann = made.json["id"]
    assert client.get(f"/api/subscribers/{ann}", headers=api_headers).json["locale"] == "de"
    changed = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json={"locale": "fr_ca"})
    assert (changed.status_code, changed.json["locale"]) == (200, "fr-CA")
    listed = client.get("/api/subscribers", headers=api_headers).json["items"][0]
    assert listed["locale"] == "fr-CA"
    for bad in ("xx-not-a-tag-at-all!", 42):
        refused = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json={"locale": bad})
        assert refused.status_code == 422 and refused.json["field"] == "locale", refused.json
        assert "'locale'" in refused.json["error"]
    refused = client.post("/api/subscribers", headers=api_headers,
                          json={"email": "bo@example.com", "locale": "english please"})
    assert refused.status_code == 422 and refused.json["field"] == "locale"
    cleared = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json={"locale": None})
    assert (cleared.status_code, cleared.json["locale"]) == (200, None)
    document = client.get("/api/openapi.json").json
    patch = document["components"]["schemas"]["SubscriberPatch"]["properties"]
    assert "locale" in patch and "locale" in document["components"]["schemas"]["Subscriber"]["properties"]


def test_the_subscribers_page_shows_and_changes_a_readers_language(logged_in_client):
    client = logged_in_client
    page = client.post("/subscribers/new", data={
        "email": "ann@example.com", "name": "Ann", "locale": "",
        "csrf_token": csrf_token_from(client.get("/subscribers/new").text)})
    assert page.status_code in (302, 303)
    ann = person("ann@example.com")
    shown = client.get(f"/subscribers/{ann.id}")
    assert "List&#39;s default" in shown.text or "List's default" in shown.text
    form = client.get(f"/subscribers/{ann.id}/edit")
    assert '<option value="de">German</option>' in form.text
    data = {"email": "ann@example.com", "name": "Ann", "attributes": "", "locale": "de",
            "csrf_token": csrf_token_from(form.text)}
    assert client.post(f"/subscribers/{ann.id}/edit", data=data).status_code in (302, 303)
    assert person("ann@example.com").locale == "de"
    shown = client.get(f"/subscribers/{ann.id}")
    assert re.search(r'id="subscriber-language">German <span class="muted">\(de\)', shown.text)
    # In German, the language is named in German.
    assert "Deutsch" in client.get(f"/subscribers/{ann.id}", headers=DE).text
    refused = client.post(f"/subscribers/{ann.id}/edit", data={**data, "locale": "not a tag"})
    assert refused.status_code == 422
    assert person("ann@example.com").locale == "de"


ENGLISH_LEFTOVERS = ("Search email or name", "Add subscriber", "Import CSV", "Details",
                     "Broadcasts sent to them", "Stop mail or erase", "New segment",
                     "Invite someone", "Segments")


@pytest.mark.parametrize("path", ["/subscribers/", "/subscribers/{ann}", "/subscribers/{ann}/edit",
                                  "/subscribers/new", "/subscribers/import", "/segments/",
                                  "/segments/new", "/settings/people/"])
def test_the_audience_pages_speak_german(logged_in_client, path):
    # Made without a request: in a test the app context outlives a request, and Flask-Babel
    # keeps the catalog of the first one it served.
    ann, _created = subscribers.save_subscriber(db.session, email="ann@example.com", name="Ann")
    page = logged_in_client.get(path.format(ann=ann.id), headers=DE)
    assert page.status_code == 200
    assert 'lang="de"' in page.text
    main = page.text.split("<main", 1)[-1]
    leftovers = [words for words in ENGLISH_LEFTOVERS if f">{words}<" in main]
    assert not leftovers, leftovers
