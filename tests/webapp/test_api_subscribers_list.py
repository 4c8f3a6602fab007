"""The subscribers API beyond adding and erasing: the keyset-paged, filtered list, editing a
person's name and attributes, and unsubscribing them from one list."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.audience.subscribers.search import STATUS_FILTERS
from broadside.audience.unsubscribe.suppression import suppress
from broadside.core import accounts
from broadside.core.models import Event, Subscriber, Subscription
from tests.helpers import make_list
from webapp.extensions import db


def add(client, headers, email, lists=(), name="", **attributes) -> int:
    response = client.post("/api/subscribers", headers=headers, json={
        "email": email, "name": name, "lists": list(lists), "attributes": attributes})
    assert response.status_code == 201, response.json
    return response.json["id"]


def ids(client, headers, query="") -> list[int]:
    """Every id the list gives for `query`, walking the pages to the end."""
    seen: list[int] = []
    url = f"/api/subscribers?limit=1000{query}"
    while True:
        body = client.get(url, headers=headers).json
        seen += [item["id"] for item in body["items"]]
        if body["next"] is None:
            return seen
        url = f"/api/subscribers?limit=1000&after={body['next']}{query}"


def test_paging_visits_every_subscriber_exactly_once_in_id_order(client, api_headers):
    make_list(db.session, 23)
    everyone = list(db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)))
    seen, sizes, after = [], [], None
    while True:
        url = "/api/subscribers?limit=5" + (f"&after={after}" if after is not None else "")
        response = client.get(url, headers=api_headers)
        assert response.status_code == 200
        page = response.json
        assert set(page) == {"items", "next"}
        sizes.append(len(page["items"]))
        seen += [item["id"] for item in page["items"]]
        if len(seen) == 10:  # someone joins while the client pages: seen once, later
            everyone.append(add(client, api_headers, "late@example.com"))
        after = page["next"]
        if after is None:
            break
        assert after == seen[-1]
    assert seen == everyone  # ascending, each once
    assert sizes == [5, 5, 5, 5, 4]  # no empty page at the end


def test_the_default_page_is_100_and_the_largest_1000(client, api_headers):
    make_list(db.session, 101)
    first = client.get("/api/subscribers", headers=api_headers).json
    assert len(first["items"]) == 100 and first["next"] == first["items"][-1]["id"]
    rest = client.get(f"/api/subscribers?after={first['next']}", headers=api_headers).json
    assert len(rest["items"]) == 1 and rest["next"] is None
    assert len(client.get("/api/subscribers?limit=1000", headers=api_headers).json["items"]) == 101


def test_an_item_carries_the_person_and_all_their_lists(client, api_headers):
    weekly, monthly = make_list(db.session, 0, "Weekly"), make_list(db.session, 0, "Monthly")
    ann = add(client, api_headers, "Ann@Example.com", [monthly.id, weekly.id], "Ann", city="Oslo")
    client.post(f"/api/subscribers/{ann}/unsubscribe", headers=api_headers, json={"list_id": monthly.id})
    item = client.get("/api/subscribers", headers=api_headers).json["items"][0]
    assert item == {
        "id": ann, "email": "ann@example.com", "name": "Ann", "attributes": {"city": "Oslo"}, "locale": None,
        "timezone": None,
        "suppression": None, "created_at": item["created_at"],
        "subscriptions": sorted([{"list_id": weekly.id, "status": "active"},
                                 {"list_id": monthly.id, "status": "unsubscribed"}],
                                key=lambda s: s["list_id"]),
    }
    assert item["created_at"].endswith("Z")


@pytest.fixture
def people(client, api_headers):
    """Five people on two lists in different states, one suppressed, and a segment."""
    weekly, monthly = make_list(db.session, 0, "Weekly"), make_list(db.session, 0, "Monthly")
    ann = add(client, api_headers, "ann@example.com", [weekly.id], "Ann Lee", city="Berlin")
    bob = add(client, api_headers, "bob@example.org", [weekly.id, monthly.id], "Bob", city="Oslo")
    cy = add(client, api_headers, "cy@example.com", [monthly.id], "Cy Annan", city="Berlin")
    dee = add(client, api_headers, "dee@example.com", [weekly.id], "Dee", city="Berlin")
    eve = add(client, api_headers, "eve@example.net", [], "Eve")
    client.post(f"/api/subscribers/{bob}/unsubscribe", headers=api_headers, json={"list_id": weekly.id})
    suppress(db.session, dee, "bounced", detail="550 no such user")
    db.session.commit()
    segment = client.post("/api/segments", headers=api_headers, json={
        "name": "Berlin", "rules": {"all": [{"field": "attributes.city", "op": "equals",
                                             "value": "berlin"}]}}).json["id"]
    return {"weekly": weekly.id, "monthly": monthly.id, "segment": segment, "ann": ann,
            "bob": bob, "cy": cy, "dee": dee, "eve": eve}


@pytest.mark.parametrize(("query", "expected"), [
    ("", ["ann", "bob", "cy", "dee", "eve"]),
    ("&list_id={weekly}", ["ann", "bob", "dee"]),
    ("&list_id={weekly}&status=active", ["ann", "dee"]),
    ("&list_id={weekly}&status=unsubscribed", ["bob"]),
    ("&status=active", ["ann", "bob", "cy", "dee"]),  # active on some list
    ("&status=unsubscribed", ["bob"]),
    ("&status=suppressed", ["dee"]),
    ("&status=bounced", ["dee"]),
    ("&status=complained", []),
    ("&q=ANN", ["ann", "cy"]),  # in the address or the name ("Cy Annan"), case ignored
    ("&q=example.org", ["bob"]),
    ("&q=%20lee%20", ["ann"]),
    ("&q=100%25", []),  # LIKE's wildcards are literal text
    ("&q=an&list_id={monthly}", ["cy"]),
    # Whom the segment reaches now: Dee matches the rules but is suppressed; nobody off-list.
    ("&segment_id={segment}", ["ann", "cy"]),
    ("&segment_id={segment}&list_id={weekly}", ["ann"]),
])
def test_filters_pick_the_right_people(client, api_headers, people, query, expected):
    assert ids(client, api_headers, query.format(**people)) == [people[name] for name in expected]


def test_filters_page_like_the_whole_list(client, api_headers):
    weekly = make_list(db.session, 30)
    for i in range(0, 30, 3):
        client.post(f"/api/subscribers/{i + 1}/unsubscribe", headers=api_headers,
                    json={"list_id": weekly.id})
    walked, after = [], 0
    while after is not None:
        page = client.get(f"/api/subscribers?status=active&limit=4&after={after}",
                          headers=api_headers).json
        walked += [item["id"] for item in page["items"]]
        assert all(item["subscriptions"][0]["status"] == "active" for item in page["items"])
        after = page["next"]
    assert walked == [i + 1 for i in range(30) if i % 3]


@pytest.mark.parametrize(("query", "message"), [
    ("status=nope", "'status' must be one of " + ", ".join(STATUS_FILTERS)),
    ("list_id=abc", "'list_id' must be a whole number"),
    ("list_id=0", "'list_id' must be a whole number from 1"),
    ("list_id=99999999999", "'list_id' must be a whole number"),
    ("list_id=999", "'list_id': there is no list with id 999"),
    ("segment_id=999", "'segment_id': there is no segment with id 999"),
    ("segment_id=-1", "'segment_id' must be a whole number"),
    ("limit=0", "'limit' must be a whole number from 1 to 1000"),
    ("limit=1001", "'limit' must be a whole number from 1 to 1000"),
    ("after=-5", "'after' must be a whole number"),
    ("after=1.5", "'after' must be a whole number"),
    ("q=" + "x" * 201, "'q' can be at most 200 characters"),
    ("q=a%00b", "NUL"),
    ("stauts=active", "Unknown query parameter 'stauts'"),
    ("status=active&status=unsubscribed", "Give 'status' once"),
])
def test_an_invalid_filter_is_422_never_ignored(client, api_headers, query, message):
    make_list(db.session, 2)
    response = client.get(f"/api/subscribers?{query}", headers=api_headers)
    assert response.status_code == 422
    assert message in response.json["error"], response.json


def test_patch_changes_the_name_or_replaces_the_attributes(client, api_headers):
    weekly = make_list(db.session, 0)
    ann = add(client, api_headers, "ann@example.com", [weekly.id], "Ann", city="Oslo", plan="gold")

    renamed = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json={"name": "  Ann   Lee "})
    assert renamed.status_code == 200
    assert renamed.json["name"] == "Ann Lee"
    assert renamed.json["attributes"] == {"city": "Oslo", "plan": "gold"}  # untouched
    assert renamed.json["subscriptions"] == [{"list_id": weekly.id, "status": "active"}]
    assert set(renamed.json) == {"id", "email", "name", "attributes", "suppression", "created_at",
                                 "subscriptions", "locale", "timezone"}

    replaced = client.patch(f"/api/subscribers/{ann}", headers=api_headers,
                            json={"attributes": {"city": "Berlin", "age": 41, "tags": ["a", "b"]}})
    assert replaced.json["attributes"] == {"city": "Berlin", "age": 41, "tags": ["a", "b"]}  # plan gone
    assert replaced.json["name"] == "Ann Lee"

    both = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json={"name": "", "attributes": {}})
    assert (both.json["name"], both.json["attributes"]) == ("", {})
    db.session.expire_all()
    person = db.session.get(Subscriber, ann)
    assert (person.email, person.name, person.attributes) == ("ann@example.com", "", {})


@pytest.mark.parametrize(("body", "message"), [
    ({}, "Nothing to change"),
    ({"email": "new@example.com"}, "Unknown field 'email'"),
    ({"name": 5}, "'name' must be a string"),
    ({"name": None}, "'name' must be a string"),
    ({"name": "x" * 201}, "at most 200 characters"),
    ({"name": "a\x00b"}, "NUL"),
    ({"attributes": ["city", "Oslo"]}, "'attributes' must be an object"),
    ({"attributes": None}, "'attributes' must be an object"),
    ({"attributes": {"email": "x"}}, "'email' cannot be an attribute"),
    ({"attributes": {" ": "x"}}, "Every attribute needs a name"),
    ({"attributes": {"bio": "x" * 1001}}, "longer than 1000 characters"),
    ({"attributes": {"k": "a\x00b"}}, "NUL"),
])
def test_a_bad_patch_is_422_and_changes_nothing(client, api_headers, body, message):
    ann = add(client, api_headers, "ann@example.com", [], "Ann", city="Oslo")
    response = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json=body)
    assert response.status_code == 422
    assert message in response.json["error"], response.json
    db.session.expire_all()
    person = db.session.get(Subscriber, ann)
    assert (person.name, person.attributes) == ("Ann", {"city": "Oslo"})


def test_attributes_that_are_not_json_numbers_are_refused(client, api_headers):
    """NaN would reach the JSON column (PostgreSQL refuses it: a 500 before this check)."""
    ann = add(client, api_headers, "ann@example.com", [], "Ann")
    for raw in ('{"attributes": {"score": NaN}}', '{"attributes": {"score": -Infinity}}',
                '{"attributes": {"score": 1e400}}'):
        response = client.patch(f"/api/subscribers/{ann}", data=raw,
                                headers={**api_headers, "Content-Type": "application/json"})
        assert response.status_code == 422 and "not valid JSON" in response.json["error"], raw
    db.session.expire_all()
    assert db.session.get(Subscriber, ann).attributes == {}


def test_deeply_nested_attributes_are_refused_not_a_500(client, api_headers):
    """The domain checks attributes recursively: 400 levels overflowed Python's stack."""
    ann = add(client, api_headers, "ann@example.com", [], "Ann")
    deep = '{"a": ' + "[" * 400 + "]" * 400 + "}"
    for method, url, raw in (
        ("patch", f"/api/subscribers/{ann}", '{"attributes": ' + deep + "}"),
        ("post", "/api/subscribers", '{"email": "bob@example.com", "attributes": ' + deep + "}"),
    ):
        response = getattr(client, method)(url, data=raw, headers={**api_headers,
                                                                   "Content-Type": "application/json"})
        assert response.status_code == 422, (method, response.json)
        assert "more than 32 deep" in response.json["error"]
    nested = {"a": {"b": [[{"c": 1}]]}}  # real nesting is fine
    response = client.patch(f"/api/subscribers/{ann}", headers=api_headers, json={"attributes": nested})
    assert response.status_code == 200 and response.json["attributes"] == nested
    assert db.session.scalar(select(func.count()).select_from(Subscriber)) == 1


