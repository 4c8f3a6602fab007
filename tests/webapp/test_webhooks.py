"""POST /webhooks/events: generic JSON bounces and complaints, signed with WEBHOOK_SECRET.

The signature covers `"<X-Broadside-Timestamp>.<raw body>"`, the timestamp must be within five
minutes of now, and each event's `id` counts once: a captured request cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
from sqlalchemy import select

from broadside.core.models import Delivery, Subscriber
from broadside.mail.message_refs import delivery_message_id
from tests.helpers import webhook_body, webhook_headers
from tests.webapp.test_unsubscribe import add_broadcast, add_list, add_subscriber, events, http
from webapp.extensions import db

SECRET = "whsec-0123456789abcdef"


@pytest.fixture
def app_config(app_config):
    return {**app_config, "WEBHOOK_SECRET": SECRET}


def sign(body: bytes, secret: str = SECRET, timestamp: int | str | None = None) -> str:
    """The hex signature of "<timestamp>.<body>" (now unless a timestamp is given)."""
    return webhook_headers(body, secret, timestamp)["X-Broadside-Signature"].removeprefix("sha256=")


def sign_body_only(body: bytes, secret: str = SECRET) -> str:
    """What the webhook used to accept: the body alone signed, replayable for ever."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_event(client, payload, signature: str | None = "auto", raw: bytes | None = None,
               timestamp: int | str | None = None):
    """POST `payload` (given a fresh `id` unless it has one) or the `raw` body, signed with a
    timestamp of now (or `timestamp`) unless another `signature` is given (None: no header)."""
    body = raw if raw is not None else webhook_body(**payload)
    headers = webhook_headers(body, SECRET, timestamp)
    if signature is None:
        del headers["X-Broadside-Signature"]
    elif signature != "auto":
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
    delivery = Delivery(broadcast_id=broadcast, subscriber_id=alice, status="sent")
    db.session.add(delivery)
    db.session.commit()
    body = json.dumps({
        "id": "evt-0001", "type": "bounce", "email": "alice@example.com", "bounce_type": "hard",
        "message_id": delivery_message_id(delivery.id, broadcast, "news@broadside.test"),
        "detail": "550 5.1.1 unknown",
    }).encode()

    status, headers, text = http("POST", live_server.url + "/webhooks/events", body,
                                 webhook_headers(body, SECRET))

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
    body = webhook_body(type="complaint", email="alice@example.com")
    other = webhook_body(type="complaint", email="bob@example.com")
    for signature in (None, "", "not-hex", sign(body, "wrong-secret"), sign(other),
                      sign(body)[:-1], sign(body) + "00", "é" * 64):
        headers = webhook_headers(body, SECRET)
        del headers["X-Broadside-Signature"]
        if signature is not None:
            headers["X-Broadside-Signature"] = signature
        status, _, text = http("POST", live_server.url + "/webhooks/events", body, headers)
        assert status == 401, signature
        assert "error" in json.loads(text)
    assert suppression_of(alice) == (None, 0)
    assert events() == []


def test_a_signature_prefix_and_upper_case_hex_are_accepted(client):
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="complaint", email="alice@example.com")
    now = int(time.time())
    assert post_event(client, None, "sha256=" + sign(body, timestamp=now).upper(), raw=body,
                      timestamp=now).status_code == 202
    assert suppression_of(alice) == ("complained", 0)


def test_without_a_webhook_secret_every_request_is_refused(app, client):
    app.config["WEBHOOK_SECRET"] = ""
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="complaint", email="alice@example.com")
    now = int(time.time())
    for signature in (sign(body, "", now), sign(body, SECRET, now)):
        response = post_event(client, None, signature, raw=body, timestamp=now)
        assert response.status_code == 401 and "WEBHOOK_SECRET" in response.json["error"]
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
    b'{"id": "e1", "type": "open", "email": "alice@example.com"}',
    b'{"id": "e1", "type": "bounce"}',
    b'{"id": "e1", "type": "bounce", "email": 42}',
    b'{"id": "e1", "type": "bounce", "email": "not an address"}',
    b'{"id": "e1", "type": "bounce", "email": "alice@example.com", "bounce_type": "medium"}',
    b'{"id": "e1", "type": "complaint", "email": "alice@example.com", "bounce_type": "hard"}',
    b'{"id": "e1", "type": "bounce", "email": "alice@example.com", "message_id": 7}',
    b'{"id": "e1", "type": "bounce", "email": "alice@example.com", "detail": ["x"]}',
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


# ------------------------------------------------------------------ replays

def test_the_same_signed_soft_bounce_delivered_three_times_counts_once(client):
    """A captured request posted again within the five minutes: acknowledged, nothing more."""
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="bounce", email="alice@example.com", bounce_type="soft",
                        detail="452 mailbox full")
    headers = webhook_headers(body, SECRET)
    answers = [client.post("/webhooks/events", data=body, headers=headers) for _ in range(3)]
    assert [(a.status_code, a.json) for a in answers] == [
        (202, {"status": "accepted"}), (200, {"status": "duplicate"}),
        (200, {"status": "duplicate"})]
    assert suppression_of(alice) == (None, 1)
    assert len(events("bounce")) == 1


def test_an_event_id_signed_again_with_a_new_timestamp_still_counts_once(client):
    """A provider retrying (or anyone re-signing) an event it already sent: the id decides."""
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="bounce", email="alice@example.com", bounce_type="soft")
    now = int(time.time())
    statuses = [client.post("/webhooks/events", data=body,
                            headers=webhook_headers(body, SECRET, now + offset)).status_code
                for offset in (-60, 0, 60)]
    assert statuses == [202, 200, 200]
    assert suppression_of(alice) == (None, 1)


