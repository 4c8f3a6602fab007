"""The audit log: a scripted session of an owner's pages and an API token lists every change,
in order, with its actor, action, object and address, and nothing else; a refused change
writes nothing; settings keep their before and after; no secret and no subscriber's address
is ever in the log; the events of a change carry its actor. On both databases."""

from __future__ import annotations

import io
import json

from sqlalchemy import func, select

from broadside.core.models import AuditEntry, Event, Subscriber
from tests.conftest import OWNER_EMAIL
from tests.helpers import csrf_token_from
from webapp.extensions import db

SMTP_PASSWORD = "smtp-pass-7c1e93b5"
HOOK_SECRET = "whsec-audit-42d9e1"
ADDRESSES = ("ann@example.com", "bob@example.com", "cy@example.com")


def log() -> list[AuditEntry]:
    db.session.expire_all()
    return list(db.session.scalars(select(AuditEntry).order_by(AuditEntry.id)))


def whole_log_text() -> str:
    return "\n".join(json.dumps([e.actor, e.address, e.action, e.object_type, e.object_id,
                                 e.summary, e.details], default=str) for e in log())


def page_post(client, page: str, path: str, data: dict, **kwargs):
    token = csrf_token_from(client.get(page).text)
    return client.post(path, data={"csrf_token": token, **data}, **kwargs)


def subscriber_id(email: str) -> int:
    found = db.session.scalar(select(Subscriber.id).where(Subscriber.email == email))
    assert found is not None
    return found


def test_a_scripted_session_is_in_the_log_in_order_with_its_actor_and_nothing_else(
        app, logged_in_client, api_headers, owner):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True
    c, api, owner_id = logged_in_client, api_headers, owner.id
    remote = {"REMOTE_ADDR": "198.51.100.23"}
    token_remote = {"REMOTE_ADDR": "203.0.113.9"}
    assert log() == []
    expected: list[tuple[str, str, str | None, str]] = []  # action, type, id, who

    def expect(action: str, kind: str, ident: object, who: str = "page") -> None:
        expected.append((action, kind, None if ident is None else str(ident), who))

    # The owner, through the pages.
    r = page_post(c, "/settings/", "/settings/sender", {
        "sender_name": "Acme", "sender_email": "news@acme.example",
        "postal_address": "Acme Ltd, 1 Main Street", "time_zone": "UTC"}, environ_base=remote)
    assert r.status_code in (302, 303)
    expect("settings.sender", "settings", None)
    r = page_post(c, "/lists/", "/lists/", {"name": "Weekly"}, environ_base=remote)
    weekly = int(r.headers["Location"].rstrip("/").split("/")[-1])
    expect("list.create", "list", weekly)
    r = page_post(c, "/subscribers/new", "/subscribers/new",
                  {"email": "ann@example.com", "lists": str(weekly)}, environ_base=remote)
    assert r.status_code in (302, 303), r.text
    ann = subscriber_id("ann@example.com")
    expect("subscriber.create", "subscriber", ann)
    r = page_post(c, "/broadcasts/", "/broadcasts/new", {"audience": f"list:{weekly}"},
                  environ_base=remote)
    draft = int(r.headers["Location"].split("/")[-2])
    expect("broadcast.create", "broadcast", draft)
    r = page_post(c, f"/broadcasts/{draft}/edit", f"/broadcasts/{draft}/edit", {
        "audience": f"list:{weekly}", "subject": "Hello", "preheader": "", "body": "The news."},
        environ_base=remote)
    assert r.status_code in (302, 303), r.text
    expect("broadcast.edit", "broadcast", draft)
    r = page_post(c, f"/broadcasts/{draft}/send", f"/broadcasts/{draft}/send",
                  {"queue_anyway": "y"}, environ_base=remote)
    assert r.status_code == 302
    expect("broadcast.send", "broadcast", draft)
    r = page_post(c, "/settings/identities/", "/settings/identities/", {
        "name": "Product", "from": "Acme Product <product@acme.example>",
        "transport": f"smtp://mailer:{SMTP_PASSWORD}@smtp.acme.example:587",
        "delay_ms": "500", "hourly_limit": "100", "postal_address": "",
        "webhook_secret": HOOK_SECRET}, environ_base=remote)
    assert r.status_code in (302, 303), r.text
    expect("identity.create", "identity", None)  # its id: checked below
    r = page_post(c, "/settings/webhooks", "/settings/webhooks", {
        "url": "http://127.0.0.1:9/hook", "events": ["subscriber.created"]}, environ_base=remote)
    assert r.status_code in (302, 303), r.text
    expect("webhook.create", "webhook", None)
    r = c.get(f"/subscribers/export.csv?list={weekly}", environ_base=remote)
    assert r.status_code == 200 and "ann@example.com" in r.text
    expect("subscribers.export", "subscribers", None)

    # A token, through the API.
    def call(method: str, path: str, **kwargs):
        answer = c.open(path, method=method, headers=api, environ_base=token_remote, **kwargs)
        assert answer.status_code < 300, (path, answer.status_code, answer.text)
        return answer.get_json(silent=True)

    monthly = call("POST", "/api/lists", json={"name": "Monthly"})["id"]
    expect("list.create", "list", monthly, "token")
    bob = call("POST", "/api/subscribers", json={"email": "bob@example.com",
                                                  "lists": [monthly]})["id"]
    expect("subscriber.create", "subscriber", bob, "token")
    segment = call("POST", "/api/segments", json={"name": "Everyone", "rules": {
        "all": [{"field": "email", "op": "contains", "value": "@"}]}})["id"]
    expect("segment.create", "segment", segment, "token")
    second = call("POST", "/api/broadcasts", json={"list_id": monthly, "subject": "Hi",
                                                   "body": "x"})["id"]
    expect("broadcast.create", "broadcast", second, "token")
    call("PATCH", f"/api/broadcasts/{second}", json={"subject": "Hi again"})
    expect("broadcast.edit", "broadcast", second, "token")
    call("POST", f"/api/broadcasts/{second}/send")
    expect("broadcast.send", "broadcast", second, "token")
    call("POST", f"/api/broadcasts/{second}/pause")
    expect("broadcast.pause", "broadcast", second, "token")
    call("POST", f"/api/broadcasts/{second}/cancel")
    expect("broadcast.cancel", "broadcast", second, "token")
    call("POST", f"/api/lists/{monthly}/import", content_type="multipart/form-data", data={
        "file": (io.BytesIO(b"email,name\ncy@example.com,Cy\n"), "a.csv"),
        "consent": "opted_in"})
    expect("list.import", "list", monthly, "token")
    bulk = call("POST", "/api/subscribers/bulk", json={"action": "add", "list_id": weekly,
                                                       "ids": [bob]})["id"]
    expect("subscribers.bulk", "bulk", bulk, "token")
    call("DELETE", f"/api/subscribers/{bob}")
    expect("subscriber.erase", "subscriber", bob, "token")

    # The owner erases Ann through her page.
    r = page_post(c, f"/subscribers/{ann}/delete", f"/subscribers/{ann}/delete", {},
                  environ_base=remote)
    assert r.status_code == 302
    expect("subscriber.erase", "subscriber", ann)

    entries = log()
    got = [(e.action, e.object_type, e.object_id,
            "token" if e.actor_token_id else "page") for e in entries]
    identity_row = next(e for e in entries if e.action == "identity.create")
    webhook_row = next(e for e in entries if e.action == "webhook.create")
    assert identity_row.object_id and webhook_row.object_id  # named by what the commit made
    expected = [(a, k, {"identity": identity_row.object_id,
                        "webhook": webhook_row.object_id}.get(k, i) if i is None and k in (
                            "identity", "webhook") else i, w) for a, k, i, w in expected]
    assert got == expected
    for e in entries:
        if e.actor_token_id:
            assert e.actor == f"token “tests” of {OWNER_EMAIL}"
            assert e.address == "203.0.113.9" and e.actor_person_id == owner_id
        else:
            assert e.actor == OWNER_EMAIL and e.address == "198.51.100.23"
            assert e.actor_person_id == owner_id
    sender = entries[0]
    assert sender.details["before"]["sender_name"] == ""
    assert sender.details["after"]["sender_name"] == "Acme"
    assert "time_zone" not in sender.details["after"]  # unchanged: not kept
    assert identity_row.details["after"]["name"] == "Product"
    assert identity_row.details["after"]["transport_secrets"] == "changed"
    assert "smtp.acme.example" in identity_row.details["after"]["transport"]
    assert webhook_row.details["after"]["secret"] == "changed"
    text = whole_log_text()
    for secret in (SMTP_PASSWORD, HOOK_SECRET):
        assert secret not in text
    for address in ADDRESSES:  # erased or not, no subscriber's address is in the log
        assert address not in text

    # The events of a change carry who made it; the worker's carry nobody.
    sent_by = db.session.scalar(select(Event.actor_person_id).where(
        Event.broadcast_id == draft, Event.kind == "queued"))
    assert sent_by == owner_id
    paused = db.session.execute(select(Event.actor_person_id, Event.actor_token_id).where(
        Event.broadcast_id == second, Event.kind == "paused")).one()
    assert paused.actor_person_id == owner_id and paused.actor_token_id is not None