def test_unsubscribe_from_one_list_is_idempotent_and_recorded(client, api_headers):
    weekly, monthly = make_list(db.session, 0, "Weekly"), make_list(db.session, 0, "Monthly")
    ann = add(client, api_headers, "ann@example.com", [weekly.id, monthly.id])

    first = client.post(f"/api/subscribers/{ann}/unsubscribe", headers=api_headers,
                        json={"list_id": weekly.id})
    assert first.status_code == 200
    assert first.json == {"subscriber_id": ann, "list_id": weekly.id, "status": "unsubscribed",
                          "changed": True}
    again = client.post(f"/api/subscribers/{ann}/unsubscribe", headers=api_headers,
                        json={"list_id": weekly.id})
    assert again.status_code == 200 and again.json["changed"] is False

    rows = {s.list_id: (s.status, s.unsubscribe_source) for s in
            db.session.scalars(select(Subscription).where(Subscription.subscriber_id == ann))}
    assert rows == {weekly.id: ("unsubscribed", "api"), monthly.id: ("active", None)}
    events = db.session.scalars(select(Event).where(Event.subscriber_id == ann,
                                                    Event.kind == "unsubscribed")).all()
    assert [(e.list_id, e.detail) for e in events] == [(weekly.id, "api")]  # once, not twice


