"""The segments API, held to its contract: create, list, read with a count, replace, count,
delete (refused while a live broadcast uses the segment); every refusal is a JSON error that
names the problem, and a refused request writes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.core import accounts
from broadside.core.models import Broadcast, Segment
from tests.helpers import make_list
from webapp.extensions import db

BERLIN = {"all": [{"field": "attributes.city", "op": "equals", "value": "Berlin"}]}


def segment_count() -> int:
    return db.session.scalar(select(func.count()).select_from(Segment)) or 0


def add_person(client, headers, email, list_id, **attributes):
    response = client.post("/api/subscribers", headers=headers,
                           json={"email": email, "lists": [list_id], "attributes": attributes})
    assert response.status_code == 201, response.json
    return response.json["id"]


def create(client, headers, name="Berlin", rules=BERLIN):
    return client.post("/api/segments", headers=headers, json={"name": name, "rules": rules})


def test_create_read_replace_count_and_delete_a_segment(client, api_headers):
    weekly = make_list(db.session, 2)
    add_person(client, api_headers, "ann@example.com", weekly.id, city="Berlin", age=41)
    add_person(client, api_headers, "bob@example.com", weekly.id, city="berlin", age=17)
    add_person(client, api_headers, "cy@example.com", weekly.id, city="Oslo", age=60)

    created = create(client, api_headers, "  Berlin   readers ")
    assert created.status_code == 201
    body = created.json
    assert set(body) == {"id", "name", "rules", "created_at", "updated_at"}
    assert body["name"] == "Berlin readers"  # spaces collapsed, as the builder saves it
    assert body["rules"] == BERLIN
    assert body["created_at"].endswith("Z") and body["updated_at"].endswith("Z")
    segment_id = body["id"]

    one = client.get(f"/api/segments/{segment_id}", headers=api_headers)
    assert one.status_code == 200
    assert one.json == {**body, "count": 2}  # case is ignored: Berlin and berlin
    assert client.get(f"/api/segments/{segment_id}/count", headers=api_headers).json == {"count": 2}
    assert client.get("/api/segments", headers=api_headers).json == [body]

    adults = {"all": [{"field": "attributes.city", "op": "equals", "value": "berlin"},
                      {"any": [{"field": "attributes.age", "op": "gt", "value": "18"},
                               {"field": "email", "op": "ends_with", "value": "@nowhere.test"}]}]}
    replaced = client.put(f"/api/segments/{segment_id}", headers=api_headers,
                          json={"name": "Adults in Berlin", "rules": adults})
    assert replaced.status_code == 200
    assert replaced.json["name"] == "Adults in Berlin"
    # Stored normalised: the number given as text is a number now.
    assert replaced.json["rules"]["all"][1]["any"][0] == {"field": "attributes.age", "op": "gt", "value": 18}
    assert client.get(f"/api/segments/{segment_id}/count", headers=api_headers).json == {"count": 1}

    second = create(client, api_headers, "Anyone", {"any": [{"field": "list", "op": "is_on",
                                                              "value": weekly.id}]})
    names = [s["name"] for s in client.get("/api/segments", headers=api_headers).json]
    assert names == ["Adults in Berlin", "Anyone"]  # by name
    assert client.get(f"/api/segments/{second.json['id']}/count", headers=api_headers).json == {"count": 5}

    assert client.delete(f"/api/segments/{segment_id}", headers=api_headers).status_code == 204
    assert client.get(f"/api/segments/{segment_id}", headers=api_headers).status_code == 404
    assert segment_count() == 1


@pytest.mark.parametrize(("rules", "message"), [
    ({"all": [{"field": "attributes.age", "op": "gt", "value": "old"}]},
     "Condition 1 (attributes.age gt): the value must be a number"),
    ({"all": [{"field": "email", "op": "contains", "value": "a"},
              {"any": [{"field": "shoe_size", "op": "equals", "value": "9"}]}]},
     "Condition 2.1 (shoe_size equals): unknown field 'shoe_size'"),
    ({"all": [{"field": "email", "op": "gt", "value": "a"}]},
     "Condition 1 (email gt): the operator does not fit this field"),
    ({"all": [{"field": "joined", "op": "before", "value": "last tuesday"}]},
     "Condition 1 (joined before): the value must be a date written as YYYY-MM-DD"),
    ({"all": [{"field": "list", "op": "is_on", "value": 999}]},
     "Condition 1 (list is_on): there is no list 999"),
    ({"all": [{"field": "received", "op": "is", "value": 77}]},
     "Condition 1 (received is): there is no broadcast 77"),
    # Ids beyond the id columns' range: PostgreSQL raised on them (a 500) before.
    ({"all": [{"field": "list", "op": "is_not_on", "value": 2**31}]},
     "Condition 1 (list is_not_on): the list must be between 1 and 2147483647"),
    ({"all": [{"field": "email", "op": "contains", "value": "a"},
              {"any": [{"field": "received", "op": "is", "value": "3000000000"}]}]},
     "Condition 2.1 (received is): the broadcast must be between 1 and 2147483647"),
    ({"all": [{"field": "joined", "op": "within_days", "value": 7, "list": 2**62}]},
     "Condition 1 (joined within_days): the list must be between 1 and 2147483647"),
    ({"all": [{"field": "name", "op": "equals", "value": "x", "colour": "red"}]},
     "Condition 1 (name equals): unknown key 'colour'"),
    ({"all": [{"field": "email", "op": "contains", "value": "a"}, {"any": []}]},
     "Group 2 is empty"),
    ({"all": []}, "The segment is empty"),
    ({"all": [{"any": [{"all": [{"any": [{"all": [{"any": [
        {"field": "email", "op": "contains", "value": "a"}]}]}]}]}]}]},
     "nested at most 5 deep"),
    ({"every": [{"field": "email", "op": "contains", "value": "a"}]}, "a group is an object"),
    ("Berlin", "a group is an object"),
    (None, "a group is an object"),
])
def test_a_bad_rule_is_refused_with_a_message_naming_the_condition(client, api_headers, rules, message):
    make_list(db.session, 0)
    response = create(client, api_headers, "Bad", rules)
    assert response.status_code == 422
    assert message in response.json["error"], response.json
    assert segment_count() == 0


@pytest.mark.parametrize(("body", "message"), [
    ({"rules": BERLIN}, "'name' is required"),
    ({"name": "Berlin"}, "'rules' is required"),
    ({"name": 5, "rules": BERLIN}, "name must be text"),
    ({"name": "   ", "rules": BERLIN}, "needs a name"),
    ({"name": "x" * 201, "rules": BERLIN}, "at most 200 characters"),
    ({"name": "Berlin", "rules": BERLIN, "colour": "red"}, "Unknown field 'colour'"),
])
def test_bad_segment_bodies_are_422_and_write_nothing(client, api_headers, body, message):
    response = client.post("/api/segments", headers=api_headers, json=body)
    assert response.status_code == 422
    assert message in response.json["error"], response.json
    assert segment_count() == 0


@pytest.mark.parametrize("raw", [
    "not json", "[1, 2]", '"Berlin"', "{",
    # Python's parser takes NaN and Infinity; JSON has neither.
    '{"name": "N", "rules": {"all": [{"field": "attributes.n", "op": "gt", "value": NaN}]}}',
    '{"name": "N", "rules": {"all": [{"field": "attributes.n", "op": "gt", "value": 1e999}]}}',
    '{"name": "N", "rules": ' + "[" * 50_000 + "]" * 50_000 + "}",  # RecursionError: a 500 before
    '{"name": "N", "rules": ' + "[" * 40 + "]" * 40 + "}",  # deeper than any real body
])
def test_malformed_json_is_422_never_a_500(client, api_headers, raw):
    response = client.post("/api/segments", data=raw,
                           headers={**api_headers, "Content-Type": "application/json"})
    assert response.status_code == 422 and response.json["error"]
    assert segment_count() == 0


def test_a_json_body_needs_the_json_content_type(client, api_headers):
    response = client.post("/api/segments", data='{"name": "x", "rules": {}}',
                           headers={**api_headers, "Content-Type": "text/plain"})
    assert response.status_code == 422 and "application/json" in response.json["error"]


def test_names_are_unique_ignoring_case(client, api_headers):
    create(client, api_headers, "Berlin")
    other = create(client, api_headers, "Oslo").json["id"]
    response = create(client, api_headers, "BERLIN")
    assert response.status_code == 409 and "already a segment called" in response.json["error"]
    renamed = client.put(f"/api/segments/{other}", headers=api_headers,
                         json={"name": "berlin", "rules": BERLIN})
    assert renamed.status_code == 409
    assert client.get(f"/api/segments/{other}", headers=api_headers).json["name"] == "Oslo"
    assert segment_count() == 2


def test_a_refused_replacement_changes_nothing(client, api_headers):
    segment_id = create(client, api_headers).json["id"]
    before = client.get(f"/api/segments/{segment_id}", headers=api_headers).json
    response = client.put(f"/api/segments/{segment_id}", headers=api_headers,
                          json={"name": "Renamed", "rules": {"all": [
                              {"field": "attributes.age", "op": "lt", "value": "young"}]}})
    assert response.status_code == 422 and "Condition 1 (attributes.age lt)" in response.json["error"]
    db.session.expire_all()
    assert client.get(f"/api/segments/{segment_id}", headers=api_headers).json == before


@pytest.mark.parametrize(("method", "path"), [
    ("get", "/api/segments/999"), ("put", "/api/segments/999"),
    ("delete", "/api/segments/999"), ("get", "/api/segments/999/count"),
])
def test_an_unknown_segment_is_a_json_404(client, api_headers, method, path):
    response = getattr(client, method)(path, headers=api_headers, json={"name": "x", "rules": BERLIN})
    assert response.status_code == 404
    assert response.json == {"error": "There is no such segment."}


def test_an_id_beyond_the_database_range_is_not_found(client, api_headers):
    response = client.get(f"/api/segments/{2**40}", headers=api_headers)
    assert response.status_code == 404 and response.json["error"]


def test_a_segment_in_use_by_a_live_broadcast_cannot_be_deleted(client, api_headers):
    weekly = make_list(db.session, 2)
    add_person(client, api_headers, "ann@example.com", weekly.id, city="Berlin")
    segment_id = create(client, api_headers).json["id"]
    draft = client.post("/api/broadcasts", headers=api_headers,
                        json={"segment_id": segment_id, "subject": "Draft", "body": "x"}).json["id"]
    live = client.post("/api/broadcasts", headers=api_headers,
                       json={"segment_id": segment_id, "subject": "Hallo Berlin", "body": "x"}).json["id"]
    assert client.post(f"/api/broadcasts/{live}/send", headers=api_headers).status_code == 202
    assert client.post(f"/api/broadcasts/{live}/pause", headers=api_headers).status_code == 200

    refused = client.delete(f"/api/segments/{segment_id}", headers=api_headers)
    assert refused.status_code == 409
    assert "used by the paused broadcast “Hallo Berlin”" in refused.json["error"]
    assert segment_count() == 1

    assert client.post(f"/api/broadcasts/{live}/cancel", headers=api_headers).status_code == 200
    assert client.delete(f"/api/segments/{segment_id}", headers=api_headers).status_code == 204
    # The draft that chose it is left without an audience, and says so when read.
    assert db.session.get(Broadcast, draft).segment_id is None


def test_a_read_only_token_reads_segments_but_changes_none(client, owner, api_headers):
    segment_id = create(client, api_headers).json["id"]
    _, token = accounts.create_token(db.session, owner.id, "reports", read_only=True)
    read_only = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/segments", headers=read_only).status_code == 200
    assert client.get(f"/api/segments/{segment_id}/count", headers=read_only).status_code == 200
    for method, path in (("post", "/api/segments"), ("put", f"/api/segments/{segment_id}"),
                         ("delete", f"/api/segments/{segment_id}")):
        response = getattr(client, method)(path, headers=read_only,
                                           json={"name": "Sneaky", "rules": BERLIN})
        assert response.status_code == 403 and "read-only" in response.json["error"]
    assert [s["name"] for s in client.get("/api/segments", headers=read_only).json] == ["Berlin"]


def test_segments_need_a_token(client, app):
    assert client.get("/api/segments").status_code == 401
    assert client.post("/api/segments", json={"name": "x", "rules": BERLIN}).status_code == 401
    assert segment_count() == 0
