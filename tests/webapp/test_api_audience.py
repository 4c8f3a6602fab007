"""The audience API, held to its exact contract."""

import io

import pytest
from sqlalchemy import func, select

from broadside.core.models import (
    Delivery,
    Event,
    Import,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from webapp.extensions import db


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


def new_list(client, headers, name="Weekly") -> int:
    response = client.post("/api/lists", json={"name": name}, headers=headers)
    assert response.status_code == 201
    return response.json["id"]


def test_create_and_list_lists_with_counts(client, api_headers):
    response = client.post("/api/lists", json={"name": "Weekly"}, headers=api_headers)
    assert response.status_code == 201
    assert response.json == {"id": response.json["id"], "name": "Weekly"}
    assert isinstance(response.json["id"], int)
    listed = client.get("/api/lists", headers=api_headers)
    assert listed.status_code == 200
    assert listed.json == [{"id": response.json["id"], "name": "Weekly", "tracking": "counts",
                            "counts": {"active": 0, "unconfirmed": 0, "unsubscribed": 0}}]


def test_bad_list_bodies_are_422_with_an_error(client, api_headers):
    for body in [{}, {"name": ""}, {"name": "  "}, {"name": 7}, {"name": "x" * 201}, [],
                 "Weekly"]:
        response = client.post("/api/lists", json=body, headers=api_headers)
        assert response.status_code == 422 and response.json["error"], body


def test_a_taken_list_name_is_a_409_conflict(client, api_headers):
    new_list(client, api_headers, "Weekly")
    response = client.post("/api/lists", json={"name": "weekly"}, headers=api_headers)
    assert response.status_code == 409 and "already" in response.json["error"]


def test_new_address_is_201_known_address_is_200_with_the_same_id(client, api_headers):
    weekly = new_list(client, api_headers, "Weekly")
    monthly = new_list(client, api_headers, "Monthly")
    created = client.post("/api/subscribers", headers=api_headers, json={
        "email": "Ann@Example.com", "name": "Ann", "lists": [weekly],
        "attributes": {"plan": "gold", "age": 41}})
    assert created.status_code == 201
    assert created.json == {"id": created.json["id"], "email": "ann@example.com", "warnings": []}
    again = client.post("/api/subscribers", headers=api_headers, json={
        "email": "ANN@example.com", "lists": [weekly, monthly], "attributes": {"city": "Oslo"}})
    assert again.status_code == 200
    assert again.json == {"id": created.json["id"], "email": "ann@example.com", "warnings": []}
    person = client.get(f"/api/subscribers/{created.json['id']}", headers=api_headers).json
    assert person["name"] == "Ann"
    assert person["attributes"] == {"plan": "gold", "age": 41, "city": "Oslo"}
    assert {(s["list_id"], s["status"]) for s in person["subscriptions"]} == {
        (weekly, "active"), (monthly, "active")}
    counts = {item["id"]: item["counts"] for item in client.get("/api/lists",
                                                               headers=api_headers).json}
    assert counts[weekly] == {"active": 1, "unconfirmed": 0, "unsubscribed": 0}


def test_the_api_never_reactivates_an_unsubscribed_person(client, api_headers):
    weekly = new_list(client, api_headers)
    sid = client.post("/api/subscribers", headers=api_headers,
                      json={"email": "a@example.com", "lists": [weekly]}).json["id"]
    db.session.execute(Subscription.__table__.update().values(status="unsubscribed"))
    db.session.commit()
    response = client.post("/api/subscribers", headers=api_headers,
                           json={"email": "a@example.com", "lists": [weekly]})
    assert response.status_code == 200
    person = client.get(f"/api/subscribers/{sid}", headers=api_headers).json
    assert person["subscriptions"][0]["status"] == "unsubscribed"


BAD_SUBSCRIBER_BODIES = [
    {"email": "not an address", "lists": []},
    {"email": "", "lists": []},
    {"lists": []},
    {"email": 5, "lists": []},
    {"email": "a@example.com", "lists": [999]},
    {"email": "a@example.com", "lists": "1"},
    {"email": "a@example.com", "lists": [True]},
    {"email": "a@example.com", "lists": [], "attributes": ["x"]},
    {"email": "a@example.com", "lists": [], "attributes": {"email": "b@example.com"}},
    {"email": "a@example.com", "lists": [], "attributes": {"k": "v" * 1001}},
    {"email": "a@example.com", "lists": [], "name": ["x"]},
    {"email": "a@example.com", "lists": [], "name": "n" * 201},
]


def test_bad_subscriber_bodies_are_422_and_write_nothing(client, api_headers):
    new_list(client, api_headers)
    for body in BAD_SUBSCRIBER_BODIES:
        response = client.post("/api/subscribers", json=body, headers=api_headers)
        assert response.status_code == 422 and response.json["error"], body
    assert count(Subscriber) == 0


def test_unknown_list_in_an_otherwise_good_body_names_the_list(client, api_headers):
    weekly = new_list(client, api_headers)
    response = client.post("/api/subscribers", headers=api_headers,
                           json={"email": "a@example.com", "lists": [weekly, 12345]})
    assert response.status_code == 422 and "12345" in response.json["error"]
    assert count(Subscriber) == count(Subscription) == 0


def test_delete_erases_and_unknown_ids_are_404(client, api_headers):
    weekly = new_list(client, api_headers)
    sid = client.post("/api/subscribers", headers=api_headers,
                      json={"email": "a@example.com", "lists": [weekly]}).json["id"]
    assert client.delete(f"/api/subscribers/{sid}", headers=api_headers).status_code == 204
    assert count(Subscriber) == count(Subscription) == count(Event) == 0
    for method in ("get", "delete"):
        response = getattr(client, method)(f"/api/subscribers/{sid}", headers=api_headers)
        assert response.status_code == 404 and response.json["error"]
    assert client.post("/api/lists/999/import", headers=api_headers).status_code == 404


def test_erase_keeps_delivery_rows_without_the_person(client, api_headers):
    from broadside.core.models import Broadcast

    weekly = new_list(client, api_headers)
    sid = client.post("/api/subscribers", headers=api_headers,
                      json={"email": "a@example.com", "lists": [weekly]}).json["id"]
    broadcast = Broadcast(list_id=weekly, status="sent", subject="Hi")
    db.session.add(broadcast)
    db.session.flush()
    db.session.add(Delivery(broadcast_id=broadcast.id, subscriber_id=sid, status="sent"))
    db.session.commit()
    client.delete(f"/api/subscribers/{sid}", headers=api_headers)
    db.session.expire_all()
    assert db.session.scalar(select(Delivery.subscriber_id)) is None


def post_csv(client, headers, list_id, content: bytes, field="file", **fields):
    fields.setdefault("consent", "opted_in")
    return client.post(f"/api/lists/{list_id}/import", headers=headers,
                       data={field: (io.BytesIO(content), "people.csv"), **fields},
                       content_type="multipart/form-data")


def test_import_answers_with_counts_every_rejection_and_its_row(client, api_headers):
    weekly = new_list(client, api_headers)
    content = (b"email,name\na@example.com,A\nbad,B\nA@example.com,dup\nb@example.com,B\n"
               b"c@example.com," + b"C" * 230 + b"\n")
    response = post_csv(client, api_headers, weekly, content)
    assert response.status_code == 200
    assert response.json == {
        "import_id": response.json["import_id"], "status": "done", "consent": "opted_in",
        "imported": 3, "updated": 0, "skipped": {"unsubscribed": 0, "suppressed": 0},
        "rejected": [
            {"line": 3, "reason": response.json["rejected"][0]["reason"], "row": ["bad", "B"]},
            {"line": 4, "reason": "duplicate of line 2 (the same address)",
             "row": ["A@example.com", "dup"]}],
        "rejected_count": 2,
        "warnings": [{"line": 6, "message": "name shortened to 200 characters (it had 230)"}],
        "empty_rows": 0, "welcomed": 0, "welcome_note": None}
    assert "not a valid email address" in response.json["rejected"][0]["reason"]
    again = post_csv(client, api_headers, weekly, content)
    assert (again.json["imported"], again.json["updated"]) == (0, 3)


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(("query", "fields"), [
    ("", {"consent": ""}), ("", {"consent": "yes"}),
    ("", {"consent": ["opted_in", "confirm"]}), ("?consent=confirm", {"consent": None}),
])
def test_an_import_with_a_wrong_choice_of_consent_is_422_and_writes_nothing(
        client, api_headers, query, fields):
    weekly = new_list(client, api_headers)
    data = {"file": (io.BytesIO(b"email\na@example.com\n"), "people.csv")}
    data.update({k: v for k, v in fields.items() if v is not None})
    response = client.post(f"/api/lists/{weekly}/import{query}", headers=api_headers, data=data,
                           content_type="multipart/form-data")
    assert response.status_code == 422
    assert '"consent"' in response.json["error"] and "opted_in" in response.json["error"] \
        or "not in the URL" in response.json["error"]
    assert count(Import) == count(Subscriber) == 0


@pytest.mark.parametrize("backend", ["sqlite"])
def test_an_api_import_without_consent_keeps_its_old_meaning_they_opted_in(client, api_headers):
    """Existing API clients did not send `consent`: their imports keep adding people active and
    email nobody (the page, by contrast, asks every time)."""
    weekly = new_list(client, api_headers)
    response = client.post(f"/api/lists/{weekly}/import", headers=api_headers,
                           data={"file": (io.BytesIO(b"email\na@example.com\n"), "people.csv")},
                           content_type="multipart/form-data")
    assert response.status_code == 200, response.json
    assert (response.json["consent"], response.json["imported"]) == ("opted_in", 1)
    assert db.session.scalar(select(Subscription.status)) == "active"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_an_api_import_asking_to_confirm_leaves_the_emails_to_the_worker(
        client, api_headers, smtp_server, run_worker_burst):
    weekly = new_list(client, api_headers)
    response = post_csv(client, api_headers, weekly,
                        b"email\nann@example.com\nbob@example.com\n", consent="confirm")
    assert response.status_code == 200
    assert (response.json["status"], response.json["consent"], response.json["imported"]) == (
        "asking", "confirm", 2)
    assert count(TransactionalMessage) == 0  # nothing queued, let alone sent, in the request
    assert run_worker_burst() == 0
    assert sorted(smtp_server.recipients()) == ["ann@example.com", "bob@example.com"]
    record = db.session.get(Import, response.json["import_id"])
    assert (record.status, record.asked) == ("done", 2)
    assert set(db.session.scalars(select(Subscription.status))) == {"unconfirmed"}


@pytest.fixture
def small_api_limit(app_config):
    app_config["API_IMPORT_MAX_BYTES"] = 2000


def test_import_refuses_unusable_files_and_writes_nothing(small_api_limit, client, api_headers):
    weekly = new_list(client, api_headers)
    for content, field, status in [
        (b"email\na@example.com\n", "upload", 422),  # wrong field name
        (b"", "file", 422),
        (b"\x00\x01\x02binary", "file", 422),
        (b"name\nx\n", "file", 422),
        (b"email\n" + b"p@example.com\n" * 200, "file", 413),
    ]:
        response = post_csv(client, api_headers, weekly, content, field=field)
        assert response.status_code == status and response.json["error"], content[:20]
    assert count(Import) == count(Subscriber) == 0


def test_audience_api_needs_a_token(client, app):
    assert client.get("/api/lists").status_code == 401
    assert client.post("/api/subscribers", json={"email": "a@example.com"}).status_code == 401
