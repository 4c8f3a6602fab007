"""A broadcast's and an automation step's versions in other languages: written in the editor
and over the API (validated by `clean_versions`, nothing saved on a refusal), counted per
version on the send page, shown read-only once sent, and the editor pages in German."""

from __future__ import annotations

import re

import flask_babel
import pytest

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription
from tests.helpers import csrf_token_from
from webapp.extensions import db

GERMAN = {"locale": "de", "subject": "Hallo {{ name }}", "preheader": "Kurz",
          "body": "# Willkommen\n\nSchön, dass Sie da sind."}


@pytest.fixture
def news(app) -> MailingList:
    mailing_list = MailingList(name="Monthly news")
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list


@pytest.fixture
def draft(news) -> Broadcast:
    return drafts.create_draft(db.session, list_id=news.id, subject="Hello {{ name }}",
                               body="# Welcome\n\nHi!")


def editor_form(client, broadcast_id: int, **fields) -> dict:
    page = client.get(f"/broadcasts/{broadcast_id}/edit")
    assert page.status_code == 200
    audience = drafts.audience_value(db.session.get(Broadcast, broadcast_id))
    return {"csrf_token": csrf_token_from(page.text), "audience": audience,
            "subject": "Hello {{ name }}", "preheader": "", "body": "# Welcome\n\nHi!",
            "versions-shown": "1", **fields}


def saved_versions(broadcast_id: int):
    db.session.expire_all()
    return db.session.get(Broadcast, broadcast_id).versions


def test_a_german_version_is_added_edited_and_removed_in_the_editor(logged_in_client, draft):
    form = editor_form(logged_in_client, draft.id, **{
        "version-new-locale": "de", "version-new-subject": "Hallo {{ name }}",
        "version-new-preheader": "Kurz", "version-new-body": GERMAN["body"]})
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form)
    assert response.status_code == 303, response.text
    assert saved_versions(draft.id) == [GERMAN]
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    assert 'name="version-1-locale" value="de"' in page and "German" in page
    # Arabic, typed as a tag: its fields are right to left once saved.
    form = editor_form(logged_in_client, draft.id, **{
        "version-1-locale": "de", "version-1-subject": "Hallo", "version-1-body": "Hallo",
        "version-new-tag": "AR", "version-new-subject": "مرحبا", "version-new-body": "مرحبا"})
    assert logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form).status_code == 303
    assert [v["locale"] for v in saved_versions(draft.id)] == ["de", "ar"]
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    assert re.search(r'name="version-2-subject" value="مرحبا"[^>]*dir="rtl"', page)
    assert re.search(r'name="version-1-subject" value="Hallo"[^>]*dir="ltr"', page)
    # Autosave takes them too; removing one is a box ticked.
    form = editor_form(logged_in_client, draft.id, **{
        "version-1-locale": "de", "version-1-subject": "Hallo", "version-1-remove": "1",
        "version-2-locale": "ar", "version-2-subject": "مرحبا", "version-2-body": "مرحبا"})
    assert logged_in_client.post(f"/broadcasts/{draft.id}/autosave", data=form).status_code == 200
    assert [v["locale"] for v in saved_versions(draft.id)] == ["ar"]


@pytest.mark.parametrize("fields, said", [
    ({"version-new-tag": "not a tag!", "version-new-subject": "x"}, "is not a language tag"),
    ({"version-1-locale": "de", "version-1-subject": "Hallo",
      "version-new-locale": "de", "version-new-subject": "Noch mal"}, "already a version in de"),
    ({"version-new-locale": "en", "version-new-subject": "Hi"}, "already a version in en"),
    ({"version-new-locale": "fr", "version-new-subject": "  "}, "(fr) needs a subject"),
])
def test_a_refused_version_says_why_at_the_field_and_saves_nothing(logged_in_client, draft,
                                                                   fields, said):
    form = editor_form(logged_in_client, draft.id, subject="Changed", **fields)
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form)
    assert response.status_code == 422
    assert re.search(r'id="versions-error" role="alert">[^<]*' + re.escape(said), response.text)
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).subject == "Hello {{ name }}"  # nothing saved
    assert saved_versions(draft.id) is None
    autosaved = logged_in_client.post(f"/broadcasts/{draft.id}/autosave", data=form)
    assert autosaved.status_code == 422 and said in autosaved.text
    assert saved_versions(draft.id) is None