def test_a_replay_of_an_old_capture_is_refused_and_changes_nothing(client):
    alice = add_subscriber("alice@example.com")
    for offset in (-600, -303, 303, 600, -10**9, 10**9):
        body = webhook_body(type="bounce", email="alice@example.com", bounce_type="soft")
        # The clock is read for each request (a loaded machine may take a second between two).
        response = client.post("/webhooks/events", data=body,
                               headers=webhook_headers(body, SECRET, int(time.time()) + offset))
        assert response.status_code == 401, offset
        assert "X-Broadside-Timestamp" in response.json["error"]
    assert suppression_of(alice) == (None, 0)
    assert events() == []
    # Within the five minutes either way (a sender's clock may be off), events count.
    for offset in (-290, 290):
        body = webhook_body(type="bounce", email="alice@example.com", bounce_type="soft")
        assert client.post("/webhooks/events", data=body, headers=webhook_headers(
            body, SECRET, int(time.time()) + offset)).status_code == 202
    assert suppression_of(alice) == (None, 2)


@pytest.mark.parametrize("timestamp", [
    None, "", "soon", "1.5e9", "-1", "+1764523200", "1764523200.0", "1764523200 1",
    "١٧٦٤٥٢٣٢٠٠", "9" * 40,
])
def test_a_missing_or_malformed_timestamp_is_refused_even_with_a_body_signature(
    client, timestamp
):
    """The old scheme (the body alone signed) no longer passes, with or without a timestamp."""
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="complaint", email="alice@example.com")
    headers = {"Content-Type": "application/json", "X-Broadside-Signature": sign_body_only(body)}
    if timestamp is not None:
        headers["X-Broadside-Timestamp"] = timestamp
    response = client.post("/webhooks/events", data=body, headers=headers)
    assert response.status_code == 401
    assert "X-Broadside-Timestamp" in response.json["error"]
    assert suppression_of(alice) == (None, 0)


def test_a_signature_over_the_body_alone_is_refused_with_a_clear_error(client):
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="complaint", email="alice@example.com")
    for signature in (sign_body_only(body), "sha256=" + sign_body_only(body)):
        headers = {**webhook_headers(body, SECRET), "X-Broadside-Signature": signature}
        response = client.post("/webhooks/events", data=body, headers=headers)
        assert response.status_code == 401
        assert "body alone" in response.json["error"]
    assert suppression_of(alice) == (None, 0)
    assert events() == []


def test_the_timestamp_is_part_of_what_is_signed(client):
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="complaint", email="alice@example.com")
    now = int(time.time())
    headers = {**webhook_headers(body, SECRET, now), "X-Broadside-Timestamp": str(now + 1)}
    response = client.post("/webhooks/events", data=body, headers=headers)
    assert response.status_code == 401 and "X-Broadside-Signature" in response.json["error"]
    assert suppression_of(alice) == (None, 0)
    headers["X-Broadside-Timestamp"] = str(now)  # the timestamp that was signed
    assert client.post("/webhooks/events", data=body, headers=headers).status_code == 202
    assert suppression_of(alice) == ("complained", 0)


@pytest.mark.parametrize("event_id", [None, "", "   ", 42, ["e1"], "x" * 201, "a\nb", "\ud800"])
def test_an_event_without_a_usable_id_gets_400_and_writes_nothing(client, event_id):
    alice = add_subscriber("alice@example.com")
    fields = {"type": "complaint", "email": "alice@example.com"}
    if event_id is not None:
        fields["id"] = event_id
    body = json.dumps(fields).encode()
    response = client.post("/webhooks/events", data=body, headers=webhook_headers(body, SECRET))
    assert response.status_code == 400
    assert "'id'" in response.json["error"]
    assert suppression_of(alice) == (None, 0)
    assert events() == []


def test_a_refused_payload_does_not_use_up_its_id(client):
    """Ids are claimed only for events that are applied: a fixed resend still counts."""
    alice = add_subscriber("alice@example.com")
    bad = json.dumps({"id": "evt-7", "type": "bounce", "email": "alice@example.com",
                      "bounce_type": "medium"}).encode()
    assert client.post("/webhooks/events", data=bad,
                       headers=webhook_headers(bad, SECRET)).status_code == 400
    good = webhook_body(id="evt-7", type="bounce", email="alice@example.com", bounce_type="soft")
    assert client.post("/webhooks/events", data=good,
                       headers=webhook_headers(good, SECRET)).status_code == 202
    assert suppression_of(alice) == (None, 1)


def test_seen_ids_live_in_redis_in_this_installations_namespace_for_a_day(
    client, redis_client, namespace
):
    add_subscriber("alice@example.com")
    body = webhook_body(id="evt-ttl", type="complaint", email="alice@example.com")
    assert client.post("/webhooks/events", data=body,
                       headers=webhook_headers(body, SECRET)).status_code == 202
    ttl = redis_client.ttl(f"{namespace}:webhooks:seen:evt-ttl")
    assert 23 * 3600 < ttl <= 24 * 3600


@pytest.fixture
def redis_down(app_config):
    app_config["REDIS_URL"] = "redis://127.0.0.1:1/0"  # nothing listens there


def test_while_redis_is_down_events_get_503_so_the_provider_retries(redis_down, client):
    """Without the seen ids a replay cannot be told from a first delivery: apply nothing."""
    alice = add_subscriber("alice@example.com")
    body = webhook_body(type="complaint", email="alice@example.com")
    response = client.post("/webhooks/events", data=body, headers=webhook_headers(body, SECRET))
    assert response.status_code == 503 and "retry" in response.json["error"]
    assert suppression_of(alice) == (None, 0)
    assert events() == []
