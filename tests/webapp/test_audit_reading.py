"""Reading the audit log: `GET /api/audit`'s keyset paging and filters, the Settings page with
its filters (and who may open it), the CLI's changes by the command line, and the rule for a
change that committed and then failed. On both databases."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from broadside.core import actors, audit
from broadside.core.models import AuditEntry
from broadside.core.timeutil import utcnow
from tests.helpers import csrf_token_from
from webapp.extensions import db


def seed(count: int, **fields) -> list[int]:
    who = actors.Actor(person_id=fields.pop("person_id", 1), token_id=None, label="Ann <a@x.example>",
                       address="192.0.2.1")
    rows = [audit.record(db.session, fields.get("action", "list.create"),
                         object_type=fields.get("object_type", "list"), object_id=i + 1,
                         summary=f"Created list {i + 1}", actor=who) for i in range(count)]
    db.session.commit()
    return [r.id for r in rows if r is not None]


def test_the_api_pages_newest_first_and_filters(client, api_headers, owner):
    ids = seed(5)
    other = seed(2, action="broadcast.send", object_type="broadcast", person_id=99)
    first = client.get("/api/audit?limit=3", headers=api_headers).get_json()
    assert [e["id"] for e in first["items"]] == (ids + other)[::-1][:3]
    second = client.get(f"/api/audit?limit=3&after={first['next']}", headers=api_headers).get_json()
    third = client.get(f"/api/audit?limit=3&after={second['next']}", headers=api_headers).get_json()
    assert [e["id"] for e in first["items"] + second["items"] + third["items"]] == (ids + other)[::-1]
    assert third["next"] is None
    entry = first["items"][0]
    assert entry["actor"] == {"person_id": 99, "token_id": None, "label": "Ann <a@x.example>"}
    assert entry["address"] == "192.0.2.1" and entry["action"] == "broadcast.send"

    def ids_for(query: str) -> list[int]:
        answer = client.get(f"/api/audit?{query}", headers=api_headers)
        assert answer.status_code == 200, answer.text
        return [e["id"] for e in answer.get_json()["items"]]

    assert ids_for("person_id=99") == other[::-1]
    assert ids_for("action=broadcast") == other[::-1]
    assert ids_for("action=broadcast.send") == other[::-1]
    assert ids_for("action=broad") == []
    assert ids_for("object_type=list&object_id=2") == [ids[1]]
    db.session.execute(update(AuditEntry).where(AuditEntry.id == ids[0])
                       .values(created_at=utcnow() - timedelta(days=3)))
    db.session.commit()
    since = (utcnow() - timedelta(days=1)).isoformat() + "Z"
    assert ids[0] not in ids_for(f"since={since}")
    assert ids_for(f"until={since}") == [ids[0]]
    for bad in ("since=yesterday", "since=0001-01-01T00:00:00%2B01:00", "limit=0", "after=-1",
                "person_id=x", "colour=red", f"action={'x' * 65}", "until="):
        assert client.get(f"/api/audit?{bad}", headers=api_headers).status_code == 422, bad


def test_the_api_and_the_page_are_for_owners_and_admins(app, client, token_headers_as,
                                                       sign_in_as):
    seed(1)
    assert client.get("/api/audit", headers=token_headers_as("admin")).status_code == 200
    for role in ("sender", "writer", "viewer"):
        assert client.get("/api/audit", headers=token_headers_as(
            role, email=f"{role}@t.example")).status_code == 403
    viewer = sign_in_as("viewer")
    assert viewer.get("/settings/audit/").status_code == 403


def test_the_page_lists_filters_and_links_what_still_exists(app, logged_in_client, owner):
    token = csrf_token_from(logged_in_client.get("/lists/").text)
    logged_in_client.post("/lists/", data={"csrf_token": token, "name": "Weekly"})
    logged_in_client.post("/lists/", data={"csrf_token": token, "name": "Gone"})
    gone = db.session.scalars(select(AuditEntry.object_id).order_by(AuditEntry.id)).all()[-1]
    logged_in_client.post(f"/lists/{gone}/delete", data={"csrf_token": token})
    page = logged_in_client.get("/settings/audit/")
    assert page.status_code == 200
    assert page.text.count('<tr id="entry-') == 3
    assert 'href="/lists/1"' in page.text and f'href="/lists/{gone}"' not in page.text
    assert "(gone)" in page.text
    only = logged_in_client.get("/settings/audit/?action=list.delete")
    assert only.text.count('<tr id="entry-') == 1
    today = utcnow().date().isoformat()
    assert logged_in_client.get(f"/settings/audit/?since={today}&until={today}").text.count(
        '<tr id="entry-') == 3
    bad = logged_in_client.get("/settings/audit/?since=soon")
    assert bad.status_code == 422 and "A day as YYYY-MM-DD." in bad.text
    assert 'href="/settings/audit/"' in logged_in_client.get("/settings/").text


def test_the_command_line_is_the_actor_of_its_changes(app, owner):
    runner = app.test_cli_runner()
    made = runner.invoke(args=["tokens", "create", "deploy"])
    assert made.exit_code == 0, made.output
    revoked = runner.invoke(args=["tokens", "revoke", "1"])
    assert revoked.exit_code == 0, revoked.output
    assert runner.invoke(args=["tokens", "revoke", "999"]).exit_code != 0
    rows = db.session.scalars(select(AuditEntry).order_by(AuditEntry.id)).all()
    assert [(r.action, r.object_id, r.actor, r.actor_person_id) for r in rows] == [
        ("token.create", "1", "command line", None), ("token.revoke", "1", "command line", None)]


def test_a_change_that_committed_keeps_its_row_when_the_answer_then_fails(app, logged_in_client):
    def after_the_commit(response):
        from flask import request
        if request.endpoint == "lists.create":
            raise RuntimeError("a failure after the commit")
        return response

    app.after_request_funcs.setdefault(None, []).insert(0, after_the_commit)
    token = csrf_token_from(logged_in_client.get("/lists/").text)
    with pytest.raises(RuntimeError):  # the tests propagate it; a server answers 500
        logged_in_client.post("/lists/", data={"csrf_token": token, "name": "Weekly"})
    rows = db.session.scalars(select(AuditEntry)).all()
    assert [(r.action, r.object_type) for r in rows] == [("list.create", "list")]


def test_the_editors_autosave_is_one_row_per_ten_minutes(app, logged_in_client):
    token = csrf_token_from(logged_in_client.get("/lists/").text)
    created = logged_in_client.post("/lists/", data={"csrf_token": token, "name": "Weekly"})
    weekly = created.headers["Location"].rstrip("/").split("/")[-1]
    draft = logged_in_client.post("/broadcasts/new", data={"csrf_token": token,
                                                           "audience": f"list:{weekly}"})
    path = draft.headers["Location"].removesuffix("/edit")
    for subject in ("H", "He", "Hel"):
        logged_in_client.post(f"{path}/autosave", data={
            "csrf_token": token, "audience": f"list:{weekly}", "subject": subject, "body": "x"},
            headers={"HX-Request": "true"})
    actions_seen = db.session.scalars(select(AuditEntry.action).order_by(AuditEntry.id)).all()
    assert actions_seen == ["list.create", "broadcast.create", "broadcast.edit"]