def test_unsubscribe_refusals_say_what_is_wrong(client, api_headers):
    weekly, monthly = make_list(db.session, 0, "Weekly"), make_list(db.session, 0, "Monthly")
    ann = add(client, api_headers, "ann@example.com", [weekly.id])
    cases = [
        (ann, {"list_id": monthly.id}, 404, "This subscriber is not on that list."),
        (ann, {"list_id": 999}, 422, "There is no list with id 999."),
        (999, {"list_id": weekly.id}, 404, "There is no such subscriber."),
        (ann, {}, 422, "'list_id' is required."),
        (ann, {"list_id": "1"}, 422, "'list_id' must be an id"),
        (ann, {"list_id": True}, 422, "'list_id' must be an id"),
        (ann, {"list_id": 2**70}, 422, "'list_id' must be an id"),
        (ann, {"list_id": weekly.id, "reason": "spam"}, 422, "Unknown field 'reason'"),
    ]
    for subscriber, body, status, message in cases:
        response = client.post(f"/api/subscribers/{subscriber}/unsubscribe", headers=api_headers,
                               json=body)
        assert response.status_code == status, (body, response.json)
        assert message in response.json["error"], (body, response.json)
    db.session.expire_all()
    assert db.session.scalar(select(Subscription.status).where(Subscription.subscriber_id == ann)) == "active"


def test_editing_an_unknown_subscriber_is_a_json_404(client, api_headers):
    response = client.patch("/api/subscribers/999", headers=api_headers, json={"name": "x"})
    assert response.status_code == 404 and response.json == {"error": "There is no such subscriber."}


def test_a_read_only_token_lists_but_cannot_edit_or_unsubscribe(client, owner, api_headers):
    weekly = make_list(db.session, 0)
    ann = add(client, api_headers, "ann@example.com", [weekly.id], "Ann")
    _, token = accounts.create_token(db.session, owner.id, "reports", read_only=True)
    read_only = {"Authorization": f"Bearer {token}"}
    assert client.get(f"/api/subscribers?list_id={weekly.id}", headers=read_only).status_code == 200
    assert client.patch(f"/api/subscribers/{ann}", headers=read_only,
                        json={"name": "Sneaky"}).status_code == 403
    assert client.post(f"/api/subscribers/{ann}/unsubscribe", headers=read_only,
                       json={"list_id": weekly.id}).status_code == 403
    item = client.get("/api/subscribers", headers=read_only).json["items"][0]
    assert item["name"] == "Ann" and item["subscriptions"][0]["status"] == "active"
    assert client.get("/api/subscribers").status_code == 401
