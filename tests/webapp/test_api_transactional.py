"""The transactional API against the real worker (in-process, RQ burst), real Redis and a real
SMTP server, on SQLite and PostgreSQL: templates over the API, one message per key, the
essential/unsubscribed/suppressed rule at the request and again at send time, every refusal
naming its field, the status and reason of an outcome, and the webhook event of it."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from broadside.audience.subscribers.service import save_subscriber
from broadside.audience.unsubscribe.service import leave_list
from broadside.audience.unsubscribe.suppression import suppress
from broadside.core.models import Subscription, TransactionalMessage
from broadside.core.timeutil import utcnow
from broadside.webhooks import endpoints
from tests.helpers import make_list
from tests.webhook_receiver import Receiver
from webapp.extensions import db

RESET = {"name": "Password reset", "subject": "Reset for {{ name }}",
         "body": "Hello {{ name }} from {{ attributes.city }}: your code is **{{ data.code }}**"
                 " and {{ data.missing }}.", "essential": True}
NEWS = {"name": "Receipt", "subject": "Your receipt", "body": "Total {{ data.total }}"}


def template(client, api_headers, body=RESET) -> int:
    response = client.post("/api/transactional/templates", headers=api_headers, json=body)
    assert response.status_code == 201, response.json
    return response.json["id"]


def send(client, api_headers, key: str | None = None, **body):
    headers = {**api_headers, **({"Idempotency-Key": key} if key is not None else {})}
    return client.post("/api/transactional", headers=headers,
                       json={"template": "Password reset", "to": "ann@example.com",
                             "data": {"code": "123456"}, **body})


def rows() -> list[TransactionalMessage]:
    db.session.expire_all()
    return list(db.session.scalars(select(TransactionalMessage).order_by(TransactionalMessage.id)))


def person(email: str, *, left: bool = False, suppressed: bool = False, city: str = "Berlin"):
    weekly = make_list(db.session, 0, f"List {email}")
    found, _ = save_subscriber(db.session, email=email, name="Ann", list_ids=[weekly.id],
                               attributes={"city": city})
    db.session.commit()
    if left:
        leave_list(db.session, found.id, weekly.id, "owner")
        db.session.commit()
    if suppressed:
        suppress(db.session, found.id, "bounced", "550 gone")
        db.session.commit()
    return found


def test_templates_over_the_api(client, api_headers):
    made = template(client, api_headers)
    assert client.post("/api/transactional/templates", headers=api_headers,
                       json=RESET).status_code == 409
    listed = client.get("/api/transactional/templates", headers=api_headers).json
    assert [t["name"] for t in listed] == ["Password reset"] and listed[0]["essential"] is True
    url = f"/api/transactional/templates/{made}"
    changed = client.put(url, headers=api_headers, json={**RESET, "subject": "New"})
    assert changed.status_code == 200 and changed.json["subject"] == "New"
    refused = client.put(url, headers=api_headers, json={**RESET, "body": "{{ oops"})
    assert refused.status_code == 422 and refused.json["field"] == "body"
    assert client.delete(url, headers=api_headers).status_code == 204
    assert client.get(url, headers=api_headers).status_code == 404
    assert client.delete(url, headers=api_headers).status_code == 404


def test_the_same_key_and_body_is_one_message_sent_once(client, api_headers, smtp_server,
                                                        run_worker_burst):
    template(client, api_headers)
    person("ann@example.com")
    first = send(client, api_headers, "reset-1")
    assert first.status_code == 202 and first.json["status"] == "pending"
    again = send(client, api_headers, "reset-1")
    assert again.status_code == 202 and again.json["id"] == first.json["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert run_worker_burst() == 0
    after = send(client, api_headers, "reset-1")
    assert after.json == {"id": first.json["id"], "status": "sent"}
    assert run_worker_burst() == 0
    [received] = smtp_server.messages
    assert received.rcpt_tos == ["ann@example.com"] and len(rows()) == 1
    text = received.message.get_body(("plain",)).get_content()
    assert "Hello Ann from Berlin: your code is 123456 and ." in " ".join(text.split())
    assert received.message["Subject"] == "Reset for Ann"
    assert "unsubscribe" not in received.data.decode().lower()
    [row] = rows()
    assert (row.kind, row.idempotency_key, len(row.request_hash)) == ("template", "reset-1", 64)
    assert row.template_revision_id is not None


def test_the_same_key_with_another_body_is_409_and_no_key_sends_each_request(
        client, api_headers, smtp_server, run_worker_burst):
    template(client, api_headers)
    assert send(client, api_headers, "k").status_code == 202
    other = send(client, api_headers, "k", data={"code": "999999"})
    assert other.status_code == 409 and other.json["field"] == "Idempotency-Key"
    elsewhere = send(client, api_headers, "k", to="bob@example.com")
    assert elsewhere.status_code == 409
    assert send(client, api_headers).json["id"] != send(client, api_headers).json["id"]
    assert run_worker_burst() == 0
    assert len(smtp_server.messages) == 3 and len(rows()) == 3


def test_a_key_older_than_a_day_is_cleared_by_the_tick_and_may_name_a_new_message(
        app, client, api_headers, smtp_server, run_worker_burst):
    template(client, api_headers)
    first = send(client, api_headers, "daily").json["id"]
    assert run_worker_burst() == 0
    db.session.execute(update(TransactionalMessage)
                       .values(created_at=utcnow() - timedelta(hours=25)))
    db.session.commit()
    assert run_worker_burst() == 0  # its maintenance tick runs at start
    assert rows()[0].idempotency_key is None
    second = send(client, api_headers, "daily", data={"code": "another"})
    assert second.status_code == 202 and second.json["id"] != first
    assert run_worker_burst() == 0
    assert len(smtp_server.messages) == 2


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_concurrent_duplicates_make_one_row(app, api_headers):
    """Twelve threads send one key at once on PostgreSQL: the UNIQUE constraint keeps one
    INSERT; every other request reads the committed row and answers its id."""
    with app.test_client() as setup:
        template(setup, api_headers)
    barrier = threading.Barrier(12)
    answers: list[tuple[int, int]] = []
    lock = threading.Lock()

    def one() -> None:
        with app.test_client() as client:
            barrier.wait()
            response = send(client, api_headers, "same-key")
            with lock:
                answers.append((response.status_code, response.json["id"]))

    threads = [threading.Thread(target=one) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 12 and {status for status, _ in answers} == {202}
    assert len({message_id for _, message_id in answers}) == 1
    assert db.session.scalar(select(func.count()).select_from(TransactionalMessage)) == 1


def test_essential_unsubscribed_and_suppressed_at_the_request(client, api_headers):
    template(client, api_headers)
    template(client, api_headers, NEWS)
    person("left@example.com", left=True)
    person("gone@example.com", suppressed=True)
    receipt = send(client, api_headers, template="Receipt", to="left@example.com")
    assert receipt.status_code == 422 and receipt.json["field"] == "to"
    assert "unsubscribed" in receipt.json["error"]
    assert send(client, api_headers, to="left@example.com").status_code == 202  # essential
    for name in ("Password reset", "Receipt"):
        refused = send(client, api_headers, "s-" + name[:3], template=name, to="gone@example.com")
        assert refused.status_code == 422 and "suppressed" in refused.json["error"]
    assert [r.to_email for r in rows()] == ["left@example.com"]  # the key was not kept


def test_unsubscribed_or_suppressed_meanwhile_is_not_sent(
        client, api_headers, smtp_server, run_worker_burst):
    template(client, api_headers)
    template(client, api_headers, NEWS)
    ann = person("ann@example.com")
    bob = person("bob@example.com")
    receipt = send(client, api_headers, template="Receipt", to="ann@example.com").json["id"]
    reset = send(client, api_headers, to="ann@example.com").json["id"]
    suppressed = send(client, api_headers, to="bob@example.com").json["id"]
    for list_id in db.session.scalars(select(Subscription.list_id)
                                      .where(Subscription.subscriber_id == ann.id)):
        leave_list(db.session, ann.id, list_id, "owner")
    suppress(db.session, bob.id, "complained", "")
    db.session.commit()
    assert run_worker_burst() == 0
    assert smtp_server.recipients() == ["ann@example.com"]  # only the essential reset
    states = {i: client.get(f"/api/transactional/{i}", headers=api_headers).json
              for i in (receipt, reset, suppressed)}
    assert states[reset]["status"] == "sent"
    assert states[receipt]["status"] == "failed" and "unsubscribed" in states[receipt]["reason"]
    assert states[suppressed]["status"] == "failed" and "suppressed" in states[suppressed]["reason"]


@pytest.mark.parametrize(("body", "headers", "status", "field"), [
    ({"template": "Nope"}, {}, 404, "template"),
    ({"template": 999}, {}, 404, "template"),
    ({"template": 2**31}, {}, 404, "template"),
    ({"template": True}, {}, 422, "template"),
    ({"to": "not an address"}, {}, 422, "to"),
    ({"to": 5}, {}, 422, "to"),
    ({"data": [1]}, {}, 422, "data"),
    ({"data": {"x": "y" * 20000}}, {}, 422, "data"),
    ({"data": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}}, {}, 422, "data"),
    ({"data": {"n": "x"}, "extra": 1}, {}, 422, "extra"),
    ({}, {"Idempotency-Key": ""}, 422, "Idempotency-Key"),
    ({}, {"Idempotency-Key": "has space"}, 422, "Idempotency-Key"),
    ({}, {"Idempotency-Key": "k" * 256}, 422, "Idempotency-Key"),
])
def test_a_bad_request_names_its_field_and_stores_nothing(client, api_headers, body, headers,
                                                          status, field):
    template(client, api_headers)
    response = client.post("/api/transactional", headers={**api_headers, **headers},
                           json={"template": "Password reset", "to": "ann@example.com", **body})
    assert (response.status_code, response.json.get("field")) == (status, field), response.json
    assert rows() == []


def test_status_and_reason_after_a_550_and_the_webhook_event(
        app, client, api_headers, smtp_server, run_worker_burst):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True
    template(client, api_headers)
    smtp_server.script.rcpt_replies["nobody@example.com"] = ["550 5.1.1 No such user"]
    with Receiver() as receiver:
        endpoints.create(db.session, receiver.url,
                         ["transactional.sent", "transactional.failed"], allow_private=True)
        failed = send(client, api_headers, to="nobody@example.com").json["id"]
        sent = send(client, api_headers).json["id"]
        assert run_worker_burst() == 0
        state = client.get(f"/api/transactional/{failed}", headers=api_headers).json
        assert state["status"] == "failed" and "550" in state["reason"]
        assert state["template"] == "Password reset" and state["to"] == "nobody@example.com"
        events = {r.json()["data"]["id"]: r.json() for r in receiver.requests}
    assert events[failed]["type"] == "transactional.failed"
    assert events[failed]["data"]["status"] == "failed" and "550" in events[failed]["data"]["reason"]
    assert events[sent]["type"] == "transactional.sent"
    assert events[sent]["data"]["template"] == "Password reset"
    assert events[sent]["data"]["to"] == "ann@example.com"
    assert client.get("/api/transactional/999999", headers=api_headers).status_code == 404


def test_a_retry_after_the_address_was_suppressed_answers_its_message(client, api_headers):
    """The key is looked up before the rule: a client retrying a message it was answered 202
    for gets that message back, even if the address was suppressed since (it is the worker's
    re-check that then stops the send)."""
    template(client, api_headers)
    ann = person("ann@example.com")
    first = send(client, api_headers, "retry-me")
    suppress(db.session, ann.id, "bounced", "550")
    db.session.commit()
    again = send(client, api_headers, "retry-me")
    assert (again.status_code, again.json["id"]) == (202, first.json["id"])
    assert send(client, api_headers, "another").status_code == 422