def test_a_refused_change_writes_nothing(app, logged_in_client, api_headers):
    c = logged_in_client
    assert page_post(c, "/lists/", "/lists/", {"name": "   "}).status_code == 422
    assert page_post(c, "/settings/", "/settings/sender", {
        "sender_name": "X", "sender_email": "not an address", "postal_address": "",
        "time_zone": "UTC"}).status_code == 422
    assert c.post("/api/lists", headers=api_headers, json={"name": ""}).status_code == 422
    assert c.post("/api/lists", headers=api_headers, json={"nope": 1}).status_code == 422
    assert c.post("/api/broadcasts/999/send", headers=api_headers).status_code == 404
    assert db.session.scalar(select(func.count()).select_from(AuditEntry)) == 0


def test_a_change_a_role_may_not_make_writes_nothing(app, sign_in_as, token_headers_as):
    writer = sign_in_as("writer")
    token = csrf_token_from(writer.get("/lists/").text)
    assert writer.post("/settings/sender", data={"csrf_token": token, "sender_name": "X",
                                                 "sender_email": "", "postal_address": "",
                                                 "time_zone": "UTC"}).status_code == 403
    assert writer.post("/lists/", data={"csrf_token": token, "name": "X"}).status_code == 403
    headers = token_headers_as("writer", email="w2@example.com")
    assert writer.post("/api/lists", headers=headers, json={"name": "X"}).status_code == 403
    viewer = token_headers_as("owner", read_only=True, email="r@example.com")
    assert writer.post("/api/lists", headers=viewer, json={"name": "X"}).status_code == 403
    assert db.session.scalar(select(func.count()).select_from(AuditEntry)) == 0
