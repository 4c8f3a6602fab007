"""A feed automation's trigger through the API and the editor (SQLite and PostgreSQL): a good
one is saved and shown back; every mistake is 422 naming its field, nothing written; the
OpenAPI document describes it."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.core.models import Automation, Feed, MailingList
from tests.helpers import csrf_token_from
from webapp.extensions import db

URL = "https://blog.example.com/feed.xml"
STEP = {"subject": "New: [[title]]", "body": "[[items]]"}


@pytest.fixture
def list_id(app) -> int:
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.commit()
    return weekly.id


def post(client, headers, trigger: dict, steps=None):
    return client.post("/api/automations", headers=headers, json={
        "name": "Blog", "trigger": trigger, "steps": [STEP] if steps is None else steps})


def test_a_feed_trigger_is_saved_and_shown_back_and_a_changed_url_starts_afresh(
        client, api_headers, list_id):
    answer = post(client, api_headers, {"type": "feed", "url": URL, "list_id": list_id,
                                        "mode": "digest", "every": "daily", "at": "07:45"})
    assert answer.status_code == 201, answer.json
    shown = answer.json
    assert shown["trigger"] == {"type": "feed", "url": URL, "mode": "digest", "every": "daily",
                                "at": "07:45", "list_id": list_id, "segment_id": None}
    assert shown["feed"]["polled_at"] is None and shown["feed"]["next_digest_at"]
    assert shown["feed"]["sent"] == [] and shown["feed"]["error"] is None
    # What GET gives, PUT takes back unchanged.
    again = client.put(f"/api/automations/{shown['id']}", headers=api_headers, json={
        "name": "Blog", "trigger": shown["trigger"], "steps": [STEP]})
    assert again.status_code == 200 and again.json["trigger"] == shown["trigger"]
    feed = db.session.scalar(select(Feed))
    feed.etag, feed.primed_at = '"abc"', feed.next_digest_at
    db.session.commit()
    moved = client.put(f"/api/automations/{shown['id']}", headers=api_headers, json={
        "name": "Blog", "trigger": {"type": "feed", "url": URL + "?v=2", "list_id": list_id},
        "steps": [STEP]})
    assert moved.json["trigger"] == {"type": "feed", "url": URL + "?v=2", "mode": "each",
                                     "list_id": list_id, "segment_id": None}
    db.session.expire_all()
    feed = db.session.scalar(select(Feed))
    assert (feed.etag, feed.primed_at, feed.next_digest_at) == (None, None, None)


@pytest.mark.parametrize(("trigger", "field", "words"), [
    ({"url": ""}, "trigger.url", "feed's address"),
    ({"url": "ftp://example.com/feed"}, "trigger.url", "https://"),
    ({"url": "https://user:pw@example.com/feed"}, "trigger.url", "user name"),
    ({"url": "https://example.com/a feed"}, "trigger.url", "spaces"),
    ({"url": "https://[example.com/feed"}, "trigger.url", "name a host"),  # urlsplit raises
    ({"url": "https://example.com:99999/feed"}, "trigger.url", "port"),
    ({"url": 7}, "trigger.url", "feed's address"),
    ({"mode": "hourly"}, "trigger.mode", '"each"'),
    ({"mode": "digest"}, "trigger.at", "HH:MM"),
    ({"mode": "digest", "at": "25:00"}, "trigger.at", "HH:MM"),
    ({"mode": "digest", "at": "08:00", "every": "monthly"}, "trigger.every", "weekly"),
    ({"mode": "digest", "at": "08:00", "every": "weekly", "weekday": 7}, "trigger.weekday", "0"),
    ({"mode": "digest", "at": "08:00", "every": "weekly", "weekday": True}, "trigger.weekday", "0"),
    ({"mode": "digest", "at": "08:00", "weekday": 2}, "trigger.weekday", "daily"),
    ({"at": "08:00"}, "trigger.at", "digest"),
    ({"colour": "red"}, "trigger.colour", "no field colour"),
    ({"list_id": None}, "trigger.list_id", "list or a segment"),
    ({"segment_id": 1}, "trigger.list_id", "one of them"),
    ({"list_id": 999_999}, "trigger.list_id", "no list"),
    ({"list_id": "1"}, "trigger.list_id", "an id"),
])
def test_bad_feed_triggers_are_422_naming_the_field_and_write_nothing(
        client, api_headers, list_id, trigger, field, words):
    answer = post(client, api_headers, {"type": "feed", "url": URL, "list_id": list_id, **trigger})
    assert answer.status_code == 422, answer.json
    assert answer.json.get("field") == field, answer.json
    assert words in answer.json["error"], answer.json
    assert db.session.scalar(select(func.count()).select_from(Automation)) == 0
    assert db.session.scalar(select(func.count()).select_from(Feed)) == 0


def test_a_feed_automation_has_one_step(client, api_headers, list_id):
    answer = post(client, api_headers, {"type": "feed", "url": URL, "list_id": list_id},
                  steps=[STEP, STEP])
    assert answer.status_code == 422 and answer.json["field"] == "steps"


def test_the_openapi_document_describes_the_feed_trigger(client):
    document = client.get("/api/openapi.json").json
    schemas = document["components"]["schemas"]
    feed = schemas["FeedTrigger"]["properties"]
    assert set(feed) == {"type", "url", "list_id", "segment_id", "mode", "every", "at", "weekday"}
    assert {"$ref": "#/components/schemas/FeedTrigger"} in \
        schemas["AutomationInput"]["properties"]["trigger"]["oneOf"]
    assert "feed" in schemas["Automation"]["properties"]


def editor_form(page: str, **fields) -> dict[str, str]:
    return {"csrf_token": csrf_token_from(page), "action": "save", "name": "Blog",
            "trigger_type": "feed", "priority": "0", "step-1-subject": "[[title]]",
            "step-1-body": "[[items]]", "step-1-delay-amount": "0", "step-1-delay-unit": "minutes",
            **fields}


def test_the_editor_saves_a_feed_trigger_and_refuses_a_bad_one_at_its_field(
        logged_in_client, list_id):
    client = logged_in_client
    page = client.get("/automations/new").text
    assert 'value="feed"' in page and 'name="feed_url"' in page
    refused = client.post("/automations/new", data=editor_form(
        page, feed_url="ftp://nope", feed_target=f"list:{list_id}"))
    assert refused.status_code == 422
    assert 'id="feed_url-error"' in refused.text and 'value="ftp://nope"' in refused.text
    assert db.session.scalar(select(func.count()).select_from(Automation)) == 0
    refused = client.post("/automations/new", data=editor_form(
        page, feed_url=URL, feed_target=f"list:{list_id}", feed_mode="digest", feed_at=""))
    assert refused.status_code == 422 and 'id="feed_digest-error"' in refused.text

    saved = client.post("/automations/new", data=editor_form(
        page, feed_url=URL, feed_target=f"list:{list_id}", feed_mode="digest",
        feed_every="weekly", feed_weekday="2", feed_at="18:15"))
    assert saved.status_code in (302, 303), saved.text
    automation = db.session.scalar(select(Automation))
    feed = db.session.scalar(select(Feed))
    assert automation.trigger_type == "feed" and automation.list_id == list_id
    assert (feed.url, feed.mode, feed.every, feed.weekday, feed.at) == (
        URL, "digest", "weekly", 2, "18:15")
    page = client.get(f"/automations/{automation.id}/edit").text
    assert f'value="{URL}"' in page and 'id="feed-status"' in page
    assert "digest of" in client.get("/automations/").text