def test_versions_over_the_api(client, api_headers, news):
    created = client.post("/api/broadcasts", headers=api_headers, json={
        "list_id": news.id, "subject": "Hi", "body": "Hello", "versions": [
            {"locale": "de_de", "subject": "Hallo", "body": "Hallo"}]})
    assert created.status_code == 201
    assert created.json["versions"] == [{"locale": "de-DE", "subject": "Hallo", "preheader": "",
                                         "body": "Hallo"}]
    broadcast_id = created.json["id"]
    patched = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers,
                           json={"versions": [GERMAN]})
    assert patched.status_code == 200 and patched.json["versions"] == [GERMAN]
    for versions, said in (([{"locale": "xx-!!", "subject": "a"}], "not a language tag"),
                           ([GERMAN, GERMAN], "already a version in de"),
                           ([{"locale": "fr", "body": "x"}], "needs a subject"),
                           ("de", "must be a list")):
        refused = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers,
                               json={"subject": "Changed", "versions": versions})
        assert refused.status_code == 422 and refused.json["field"] == "versions", refused.json
        assert said in refused.json["error"]
    detail = client.get(f"/api/broadcasts/{broadcast_id}", headers=api_headers).json
    assert detail["versions"] == [GERMAN]
    listed = client.get("/api/broadcasts", headers=api_headers).json["items"][0]
    assert listed["subject"] == "Hi" and listed["versions"] == [GERMAN]  # nothing half-saved
    assert client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers,
                        json={"versions": []}).json["versions"] == []


def test_a_step_with_versions_over_the_api(client, api_headers, news):
    step = {"delay": "PT0S", "subject": "Welcome", "body": "Hi", "versions": [GERMAN]}
    created = client.post("/api/automations", headers=api_headers, json={
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": news.id},
        "steps": [step]})
    assert created.status_code == 201, created.json
    assert created.json["steps"][0]["versions"] == [GERMAN]
    automation_id = created.json["id"]
    refused = client.put(f"/api/automations/{automation_id}", headers=api_headers, json={
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": news.id},
        "steps": [{**step, "subject": "Changed", "versions": [{"locale": "de"}]}]})
    assert refused.status_code == 422
    assert refused.json["field"] == "steps[0].versions"
    assert refused.json["error"].startswith("Step 1: ") and "needs a subject" in refused.json["error"]
    read = client.get(f"/api/automations/{automation_id}", headers=api_headers).json
    assert read["steps"][0]["subject"] == "Welcome" and read["steps"][0]["versions"] == [GERMAN]
    replaced = client.put(f"/api/automations/{automation_id}", headers=api_headers, json={
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": news.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome", "body": "Hi"}]})
    assert replaced.status_code == 200 and replaced.json["steps"][0]["versions"] == []


def _reader(email: str, locale: str | None, mailing_list: MailingList) -> None:
    person = Subscriber(email=email, locale=locale)
    db.session.add(person)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=person.id, list_id=mailing_list.id,
                                status="active"))


def test_the_send_page_counts_the_readers_of_each_version(logged_in_client, news):
    french_list = MailingList(name="Nouvelles", language="fr")
    db.session.add(french_list)
    db.session.flush()
    for n, locale in enumerate(["de", "de", "de-AT", "fr", None, None, None]):
        _reader(f"r{n}@example.com", locale, news)
    for n, locale in enumerate([None, None, "de", "es"]):
        _reader(f"f{n}@example.com", locale, french_list)
    db.session.commit()
    versions = [GERMAN, {"locale": "fr", "subject": "Bonjour", "preheader": "", "body": "x"}]
    to_news = drafts.create_draft(db.session, list_id=news.id, subject="Hi", body="Hi",
                                  versions=versions)
    page = logged_in_client.get(f"/broadcasts/{to_news.id}/send").text
    counts = re.search(r'<p id="version-counts">(.*?)</p>', page).group(1)
    assert counts == ("German (de): 3 readers · French (fr): 1 reader · "
                      "English (default): 3 readers")
    # The list speaks French: its readers without a language of their own get French.
    to_french = drafts.create_draft(db.session, list_id=french_list.id, subject="Hi",
                                    body="Hi", versions=versions)
    flask_babel.refresh()  # the tests' one app context keeps Flask-Babel's locale between requests
    page = logged_in_client.get(f"/broadcasts/{to_french.id}/send",
                                headers={"Accept-Language": "de"}).text
    counts = re.search(r'<p id="version-counts">(.*?)</p>', page).group(1)
    assert counts == ("Deutsch (de): 1 Leser · Französisch (fr): 2 Leser · "
                      "Englisch (Standard): 1 Leser")
    # No versions: no line.
    plain = drafts.create_draft(db.session, list_id=news.id, subject="Hi", body="Hi")
    assert 'id="version-counts"' not in logged_in_client.get(f"/broadcasts/{plain.id}/send").text


