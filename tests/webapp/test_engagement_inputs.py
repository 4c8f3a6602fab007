"""Engagement's inputs, good and bad, on both databases: the resend over the API, a list's
tracking over the API and on its page, Settings' wait, segments' engagement rules, and the
builder offering them only where a list tracks per person. Every refusal is a clear message
(422, or 409 with the reason) and writes nothing."""

from __future__ import annotations

from datetime import timedelta
from html import unescape

from sqlalchemy import func, select, update

from broadside.campaigns.analytics import modes
from broadside.core.models import Broadcast, MailingList, Segment
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from tests.helpers import csrf_token_from, make_list
from tests.webapp.test_non_openers import _send, opened_by_some
from webapp.api.broadcasts import broadcast_json
from webapp.extensions import db


def resends(broadcast_id: int) -> int:
    return db.session.scalar(select(func.count()).select_from(Broadcast)
                             .where(Broadcast.resend_of_id == broadcast_id)) or 0


def test_the_resend_over_the_api(app, logged_in_client, api_headers, smtp_server,
                                 run_worker_burst, postal_address):
    client = logged_in_client
    broadcast, readers = opened_by_some(app, client, smtp_server, run_worker_burst)
    url = f"/api/broadcasts/{broadcast.id}/non_openers"
    assert client.post("/api/broadcasts/99999/non_openers", headers=api_headers,
                       json={"subject": "Again"}).status_code == 404
    for body, words in (({}, "'subject' is required"), ({"subject": None}, "new subject"),
                        ({"subject": 5}, "must be text"), ({"subject": "   "}, "new subject"),
                        ({"subject": "x" * 301}, "at most 300"),
                        ({"subject": " NOVEMBER "}, "different from the first"),
                        ({"subject": "Again", "list_id": 1}, "Unknown field")):
        answer = client.post(url, headers=api_headers, json=body)
        assert answer.status_code == 422, (body, answer.json)
        assert words in answer.json["error"], (body, answer.json)
    waiting = client.post(url, headers=api_headers, json={"subject": "Again"})
    assert waiting.status_code == 409 and "it can be sent again from" in waiting.json["error"]
    assert resends(broadcast.id) == 0

    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                       .values(finished_at=utcnow() - timedelta(hours=25)))
    db.session.commit()
    made = client.post(url, headers=api_headers, json={"subject": "  Did you see this? "})
    assert made.status_code == 201, made.json
    draft = db.session.get(Broadcast, made.json["id"])
    assert made.json == broadcast_json(draft)  # the shape of every broadcast answer
    assert (made.json["status"], made.json["subject"], made.json["list_id"]) == (
        "draft", "Did you see this?", broadcast.list_id)
    assert draft.resend_of_id == broadcast.id
    again = client.post(url, headers=api_headers, json={"subject": "Third time"})
    assert again.status_code == 409 and "A resend of it" in again.json["error"]
    assert resends(broadcast.id) == 1


def test_a_counts_only_broadcast_is_refused_with_the_reason(app, client, api_headers, smtp_server,
                                                           run_worker_burst, postal_address):
    weekly = make_list(db.session, 1)
    broadcast = _send(app, weekly.id, "Counted", tracking="aggregate")
    run_worker_burst()
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                       .values(finished_at=utcnow() - timedelta(days=2)))
    db.session.commit()
    answer = client.post(f"/api/broadcasts/{broadcast.id}/non_openers", headers=api_headers,
                         json={"subject": "Again"})
    assert answer.status_code == 409
    assert answer.json["error"] == ("It was sent with tracking counts only: only per-person "
                                    "tracking tells who opened it.")


