"""POST /webhooks/events: generic JSON bounces and complaints, signed with WEBHOOK_SECRET."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from sqlalchemy import select

from broadside.models import Delivery, Subscriber
from tests.webapp.test_unsubscribe import add_broadcast, add_list, add_subscriber, events, http
from webapp.extensions import db

SECRET = "whsec-0123456789abcdef"


@pytest.fixture
def app_config(app_config):
    return {**app_config, "WEBHOOK_SECRET": SECRET}


def sign(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_event(client, payload, signature: str | None = "auto", raw: bytes | None = None):
    body = raw if raw is not None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if signature == "auto":
        signature = sign(body)
    if signature is not None:
        headers["X-Broadside-Signature"] = signature
    return client.post("/webhooks/events", data=body, headers=headers)


def suppression_of(subscriber_id: int) -> tuple[str | None, int]:
    db.session.rollback()
    row = db.session.execute(select(Subscriber.suppression, Subscriber.soft_bounce_count)
                             .where(Subscriber.id == subscriber_id)).one()
    return row.suppression, row.soft_bounce_count


def test_signed_hard_bounce_over_real_http_suppresses_and_links_the_delivery(app, live_server):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    broadcast = add_broadcast(weekly)
    delivery = Delivery(broadcast_id=broadcast, subscriber_id=alice, status="sent",
                        message_id="<abc@broadside.test>")
    db.session.add(delivery)
    db.session.commit()
    body = json.dumps({
        "type": "bounce", "email": "alice@example.com", "bounce_type": "hard",
        "message_id": "<abc@broadside.test>", "detail": "550 5.1.1 unknown",
    }).encode()

    status, headers, text = http("POST", live_server.url + "/webhooks/events", body, {
        "Content-Type": "application/json", "X-Broadside-Signature": sign(body)})

    assert status == 202 and json.loads(text) == {"status": "accepted"}
    assert "Set-Cookie" not in headers
    assert suppression_of(alice) == ("bounced", 0)
    [bounce] = events("bounce")
    assert bounce.delivery_id == delivery.id
    assert (bounce.broadcast_id, bounce.list_id) == (broadcast, weekly)
    assert bounce.detail == "hard bounce: 550 5.1.1 unknown"
    assert [e.kind for e in events(subscriber_id=alice)] == ["bounce", "suppressed"]


def test_missing_or_wrong_signatures_get_401_and_change_nothing(app, live_server):
    alice = add_subscriber("alice@example.com")
    body = json.dumps({"type": "complaint", "email": "alice@example.com"}).encode()
    other = json.dumps({"type": "complaint", "email": "bob@example.com"}).encode()
    for signature in (None, "", "not-hex", sign(body, "wrong-secret"), sign(other),
                      sign(body)[:-1], sign(body) + "00", "é" * 64):
        headers = {"Content-Type": "application/json"}
        if signature is not None:
            headers["X-Broadside-Signature"] = signature
        status, _, text = http("POST", live_server.url + "/webhooks/events", body, headers)
        assert status == 401, signature
        assert "error" in json.loads(text)
    assert suppression_of(alice) == (None, 0)
    assert events() == []


def test_a_signature_prefix_and_upper_case_hex_are_accepted(client):
    alice = add_subscriber("alice@example.com")
    body = json.dumps({"type": "complaint", "email": "alice@example.com"}).encode()
    assert post_event(client, None, "sha256=" + sign(body).upper(), raw=body).status_code == 202
    assert suppression_of(alice) == ("complained", 0)


def test_without_a_webhook_secret_every_request_is_refused(app, client):
    app.config["WEBHOOK_SECRET"] = ""
    alice = add_subscriber("alice@example.com")
    body = json.dumps({"type": "complaint", "email": "alice@example.com"}).encode()
    for signature in (sign(body, ""), sign(body)):
        assert post_event(client, None, signature, raw=body).status_code == 401
    assert suppression_of(alice) == (None, 0)


def test_soft_bounces_through_the_webhook_suppress_on_the_third(client):
    alice = add_subscriber("alice@example.com")
    payload = {"type": "bounce", "email": "alice@example.com", "bounce_type": "soft",
               "detail": "452 mailbox full"}
    states = []
    for _ in range(3):
        assert post_event(client, payload).status_code == 202
        states.append(suppression_of(alice))
    assert states == [(None, 1), (None, 2), ("bounced", 3)]


def test_a_bounce_without_bounce_type_counts_as_hard(client):
    alice = add_subscriber("alice@example.com")
    assert post_event(client, {"type": "bounce", "email": "alice@example.com"}).status_code == 202
    assert suppression_of(alice)[0] == "bounced"


def test_an_unknown_address_gets_the_same_answer_and_writes_nothing(client):
    add_subscriber("alice@example.com")
    known = post_event(client, {"type": "complaint", "email": "alice@example.com"})
    unknown = post_event(client, {"type": "complaint", "email": "nobody@example.com"})
    assert (unknown.status_code, unknown.json) == (known.status_code, known.json)
    assert [e.subscriber_id for e in events()] == [1, 1]  # only Alice's complaint + suppression


@pytest.mark.parametrize("raw", [
    b"not json", b"[]", b'"bounce"', b"{}", b"\xff\xfe",
    b'{"type": "open", "email": "alice@example.com"}',
    b'{"type": "bounce"}',
    b'{"type": "bounce", "email": 42}',
    b'{"type": "bounce", "email": "not an address"}',
    b'{"type": "bounce", "email": "alice@example.com", "bounce_type": "medium"}',
    b'{"type": "complaint", "email": "alice@example.com", "bounce_type": "hard"}',
    b'{"type": "bounce", "email": "alice@example.com", "message_id": 7}',
    b'{"type": "bounce", "email": "alice@example.com", "detail": ["x"]}',
])
def test_malformed_payloads_get_400_json_and_write_nothing(client, raw):
    alice = add_subscriber("alice@example.com")
    response = post_event(client, None, raw=raw)
    assert response.status_code == 400
    assert "error" in response.json
    assert suppression_of(alice) == (None, 0)
    assert events() == []


def test_only_post_is_allowed(client):
    response = client.get("/webhooks/events")
    assert response.status_code == 405
    assert "error" in response.json