def test_a_step_has_versions_in_the_automation_editor(app, logged_in_client, news):
    from tests.webapp.test_automation_editor import form_of, saved

    automation = saved(app, news.id)
    path = f"/automations/{automation.id}/edit"
    form = form_of(logged_in_client, path, list_id=str(news.id), **{
        "step-1-versions-shown": "1", "step-1-version-new-locale": "de",
        "step-1-version-new-subject": "Hallo", "step-1-version-new-body": "Hallo"})
    assert logged_in_client.post(path, data=form).status_code == 303
    db.session.expire_all()
    step = automations_steps(automation.id)[0]
    assert step.versions == [{"locale": "de", "subject": "Hallo", "preheader": "",
                              "body": "Hallo"}]
    page = logged_in_client.get(path).text
    assert 'name="step-1-version-1-locale" value="de"' in page
    form = form_of(logged_in_client, path, list_id=str(news.id), **{
        "step-1-versions-shown": "1", "step-1-version-1-locale": "de",
        "step-1-version-1-subject": "", "step-1-subject": "Changed"})
    refused = logged_in_client.post(path, data=form)
    assert refused.status_code == 422
    assert re.search(r'id="step-1-versions-error" role="alert">Step 1: Version 1 \(de\) needs a '
                     r'subject', refused.text)
    db.session.expire_all()
    assert automations_steps(automation.id)[0].subject == "Hi"


def automations_steps(automation_id: int):
    from broadside.campaigns.automations import service as automations

    return automations.steps_of(db.session, automation_id)


ENGLISH_LEFTOVERS = ("Language versions", "Add a version", "Save draft", "Preview as", "Write in",
                     "Merge fields", "Subject", "Preheader", "Mint a code", "Send a test",
                     "Who will receive it", "Send now", "(default)", "Step 1", "Delay after",
                     "Plain-text part", "Remove this version", "Choose a language")


def visible_words(page: str) -> str:
    """What a reader sees: no tags, scripts or styles."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"<[^>]+>", " ", page)


def test_the_editor_pages_speak_german(app, logged_in_client, news):
    from tests.webapp.test_automation_editor import saved

    broadcast = drafts.create_draft(db.session, list_id=news.id, subject="Hallo", body="Hallo",
                                    versions=[GERMAN])
    automation = saved(app, news.id)
    automation_page = f"/automations/{automation.id}/edit"
    form = {"csrf_token": csrf_token_from(logged_in_client.get(automation_page).text),
            "action": "add-version-1", "name": "Welcome", "trigger_type": "joined_list",
            "list_id": str(news.id), "step-1-subject": "Hi", "step-1-body": "Hello",
            "step-1-delay-amount": "1", "step-1-delay-unit": "hours", "step-1-versions-shown": "1",
            "step-1-version-1-locale": "fr", "step-1-version-1-subject": "Salut"}
    german = {"Accept-Language": "de-DE,de;q=0.9"}
    flask_babel.refresh()
    pages = {
        "editor": logged_in_client.get(f"/broadcasts/{broadcast.id}/edit?add_version=1",
                                       headers=german).text,
        "send": logged_in_client.get(f"/broadcasts/{broadcast.id}/send", headers=german).text,
        "automation": logged_in_client.post(automation_page, data=form, headers=german).text,
    }
    for name, page in pages.items():
        words = visible_words(page)
        assert '<html lang="de"' in page, name
        leftovers = [w for w in ENGLISH_LEFTOVERS if w in words]
        assert not leftovers, (name, leftovers)
    assert "Sprachversionen" in pages["editor"] and "Version hinzufügen" in pages["editor"]
    assert "Entwurf speichern" in pages["editor"] and "Vorschau als" in pages["editor"]
    assert "Wer sie erhält" in pages["send"] and "Standard" in pages["send"]
    assert "Verzögerung nach dem Eintritt" in pages["automation"]
    assert 'name="step-1-version-new-locale"' in pages["automation"]  # "Add a version" pressed
    assert "Französisch" in pages["automation"]