def test_a_lists_tracking_over_the_api_and_on_its_page(app, logged_in_client, api_headers):
    client = logged_in_client
    weekly = make_list(db.session, 0)
    url = f"/api/lists/{weekly.id}"
    for choice, switches in (("people", (False, True)), ("off", (True, False)),
                             ("counts", (False, False))):
        answer = client.patch(url, headers=api_headers, json={"tracking": choice})
        assert answer.status_code == 200 and answer.json["tracking"] == choice
        row = db.session.get(MailingList, weekly.id)
        db.session.refresh(row)
        assert (row.no_tracking, row.per_person_tracking) == switches
        listed = client.get("/api/lists", headers=api_headers).json
        assert [entry["tracking"] for entry in listed] == [choice]
    for body in ({"tracking": "on"}, {"tracking": None}, {"tracking": True}, {},
                 {"tracking": "off", "name": "x"}):
        answer = client.patch(url, headers=api_headers, json=body)
        assert answer.status_code == 422, (body, answer.json)
        assert "tracking" in answer.json["error"], answer.json
    assert client.patch("/api/lists/99999", headers=api_headers,
                        json={"tracking": "off"}).status_code == 404
    assert modes.list_tracking(db.session.get(MailingList, weekly.id)) == "counts"

    page = client.get(f"/lists/{weekly.id}")
    token = csrf_token_from(page.text)
    bad = client.post(f"/lists/{weekly.id}/tracking", data={"csrf_token": token, "tracking": "x"})
    assert bad.status_code == 422 and 'id="list-tracking-error"' in bad.text
    good = client.post(f"/lists/{weekly.id}/tracking", data={"csrf_token": token, "tracking": "off"})
    assert good.status_code == 302
    shown = client.get(f"/lists/{weekly.id}").text
    assert 'id="list-tracking-state">Off<' in shown and 'value="off" checked' in shown


def test_settings_wait_for_the_resend(app, logged_in_client):
    page = logged_in_client.get("/settings/")
    assert 'id="resend_after_hours"' in page.text and 'value="24"' in page.text
    token = csrf_token_from(page.text)
    for value in ("0", "721", "abc", "", "1.5", "²"):
        answer = logged_in_client.post("/settings/resend_wait",
                                       data={"csrf_token": token, "resend_after_hours": value})
        assert answer.status_code == 422, value
        assert 'id="resend-wait-error"' in answer.text and "from 1 to 720" in answer.text
    assert get_settings(db.session).resend_after_hours == 24
    saved = logged_in_client.post("/settings/resend_wait",
                                  data={"csrf_token": token, "resend_after_hours": "48"})
    assert saved.status_code == 302
    db.session.expire_all()
    assert get_settings(db.session).resend_after_hours == 48


def test_engagement_rules_refuse_bad_values_and_name_the_condition(app, client, api_headers):
    make_list(db.session, 1)
    for condition, words in (
            ({"field": "opened", "op": "is", "value": "abc"}, "the broadcast must be a whole number"),
            ({"field": "opened", "op": "is", "value": 99999}, "there is no broadcast 99999"),
            ({"field": "clicked", "op": "within_days", "value": 3}, "the operator does not fit"),
            ({"field": "opened_any", "op": "within_days", "value": 0}, "between 1 and 3650"),
            ({"field": "clicked_any", "op": "not_within_days", "value": 3651}, "between 1 and 3650"),
            ({"field": "never_opened", "op": "is", "value": False}, "the value must be true"),
            ({"field": "never_opened", "op": "is_not", "value": True}, "the operator does not fit")):
        answer = client.post("/api/segments", headers=api_headers,
                             json={"name": "Engaged", "rules": {"all": [condition]}})
        assert answer.status_code == 422, (condition, answer.json)
        assert answer.json["error"].startswith("Condition 1 ("), answer.json
        assert words in answer.json["error"], answer.json
    assert db.session.scalar(select(func.count()).select_from(Segment)) == 0
    good = client.post("/api/segments", headers=api_headers, json={"name": "Engaged", "rules": {
        "any": [{"field": "never_opened", "op": "is", "value": True},
                {"field": "opened_any", "op": "within_days", "value": 3650}]}})
    assert good.status_code == 201, good.json


def test_the_builder_offers_engagement_only_where_a_list_tracks_people(app, logged_in_client):
    weekly = make_list(db.session, 1)
    page = unescape(logged_in_client.get("/segments/new").text)
    assert '<option value="opened" disabled>Opened broadcast (needs a list with per-person tracking)' in page
    assert 'id="engagement-note"' in page
    modes.set_list_tracking(db.session, weekly.id, "people")
    page = unescape(logged_in_client.get("/segments/new").text)
    assert '<option value="opened">Opened broadcast</option>' in page
    assert 'id="engagement-note"' not in page
    token = csrf_token_from(page)
    row = logged_in_client.post("/segments/builder/row/1", data={
        "csrf_token": token, "g-top-kind": "all", "c-1-field": "opened"})
    assert row.status_code == 200
    assert ">did not open<" in row.text and "None sent with per-person tracking yet" in row.text
