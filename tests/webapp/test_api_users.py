"""`/api/users` and `/api/invitations`, on both databases: an owner's token invites (201, never
the link), lists, changes roles and removes; every refused body is a 422 naming its field with
nothing written; the last owner is a 409; other roles' tokens are 403."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.core import accounts
from broadside.core.models import Invitation, Owner, TransactionalMessage
from webapp.extensions import db


def rows(model) -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(model))


def test_an_owners_token_invites_lists_changes_and_removes(client, api_headers, owner,
                                                          make_person):
    made = client.post("/api/users", json={"email": "Ana@Example.com", "role": "sender"},
                       headers=api_headers)
    assert made.status_code == 201, made.json
    invitation = made.json
    assert (invitation["email"], invitation["role"], invitation["invited_by"]) == (
        "ana@example.com", "sender", owner.id)
    assert invitation["expired"] is False and "token" not in str(invitation).lower()
    stored = db.session.get(Invitation, invitation["id"])
    assert stored.token_hash not in str(made.json)
    [message] = db.session.scalars(select(TransactionalMessage)).all()
    assert (message.kind, message.to_email) == ("invitation", "ana@example.com")

    again = client.post("/api/users", json={"email": "ana@example.com", "role": "viewer"},
                        headers=api_headers)
    assert again.status_code == 201  # replaces the first
    listed = client.get("/api/users", headers=api_headers).json
    assert [(i["email"], i["role"]) for i in listed["invitations"]] == [("ana@example.com",
                                                                          "viewer")]
    assert [p["email"] for p in listed["people"]] == [owner.email]

    writer_id = make_person("writer", "wr@example.com").id
    taken = client.post("/api/users", json={"email": "WR@example.com", "role": "viewer"},
                        headers=api_headers)
    assert taken.status_code == 409 and "already signs in" in taken.json["error"]

    one = client.get(f"/api/users/{writer_id}", headers=api_headers)
    assert one.status_code == 200 and one.json["role"] == "writer"
    assert one.json["two_factor"] is False and one.json["last_seen_at"] is None
    changed = client.patch(f"/api/users/{writer_id}", json={"role": "admin"}, headers=api_headers)
    assert changed.status_code == 200 and changed.json["role"] == "admin"
    assert client.delete(f"/api/users/{writer_id}", headers=api_headers).status_code == 204
    assert client.get(f"/api/users/{writer_id}", headers=api_headers).status_code == 404

    last = client.patch(f"/api/users/{owner.id}", json={"role": "viewer"}, headers=api_headers)
    assert last.status_code == 409 and "last owner" in last.json["error"]
    assert client.delete(f"/api/users/{owner.id}", headers=api_headers).status_code == 409
    assert db.session.get(Owner, owner.id).role == "owner"

    pending = listed["invitations"][0]["id"]
    assert client.delete(f"/api/invitations/{pending}", headers=api_headers).status_code == 204
    assert client.get("/api/users", headers=api_headers).json["invitations"] == []
    assert client.delete("/api/invitations/999", headers=api_headers).status_code == 404


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"role": "viewer"}, "email", "'email' is required"),
    ({"email": "a@example.com"}, "role", "'role' is required"),
    ({"email": "a@example.com", "role": "emperor"}, "role", "must be one of"),
    ({"email": "a@example.com", "role": None}, "role", "must be one of"),
    ({"email": "not an address", "role": "viewer"}, "email", "not a valid email address"),
    ({"email": 5, "role": "viewer"}, "email", "must be a string"),
    ({"email": "a@example.com", "role": "viewer", "name": "A"}, None, "Unknown field 'name'"),
])
def test_a_refused_invitation_names_its_field_and_writes_nothing(client, api_headers, body,
                                                                 field, words):
    response = client.post("/api/users", json=body, headers=api_headers)
    assert response.status_code == 422, response.json
    assert words in response.json["error"]
    assert response.json.get("field") == field
    assert rows(Invitation) == 0 and rows(TransactionalMessage) == 0


def test_a_refused_role_change_names_its_field(client, api_headers, owner, make_person):
    person = make_person("viewer")
    for body, words in (({}, "'role' is required"), ({"role": "god"}, "must be one of"),
                        ({"role": "admin", "email": "x"}, "Unknown field 'email'")):
        response = client.patch(f"/api/users/{person.id}", json=body, headers=api_headers)
        assert response.status_code == 422 and words in response.json["error"], response.json
    assert client.patch(f"/api/users/{person.id}", data="role=admin",
                        headers=api_headers).status_code == 422
    assert db.session.get(Owner, person.id).role == "viewer"


def test_no_other_roles_token_may_touch_people(client, token_headers_as, make_person, owner):
    target = make_person("viewer", "target@example.com")
    for role in ("admin", "sender", "writer", "viewer"):
        headers = token_headers_as(role, email=f"{role}-t@example.com")
        assert client.get("/api/users", headers=headers).status_code == 403
        assert client.post("/api/users", json={"email": "z@example.com", "role": "viewer"},
                           headers=headers).status_code == 403
        assert client.delete(f"/api/users/{target.id}", headers=headers).status_code == 403
    assert rows(Invitation) == 0 and db.session.get(Owner, target.id) is not None


def test_a_removed_persons_token_stops_at_once(client, api_headers, make_person):
    person = make_person("admin", "gone@example.com")
    _, plain = accounts.create_token(db.session, person.id, "theirs")
    theirs = {"Authorization": f"Bearer {plain}"}
    assert client.get("/api/lists", headers=theirs).status_code == 200
    assert client.delete(f"/api/users/{person.id}", headers=api_headers).status_code == 204
    assert client.get("/api/lists", headers=theirs).status_code == 401
