"""Broadcasts over the API beyond sending: creating a draft for a list or a segment with a
frequency cap, the keyset-paged list, editing and deleting drafts (and only drafts)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.core import accounts
from broadside.core.models import Broadcast
from broadside.core.site_settings import get_settings
from tests.helpers import make_list
from webapp.extensions import db

ITEM_KEYS = {"id", "status", "subject", "preheader", "format", "list_id", "segment_id",
             "skip_if_received_within_hours", "identity_id", "codes", "attachments", "versions", "counts",
             "ab_test", "created_at", "updated_at", "scheduled_at", "finished_at",
             "send_at_local"}


def broadcast_count() -> int:
    return db.session.scalar(select(func.count()).select_from(Broadcast)) or 0


def stored(broadcast_id: int) -> Broadcast:
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, broadcast_id)
    assert broadcast is not None
    return broadcast


@pytest.fixture
def audience(client, api_headers):
    weekly = make_list(db.session, 2)
    segment = client.post("/api/segments", headers=api_headers, json={
        "name": "Everyone", "rules": {"all": [{"field": "list", "op": "is_on", "value": weekly.id}]},
    }).json["id"]
    return {"list": weekly.id, "segment": segment}


def create(client, headers, **fields):
    return client.post("/api/broadcasts", headers=headers,
                       json={"subject": "News", "body": "Hello", **fields})


@pytest.fixture
def default_cap(app):
    settings = get_settings(db.session)
    settings.default_skip_if_received_within_hours = 24
    db.session.commit()


def test_a_draft_goes_to_a_segment_or_a_list_with_the_cap_chosen(client, api_headers, audience,
                                                                  default_cap):
    to_segment = create(client, api_headers, segment_id=audience["segment"])
    assert to_segment.status_code == 201 and to_segment.json["status"] == "draft"
    row = stored(to_segment.json["id"])
    assert (row.list_id, row.segment_id, row.skip_if_received_within_hours) == (
        None, audience["segment"], 24)  # the Settings default

    for cap, expected in ((None, 24), (0, None), (48, 48), (720, 720)):
        response = create(client, api_headers, list_id=audience["list"],
                          skip_if_received_within_hours=cap)
        assert response.status_code == 201
        row = stored(response.json["id"])
        assert (row.list_id, row.segment_id, row.skip_if_received_within_hours) == (
            audience["list"], None, expected), cap


@pytest.mark.parametrize(("fields", "message"), [
    ({}, "'list_id' or 'segment_id' is required"),
    ({"list_id": None, "segment_id": None}, "'list_id' cannot be null"),  # not documented
    ({"list_id": "1"}, "'list_id' must be an id"),
    ({"segment_id": True}, "'segment_id' must be an id"),
    ({"segment_id": 2**70}, "'segment_id' must be an id"),  # the databases raised: a 500 before
    ({"list_id": 2**40}, "'list_id' must be an id"),  # beyond the id columns' range
    ({"segment_id": 999}, "There is no segment with id 999"),
    ({"list_id": "WEEKLY", "skip_if_received_within_hours": 721}, "whole number from 1 to 720"),
    ({"list_id": "WEEKLY", "skip_if_received_within_hours": -1}, "whole number from 1 to 720"),
    ({"list_id": "WEEKLY", "skip_if_received_within_hours": "24"}, "must be a whole number of hours"),
    ({"list_id": "WEEKLY", "skip_if_received_within_hours": 2.5}, "must be a whole number of hours"),
    ({"list_id": "WEEKLY", "skip_if_received_within_hours": True}, "must be a whole number of hours"),
    ({"list_id": "WEEKLY", "subject": ""}, "'subject' must be a non-empty string"),
])
def test_a_refused_draft_says_why_and_is_not_created(client, api_headers, audience, fields, message):
    fields = {key: audience["list"] if value == "WEEKLY" else value for key, value in fields.items()}
    response = create(client, api_headers, **fields)
    assert response.status_code == 422
    assert message in response.json["error"], response.json
    assert broadcast_count() == 0


def test_both_audiences_at_once_are_refused(client, api_headers, audience):
    response = create(client, api_headers, list_id=audience["list"], segment_id=audience["segment"])
    assert response.status_code == 422 and "not both" in response.json["error"]
    assert broadcast_count() == 0


def test_the_list_pages_newest_first_and_visits_every_broadcast_once(client, api_headers, audience):
    made = [create(client, api_headers, list_id=audience["list"], subject=f"No. {i}").json["id"]
            for i in range(12)]
    seen, sizes, after = [], [], None
    while True:
        url = "/api/broadcasts?limit=5" + (f"&after={after}" if after is not None else "")
        page = client.get(url, headers=api_headers).json
        assert set(page) == {"items", "next"}
        sizes.append(len(page["items"]))
        seen += [item["id"] for item in page["items"]]
        after = page["next"]
        if after is None:
            break
        assert after == seen[-1]
    assert seen == sorted(made, reverse=True)
    assert sizes == [5, 5, 2]
    assert client.get("/api/broadcasts", headers=api_headers).json["next"] is None  # 50 a page


def test_a_listed_broadcast_carries_its_audience_cap_counts_and_times(client, api_headers, audience):
    draft = create(client, api_headers, segment_id=audience["segment"], preheader="Read me",
                   skip_if_received_within_hours=12).json["id"]
    sent = create(client, api_headers, list_id=audience["list"], subject="Sent").json["id"]
    client.post(f"/api/broadcasts/{sent}/send", headers=api_headers)
    items = client.get("/api/broadcasts", headers=api_headers).json["items"]
    assert [item["id"] for item in items] == [sent, draft]
    assert all(set(item) == ITEM_KEYS for item in items)
    queued, first = items
    assert {k: first[k] for k in ("status", "subject", "preheader", "list_id", "segment_id",
                                  "skip_if_received_within_hours", "scheduled_at", "finished_at")} == {
        "status": "draft", "subject": "News", "preheader": "Read me", "list_id": None,
        "segment_id": audience["segment"], "skip_if_received_within_hours": 12,
        "scheduled_at": None, "finished_at": None}
    assert first["counts"] == {"total": 0, "pending": 0, "sending": 0, "sent": 0, "skipped": 0,
                               "failed": 0, "unknown": 0}
    assert queued["status"] == "queued"
    assert queued["counts"]["total"] == 2 and queued["counts"]["pending"] == 2
    assert first["created_at"].endswith("Z")


@pytest.mark.parametrize(("query", "message"), [
    ("limit=0", "'limit' must be a whole number from 1 to 500"),
    ("limit=501", "'limit' must be a whole number from 1 to 500"),
    ("after=-1", "'after' must be a whole number from 0"),  # one rule: after from 0
    ("after=x", "'after' must be a whole number"),
    ("status=draft", "Unknown query parameter 'status'"),
])
def test_bad_paging_parameters_are_422(client, api_headers, query, message):
    response = client.get(f"/api/broadcasts?{query}", headers=api_headers)
    assert response.status_code == 422 and message in response.json["error"], response.json


def test_patch_changes_only_what_is_given(client, api_headers, audience, default_cap):
    draft = create(client, api_headers, list_id=audience["list"], preheader="Pre").json["id"]

    response = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                            json={"subject": "Better news"})
    assert response.status_code == 200
    assert set(response.json) == ITEM_KEYS
    assert (response.json["subject"], response.json["preheader"], response.json["list_id"],
            response.json["skip_if_received_within_hours"]) == ("Better news", "Pre", audience["list"], 24)
    assert stored(draft).body == "Hello"

    to_segment = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                              json={"segment_id": audience["segment"], "body": "New body"})
    assert (to_segment.json["list_id"], to_segment.json["segment_id"]) == (None, audience["segment"])
    assert stored(draft).body == "New body"
    kept = client.patch(f"/api/broadcasts/{draft}", headers=api_headers, json={"preheader": "Pre 2"})
    assert (kept.json["list_id"], kept.json["segment_id"]) == (None, audience["segment"])

    to_list = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                           json={"list_id": audience["list"], "skip_if_received_within_hours": None})
    assert (to_list.json["list_id"], to_list.json["segment_id"]) == (audience["list"], None)
    assert to_list.json["skip_if_received_within_hours"] is None

    capped = client.patch(f"/api/broadcasts/{draft}", headers=api_headers,
                          json={"skip_if_received_within_hours": 6, "preheader": ""})
    assert capped.json["skip_if_received_within_hours"] == 6 and capped.json["preheader"] == ""
    row = stored(draft)
    assert (row.subject, row.body, row.list_id, row.segment_id, row.skip_if_received_within_hours) == (
        "Better news", "New body", audience["list"], None, 6)


@pytest.mark.parametrize(("body", "message"), [
    ({}, "Nothing to change"),
    ({"subjct": "x"}, "Unknown field 'subjct'"),
    ({"subject": ""}, "'subject' must be a non-empty string"),
    ({"subject": "a\nb"}, "one line"),
    ({"body": 5}, "'body' must be a string"),
    ({"preheader": None}, "'preheader' must be a string"),
    ({"list_id": 1, "segment_id": 1}, "not both"),
    ({"segment_id": 999}, "There is no segment with id 999"),
    ({"list_id": 999}, "There is no list with id 999"),
    ({"segment_id": None}, "Choose a list or a segment"),
    ({"list_id": "1"}, "'list_id' must be an id"),
    ({"skip_if_received_within_hours": 1000}, "whole number from 1 to 720"),
    ({"skip_if_received_within_hours": "6"}, "must be a whole number of hours"),
])
def test_a_refused_patch_changes_nothing(client, api_headers, audience, body, message):
    draft = create(client, api_headers, list_id=audience["list"],
                   skip_if_received_within_hours=3).json["id"]
    before = client.get("/api/broadcasts", headers=api_headers).json["items"][0]
    response = client.patch(f"/api/broadcasts/{draft}", headers=api_headers, json=body)
    assert response.status_code == 422
    assert message in response.json["error"], response.json
    assert client.get("/api/broadcasts", headers=api_headers).json["items"][0] == before


def test_only_a_draft_can_be_edited_or_deleted(client, api_headers, audience):
    draft = create(client, api_headers, list_id=audience["list"]).json["id"]
    assert client.post(f"/api/broadcasts/{draft}/send", headers=api_headers).status_code == 202

    edit = client.patch(f"/api/broadcasts/{draft}", headers=api_headers, json={"subject": "Late"})
    assert edit.status_code == 409
    assert edit.json == {"error": "Only a draft can be edited; this broadcast is queued."}
    delete = client.delete(f"/api/broadcasts/{draft}", headers=api_headers)
    assert delete.status_code == 409 and "Only a draft can be deleted" in delete.json["error"]
    row = stored(draft)
    assert (row.subject, row.status) == ("News", "queued")


def test_deleting_a_draft(client, api_headers, audience):
    keep = create(client, api_headers, list_id=audience["list"]).json["id"]
    gone = create(client, api_headers, list_id=audience["list"]).json["id"]
    response = client.delete(f"/api/broadcasts/{gone}", headers=api_headers)
    assert response.status_code == 204 and response.data == b""
    assert client.get(f"/api/broadcasts/{gone}", headers=api_headers).status_code == 404
    assert client.delete(f"/api/broadcasts/{gone}", headers=api_headers).status_code == 404
    assert [b["id"] for b in client.get("/api/broadcasts", headers=api_headers).json["items"]] == [keep]


def test_an_unknown_broadcast_is_a_json_404(client, api_headers):
    for method in ("patch", "delete"):
        response = getattr(client, method)("/api/broadcasts/999", headers=api_headers,
                                           json={"subject": "x"})
        assert response.status_code == 404
        assert response.json == {"error": "There is no such broadcast."}


def test_a_read_only_token_lists_but_cannot_create_edit_or_delete(client, owner, api_headers, audience):
    draft = create(client, api_headers, list_id=audience["list"]).json["id"]
    _, token = accounts.create_token(db.session, owner.id, "reports", read_only=True)
    read_only = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/broadcasts", headers=read_only).status_code == 200
    for method, path in (("post", "/api/broadcasts"), ("patch", f"/api/broadcasts/{draft}"),
                         ("delete", f"/api/broadcasts/{draft}")):
        response = getattr(client, method)(path, headers=read_only,
                                           json={"subject": "Sneaky", "segment_id": audience["segment"]})
        assert response.status_code == 403 and "read-only" in response.json["error"]
    row = stored(draft)
    assert (row.subject, row.list_id) == ("News", audience["list"])
    assert broadcast_count() == 1
    assert client.get("/api/broadcasts").status_code == 401
