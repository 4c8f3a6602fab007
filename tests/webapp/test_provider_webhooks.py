"""POST /webhooks/postmark|resend|mailgun/<identity id>: each provider's own delivery, bounce
and complaint events, proved by its own scheme, on SQLite and PostgreSQL.

Requests are signed here the way each provider documents it, independently of the app's code:
Postmark's HTTP Basic credentials in the webhook URL, Resend's Svix signatures (HMAC-SHA256 of
"<svix-id>.<svix-timestamp>.<body>" keyed with the base64 after `whsec_`), Mailgun's hex
HMAC-SHA256 of timestamp + token in the body. The rows they settle are made the way the worker
leaves them: a broadcast snapshotted, a delivery claimed and moved to `unknown` through the
ledger with the id the provider's API answered.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import select

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import ledger as automation_ledger
from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import ledger
from broadside.campaigns.broadcasts.evidence import delivery_timeline
from broadside.core.models import (
    Automation,
    AutomationMessage,
    Broadcast,
    Delivery,
    Event,
    Identity,
    Subscriber,
    TransactionalMessage,
)
from broadside.delivery.identities import service as identities
from broadside.feedback import provider_payloads
from tests.helpers import counters, make_list, start_broadcast
from tests.webapp.test_unsubscribe import events
from tests.webapp.test_webhooks_ses import CERT_URL, TOPIC, FakeAws, _certificate, notification, signed
from webapp.extensions import db

READER = "reader00000@example.com"
OTHER = "reader00001@example.com"


# ------------------------------------------------------------------ the providers, as documented

@dataclass
class Request:
    path: str
    body: bytes
    headers: dict[str, str]


class Postmark:
    scheme = "postmark"
    transport = "postmark://server-token@"

    def __init__(self) -> None:
        self.secret = secrets.token_urlsafe(24)

    def provider_id(self) -> str:
        return str(uuid.uuid4())

    def request(self, identity_id: int, record: dict, secret: str | None = None,
                user: str = "postmark") -> Request:
        credentials = base64.b64encode(f"{user}:{secret or self.secret}".encode()).decode()
        return Request(f"/webhooks/postmark/{identity_id}", json.dumps(record).encode(),
                       {"Content-Type": "application/json", "Authorization": f"Basic {credentials}"})

    def delivery(self, identity_id, message_id, email, **kw) -> Request:
        return self.request(identity_id, {
            "RecordType": "Delivery", "ServerID": 23, "MessageStream": "broadcast",
            "MessageID": message_id, "Recipient": email, "Tag": "",
            "DeliveredAt": "2026-03-01T10:00:00Z", "Details": "smtp;250 2.0.0 OK", "Metadata": {},
        }, **kw)

    def bounce(self, identity_id, message_id, email, hard=True, kind=None, **kw) -> Request:
        kind = kind or ("HardBounce" if hard else "SoftBounce")
        return self.request(identity_id, {
            "RecordType": "Bounce", "ID": secrets.randbelow(10**9), "Type": kind,
            "TypeCode": 1 if kind == "HardBounce" else 4096, "Name": kind, "Tag": "",
            "MessageID": message_id, "Description": "The server was unable to deliver your message",
            "Details": "smtp;550 5.1.1 The email account does not exist", "Email": email,
            "From": "news@example.com", "BouncedAt": "2026-03-01T10:00:00Z", "Inactive": hard,
            "CanActivate": True, "Subject": "Hello", "MessageStream": "broadcast",
        }, **kw)

    def complaint(self, identity_id, message_id, email, **kw) -> Request:
        return self.request(identity_id, {
            "RecordType": "SpamComplaint", "ID": secrets.randbelow(10**9), "Type": "SpamComplaint",
            "TypeCode": 100001, "MessageID": message_id, "Email": email, "Details": "",
            "BouncedAt": "2026-03-01T10:00:00Z", "MessageStream": "broadcast",
        }, **kw)

    def tampered(self, request: Request) -> Request:
        return Request(request.path, request.body,
                       {**request.headers, "Authorization": "Basic " + base64.b64encode(
                           b"postmark:" + self.secret.encode() + b"x").decode()})


class Resend:
    scheme = "resend"
    transport = "resend://re_test_key@"

    def __init__(self) -> None:
        self.secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

    def provider_id(self) -> str:
        return str(uuid.uuid4())

    @staticmethod
    def sign(secret: str, svix_id: str, timestamp: str, body: bytes) -> str:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        content = svix_id.encode() + b"." + timestamp.encode() + b"." + body
        return base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()

    def request(self, identity_id: int, event: dict, secret: str | None = None,
                timestamp: int | None = None, svix_id: str | None = None) -> Request:
        body = json.dumps(event).encode()
        svix_id = svix_id or f"msg_{uuid.uuid4().hex}"
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signature = self.sign(secret or self.secret, svix_id, stamp, body)
        # A rotated secret's old signature comes first: any listed v1 may match.
        other = self.sign("whsec_" + base64.b64encode(b"old-secret").decode(), svix_id, stamp, body)
        return Request(f"/webhooks/resend/{identity_id}", body, {
            "Content-Type": "application/json", "svix-id": svix_id, "svix-timestamp": stamp,
            "svix-signature": f"v1,{other} v1,{signature}"})

    def _event(self, kind, message_id, email, **data) -> dict:
        return {"type": kind, "created_at": "2026-03-01T10:00:00.000Z", "data": {
            "email_id": message_id, "from": "News <news@example.com>", "to": [email],
            "subject": "Hello", "created_at": "2026-03-01T09:59:59.000Z", **data}}

    def delivery(self, identity_id, message_id, email, **kw) -> Request:
        return self.request(identity_id, self._event("email.delivered", message_id, email), **kw)

    def bounce(self, identity_id, message_id, email, hard=True, **kw) -> Request:
        bounce = {"type": "Permanent" if hard else "Transient",
                  "subType": "General" if hard else "MailboxFull",
                  "message": "The recipient's email provider sent a bounce message."}
        return self.request(identity_id, self._event("email.bounced", message_id, email,
                                                     bounce=bounce), **kw)

    def complaint(self, identity_id, message_id, email, **kw) -> Request:
        return self.request(identity_id, self._event("email.complained", message_id, email), **kw)

    def tampered(self, request: Request) -> Request:
        return Request(request.path, request.body.replace(b"Hello", b"Hullo"), request.headers)


class Mailgun:
    scheme = "mailgun"
    transport = "mailgun://key-test@mg.example.com"

    def __init__(self) -> None:
        self.secret = secrets.token_hex(16)

    def provider_id(self) -> str:
        # What Mailgun's API answers (and the worker may keep): the id in angle brackets. Its
        # webhooks name it without them.
        return f"<{datetime.now(UTC):%Y%m%d%H%M%S}.{uuid.uuid4().hex[:12]}@mg.example.com>"

    def request(self, identity_id: int, event: dict, secret: str | None = None,
                timestamp: int | None = None, token: str | None = None) -> Request:
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        token = token or secrets.token_hex(25)
        digest = hmac.new((secret or self.secret).encode(), (stamp + token).encode(),
                          hashlib.sha256).hexdigest()
        body = {"signature": {"timestamp": stamp, "token": token, "signature": digest},
                "event-data": event}
        return Request(f"/webhooks/mailgun/{identity_id}", json.dumps(body).encode(),
                       {"Content-Type": "application/json"})

    def _event(self, kind, message_id, email, **extra) -> dict:
        return {"event": kind, "id": uuid.uuid4().hex, "timestamp": time.time(),
                "recipient": email, "recipient-domain": email.split("@")[1],
                "message": {"headers": {"message-id": message_id.strip("<>"), "to": email,
                                        "from": "news@example.com", "subject": "Hello"}},
                "envelope": {"targets": email}, **extra}

    def delivery(self, identity_id, message_id, email, **kw) -> Request:
        return self.request(identity_id, self._event("delivered", message_id, email, **{
            "delivery-status": {"code": 250, "message": "OK", "description": ""}}), **kw)

    def bounce(self, identity_id, message_id, email, hard=True, severity=None, reason=None,
               **kw) -> Request:
        return self.request(identity_id, self._event("failed", message_id, email, **{
            "severity": severity or ("permanent" if hard else "temporary"),
            "reason": reason or ("bounce" if hard else "old"),
            "delivery-status": {"code": 550 if hard else 452,
                                "message": "5.1.1 mailbox unavailable" if hard else "mailbox full",
                                "description": ""}}), **kw)

    def complaint(self, identity_id, message_id, email, **kw) -> Request:
        return self.request(identity_id, self._event("complained", message_id, email), **kw)

    def tampered(self, request: Request) -> Request:
        body = json.loads(request.body)
        body["signature"]["token"] += "0"
        return Request(request.path, json.dumps(body).encode(), request.headers)


PROVIDERS = {"postmark": Postmark, "resend": Resend, "mailgun": Mailgun}


@pytest.fixture(params=list(PROVIDERS))
def provider(request):
    return PROVIDERS[request.param]()


def post(client, request: Request):
    return client.post(request.path, data=request.body, headers=request.headers)


# ------------------------------------------------------------------ rows as the worker leaves them

def make_identity(scheme: str, transport: str, secret: str, name: str | None = None) -> int:
    data = identities.parse_input({"name": name or f"{scheme} news", "from": "News <news@example.com>",
                                   "transport": transport, "webhook_secret": secret})
    return identities.create(db.session, data).id


@pytest.fixture
def identity_id(app, provider) -> int:
    return make_identity(provider.scheme, provider.transport, provider.secret)


def unknown_delivery(app, provider_id: str, message_id: str | None = None,
                     identity_id: int | None = None):
    """A two-person broadcast, sent through `identity_id` (None: the default identity), whose
    first delivery the worker handed over (the provider answered `provider_id`) and then lost:
    `unknown`, as orphan repair leaves it."""
    weekly = make_list(db.session, 2)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    db.session.execute(Broadcast.__table__.update().where(Broadcast.__table__.c.id == broadcast.id)
                       .values(identity_id=identity_id))
    delivery_id, subscriber_id = db.session.execute(
        select(Delivery.id, Delivery.subscriber_id).join(Subscriber)
        .where(Delivery.broadcast_id == broadcast.id, Subscriber.email == READER)).one()
    ledger.claim(db.session, broadcast.id, [(delivery_id, subscriber_id)])
    db.session.commit()
    ledger.transition(db.session, broadcast.id, [ledger.Change(delivery_id, subscriber_id, {
        "provider_message_id": provider_id,
        "message_id": message_id or f"<broadside.{uuid.uuid4().hex}@example.com>",
        "error_class": "ambiguous", "reason": "the worker stopped mid-send"},
        detail="worker stopped mid-send")], source="sending", target="unknown")
    db.session.commit()
    return broadcast.id, delivery_id, subscriber_id


def delivery_row(delivery_id: int) -> Delivery:
    db.session.rollback()
    return db.session.get_one(Delivery, delivery_id)


def suppression(email: str) -> tuple[str | None, int]:
    db.session.rollback()
    row = db.session.execute(select(Subscriber.suppression, Subscriber.soft_bounce_count)
                             .where(Subscriber.email == email)).one()
    return row.suppression, row.soft_bounce_count


def snapshot() -> tuple:
    """Everything a webhook could change: rows' states, suppressions, events."""
    db.session.rollback()
    return (
        db.session.execute(select(Delivery.id, Delivery.status, Delivery.sent_at)
                           .order_by(Delivery.id)).all(),
        db.session.execute(select(AutomationMessage.id, AutomationMessage.status)
                           .order_by(AutomationMessage.id)).all(),
        db.session.execute(select(Subscriber.id, Subscriber.suppression, Subscriber.soft_bounce_count)
                           .order_by(Subscriber.id)).all(),
        db.session.scalars(select(Event.id).order_by(Event.id)).all(),
    )


# ------------------------------------------------------------------ delivery events settle `unknown`

def test_a_delivery_event_turns_an_unknown_delivery_sent_with_its_evidence(app, client, provider,
                                                                         identity_id):
    provider_id = provider.provider_id()
    broadcast_id, delivery_id, _ = unknown_delivery(app, provider_id, identity_id=identity_id)
    assert counters(broadcast_id) == {"pending": 1, "unknown": 1}

    response = post(client, provider.delivery(identity_id, provider_id, READER))

    assert (response.status_code, response.json) == (200, {"status": "processed"})
    row = delivery_row(delivery_id)
    assert row.status == "sent" and row.sent_at is not None and row.error_class is None
    assert row.reason.startswith(f"delivered: confirmed by {provider.scheme}'s delivery event")
    assert counters(broadcast_id) == {"pending": 1, "sent": 1}
    timeline = delivery_timeline(db.session, broadcast_id, delivery_id)
    assert [m.kind for m in timeline.moments] == ["claimed", "unknown", "sent"]
    assert timeline.moments[-1].words == "Delivered, as the provider's delivery event confirmed"
    evidence = timeline.moments[-1].detail
    assert evidence.startswith(f"confirmed by {provider.scheme}'s delivery event (")
    assert provider_id.strip("<>") in evidence


def test_a_delivery_event_turns_an_unknown_automation_message_sent(app, client, provider,
                                                                  identity_id, postal_address):
    weekly = make_list(db.session, 0)
    data = automations.parse_input({"name": "Welcome", "trigger": {"type": "joined_list",
                                                                   "list_id": weekly.id},
                                    "steps": [{"delay": "PT0S", "subject": "Welcome",
                                               "body": "Glad you are here."}]})
    automation = automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])
    db.session.execute(Automation.__table__.update().values(identity_id=identity_id))
    automations.enable(db.session, automation.id)
    subscribers.save_subscriber(db.session, email=READER, name="Ada", list_ids=[weekly.id],
                                welcome=True)
    message_id, subscriber_id = db.session.execute(
        select(AutomationMessage.id, AutomationMessage.subscriber_id)).one()
    provider_id = provider.provider_id()
    automation_ledger.claim(db.session, [(message_id, subscriber_id)])
    automation_ledger.transition(db.session, [ledger.Change(message_id, subscriber_id, {
        "provider_message_id": provider_id, "message_id": "<a.1@example.com>"},
        detail="worker stopped mid-send")], source="sending", target="unknown")
    db.session.commit()

    assert post(client, provider.delivery(identity_id, provider_id, READER)).status_code == 200

    db.session.rollback()
    message = db.session.get_one(AutomationMessage, message_id)
    assert message.status == "sent" and message.sent_at is not None
    [sent] = db.session.scalars(select(Event).where(Event.automation_message_id == message_id,
                                                    Event.kind == "sent")).all()
    assert sent.automation_id == automation.id
    assert sent.detail.startswith(f"delivered: confirmed by {provider.scheme}'s delivery event")


def test_a_delivery_event_turns_an_unknown_transactional_message_sent(app, client, provider,
                                                                     identity_id):
    provider_id = provider.provider_id()
    message = TransactionalMessage(kind="test", to_email=READER, subject="[Test] Hello",
                                   status="unknown", message_id="<broadside.t1@example.com>",
                                   provider_message_id=provider_id, identity_id=identity_id)
    db.session.add(message)
    db.session.commit()

    assert post(client, provider.delivery(identity_id, provider_id, READER)).status_code == 200

    db.session.rollback()
    message = db.session.get_one(TransactionalMessage, message.id)
    assert message.status == "sent" and message.sent_at is not None
    assert message.reason.startswith(f"delivered: confirmed by {provider.scheme}'s")


def test_a_delivery_event_leaves_a_row_in_any_other_state_alone(app, client, provider,
                                                              identity_id):
    provider_id = provider.provider_id()
    broadcast_id, delivery_id, subscriber_id = unknown_delivery(app, provider_id,
                                                                identity_id=identity_id)
    # The owner pressed "send again" first: the row is pending again, a new copy to come.
    ledger.transition(db.session, broadcast_id, [ledger.Change(delivery_id, subscriber_id)],
                      source="unknown", target="pending")
    db.session.commit()
    before = snapshot()

    assert post(client, provider.delivery(identity_id, provider_id, READER)).status_code == 200

    assert delivery_row(delivery_id).status == "pending"
    assert counters(broadcast_id) == {"pending": 2}
    assert snapshot() == before


def test_a_delivery_event_for_someone_else_or_an_unknown_id_changes_nothing(app, client, provider,
                                                                          identity_id):
    provider_id = provider.provider_id()
    _, delivery_id, _ = unknown_delivery(app, provider_id, identity_id=identity_id)
    before = snapshot()
    known = post(client, provider.delivery(identity_id, provider_id, OTHER))
    unknown = post(client, provider.delivery(identity_id, provider.provider_id(), READER))
    nobody = post(client, provider.delivery(identity_id, provider_id, "nobody@example.com"))
    for response in (known, unknown, nobody):  # the same answer: nothing to learn
        assert (response.status_code, response.json) == (200, {"status": "processed"})
    assert delivery_row(delivery_id).status == "unknown"
    assert snapshot() == before


def test_our_own_message_id_finds_the_row_when_the_provider_id_was_lost(app, client):
    """Mailgun's webhooks carry the message's Message-ID header: when the worker never got
    the API's answer, our own Message-ID still finds the row."""
    mailgun = Mailgun()
    mailgun_identity = make_identity("mailgun", mailgun.transport, mailgun.secret)
    broadcast_id, delivery_id, _ = unknown_delivery(app, "", identity_id=mailgun_identity)
    db.session.execute(Delivery.__table__.update().where(Delivery.id == delivery_id)
                       .values(provider_message_id=None))
    db.session.commit()
    ours = f"broadside.d{delivery_id}.b{broadcast_id}@example.com"  # not stored: it names the row
    assert post(client, mailgun.delivery(mailgun_identity, ours, READER)).status_code == 200
    assert delivery_row(delivery_id).status == "sent"
    assert counters(broadcast_id) == {"pending": 1, "sent": 1}


def test_a_delivery_event_ends_a_run_of_soft_bounces(app, client, provider, identity_id):
    provider_id = provider.provider_id()
    unknown_delivery(app, provider_id)
    db.session.execute(Subscriber.__table__.update().where(Subscriber.email == READER)
                       .values(soft_bounce_count=2))
    db.session.commit()
    assert post(client, provider.delivery(identity_id, provider_id, READER)).status_code == 200
    assert suppression(READER) == (None, 0)


# ------------------------------------------------------------------ bounces and complaints

def test_a_hard_bounce_suppresses_and_is_linked_to_the_delivery_by_the_providers_id(
        app, client, provider, identity_id):
    provider_id = provider.provider_id()
    broadcast_id, delivery_id, subscriber_id = unknown_delivery(app, provider_id)

    response = post(client, provider.bounce(identity_id, provider_id, READER, hard=True))

    assert (response.status_code, response.json) == (200, {"status": "processed"})
    assert suppression(READER) == ("bounced", 0)
    [bounce] = events("bounce")
    assert (bounce.subscriber_id, bounce.delivery_id, bounce.broadcast_id) == (
        subscriber_id, delivery_id, broadcast_id)
    assert bounce.detail.startswith("hard bounce: ")
    assert bounce.data["source"] == provider.scheme
    assert delivery_row(delivery_id).status == "unknown"  # a bounce settles nothing


def test_a_soft_bounce_counts_without_suppressing(app, client, provider, identity_id):
    provider_id = provider.provider_id()
    unknown_delivery(app, provider_id)
    assert post(client, provider.bounce(identity_id, provider_id, READER, hard=False)).status_code == 200
    assert suppression(READER) == (None, 1)
    assert events("bounce")[0].detail.startswith("soft bounce: ")


def test_a_complaint_suppresses(app, client, provider, identity_id):
    provider_id = provider.provider_id()
    _, delivery_id, _ = unknown_delivery(app, provider_id)
    assert post(client, provider.complaint(identity_id, provider_id, READER)).status_code == 200
    assert suppression(READER) == ("complained", 0)
    [complaint] = events("complaint")
    assert complaint.delivery_id == delivery_id


@pytest.mark.parametrize("kind", ["AutoResponder", "Unsubscribe", "ChallengeVerification"])
def test_postmark_records_that_are_no_failure_to_deliver_are_ignored(client, kind):
    postmark = Postmark()
    identity_id = make_identity("postmark", postmark.transport, postmark.secret)
    make_list(db.session, 1)
    before = snapshot()
    response = post(client, postmark.bounce(identity_id, postmark.provider_id(), READER, kind=kind))
    assert (response.status_code, response.json) == (200, {"status": "ignored"})
    assert snapshot() == before


def test_postmark_bounce_types_map_to_hard_soft_or_complaint():
    def classify(kind):
        record = provider_payloads.parse_postmark(json.dumps({
            "RecordType": "Bounce", "ID": 1, "Type": kind, "MessageID": "m",
            "Email": READER}).encode())
        return [(e.type, e.bounce_type) for e in record.events]
    assert classify("HardBounce") == classify("BadEmailAddress") == [("bounce", "hard")]
    assert classify("ManuallyDeactivated") == [("bounce", "hard")]
    for soft in ("SoftBounce", "Transient", "DnsError", "Blocked", "Unknown", "SomethingNew"):
        assert classify(soft) == [("bounce", "soft")], soft
    assert classify("SpamComplaint") == [("complaint", None)]
    assert classify("AutoResponder") == []


def test_mailgun_retry_notices_are_not_bounces_and_its_final_give_up_is_one_soft_bounce(client):
    mailgun = Mailgun()
    identity_id = make_identity("mailgun", mailgun.transport, mailgun.secret)
    make_list(db.session, 1)
    provider_id = mailgun.provider_id()
    for _ in range(3):  # Mailgun retrying a greylisted address: one event per attempt
        response = post(client, mailgun.bounce(identity_id, provider_id, READER,
                                               severity="temporary", reason="generic"))
        assert (response.status_code, response.json) == (200, {"status": "ignored"})
    assert suppression(READER) == (None, 0)
    assert post(client, mailgun.bounce(identity_id, provider_id, READER, severity="temporary",
                                       reason="old")).status_code == 200
    assert suppression(READER) == (None, 1)
    assert post(client, mailgun.bounce(identity_id, provider_id, READER, severity="permanent",
                                       reason="suppress-bounce")).status_code == 200
    assert suppression(READER) == ("bounced", 1)


def test_other_kinds_of_events_are_acknowledged_and_ignored(app, client, provider, identity_id):
    make_list(db.session, 1)
    body = {"postmark": {"RecordType": "Open", "MessageID": "m", "Recipient": READER},
            "resend": {"type": "email.opened", "data": {"email_id": "m", "to": [READER]}},
            "mailgun": {"event": "opened", "recipient": READER}}[provider.scheme]
    before = snapshot()
    response = post(client, provider.request(identity_id, body))
    assert (response.status_code, response.json) == (200, {"status": "ignored"})
    assert snapshot() == before


# ------------------------------------------------------------------ proof, freshness, replays

def test_a_bad_signature_or_a_wrong_secret_is_refused_and_changes_nothing(app, client, provider,
                                                                        identity_id):
    provider_id = provider.provider_id()
    _, delivery_id, _ = unknown_delivery(app, provider_id)
    before = snapshot()
    good = provider.delivery(identity_id, provider_id, READER)
    attempts = [
        provider.tampered(good),
        provider.delivery(identity_id, provider_id, READER, secret=type(provider)().secret),
        provider.complaint(identity_id, provider_id, READER, secret=type(provider)().secret),
    ]
    if provider.scheme == "postmark":
        attempts.append(Request(good.path, good.body, {"Content-Type": "application/json"}))
        attempts.append(Request(good.path, good.body, {**good.headers, "Authorization": "Basic !!"}))
        attempts.append(Request(good.path, good.body, {
            **good.headers, "Authorization": "Bearer " + provider.secret}))
    elif provider.scheme == "resend":
        attempts.append(Request(good.path, good.body, {**good.headers, "svix-signature": ""}))
        attempts.append(Request(good.path, good.body, {k: v for k, v in good.headers.items()
                                                       if k != "svix-id"}))
        v1 = good.headers["svix-signature"].split()[-1]
        attempts.append(Request(good.path, good.body, {**good.headers, "svix-signature": "v2" + v1[2:]}))
    else:
        body = json.loads(good.body)
        del body["signature"]
        attempts.append(Request(good.path, json.dumps(body).encode(), good.headers))
    for attempt in attempts:
        response = post(client, attempt)
        assert response.status_code == 401, attempt
        assert "error" in response.json
    assert delivery_row(delivery_id).status == "unknown"
    assert snapshot() == before


def test_postmark_answers_a_missing_password_with_a_basic_challenge(client):
    postmark = Postmark()
    identity_id = make_identity("postmark", postmark.transport, postmark.secret)
    response = client.post(f"/webhooks/postmark/{identity_id}", data=b"{}",
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic ")


def test_any_postmark_user_name_goes_with_the_secret(app, client):
    postmark = Postmark()
    identity_id = make_identity("postmark", postmark.transport, postmark.secret)
    make_list(db.session, 1)
    for user in ("postmark", "", "anything"):
        response = post(client, postmark.complaint(identity_id, "m", READER, user=user))
        assert response.status_code == 200, user


@pytest.mark.parametrize("scheme", ["resend", "mailgun"])
def test_a_stale_or_future_timestamp_is_refused_and_changes_nothing(app, client, scheme):
    provider = PROVIDERS[scheme]()
    identity_id = make_identity(scheme, provider.transport, provider.secret)
    provider_id = provider.provider_id()
    _, delivery_id, _ = unknown_delivery(app, provider_id)
    before = snapshot()
    now = int(time.time())
    # 30 s past the 300 s bound either way: a loaded machine may take seconds between this
    # `now` and the server's (301 in the future was once read as 300 and accepted).
    for offset in (-330, 330, -86400):
        response = post(client, provider.bounce(identity_id, provider_id, READER, timestamp=now + offset))
        assert response.status_code == 401, offset
        assert "timestamp" in response.json["error"]
    assert snapshot() == before
    # Within five minutes either way (clocks drift), it counts.
    assert post(client, provider.bounce(identity_id, provider_id, READER,
                                        timestamp=now - 270)).status_code == 200
    assert suppression(READER) == ("bounced", 0)


def test_a_replayed_event_counts_once(app, client, provider, identity_id, redis_client, namespace):
    provider_id = provider.provider_id()
    unknown_delivery(app, provider_id)
    request = provider.bounce(identity_id, provider_id, READER, hard=False)
    answers = [post(client, request) for _ in range(3)]
    assert [(a.status_code, a.json) for a in answers] == [
        (200, {"status": "processed"}), (200, {"status": "duplicate"}),
        (200, {"status": "duplicate"})]
    assert suppression(READER) == (None, 1)
    assert len(events("bounce")) == 1
    keys = list(redis_client.scan_iter(f"{namespace}:{provider.scheme}:seen:identity:{identity_id}:*"))
    assert len(keys) == 1 and 23 * 3600 < redis_client.ttl(keys[0]) <= 24 * 3600


@pytest.mark.parametrize("scheme", ["resend", "mailgun"])
def test_an_event_id_signed_again_is_still_a_duplicate(app, client, scheme):
    """A capture re-signed with a fresh timestamp (or a provider's retry) names the same id."""
    provider = PROVIDERS[scheme]()
    identity_id = make_identity(scheme, provider.transport, provider.secret)
    unknown_delivery(app, provider.provider_id())
    same = {"svix_id": "msg_same"} if scheme == "resend" else {"token": "t" * 50}
    now = int(time.time())
    statuses = [post(client, provider.bounce(identity_id, "m", READER, hard=False,
                                             timestamp=now + offset, **same)).json["status"]
                for offset in (-60, 0)]
    assert statuses == ["processed", "duplicate"]
    assert suppression(READER) == (None, 1)


# ------------------------------------------------------------------ which identity, which body

def test_an_identity_of_another_scheme_or_none_at_all_is_404(app, client, provider, identity_id):
    make_list(db.session, 1)
    others = [cls() for scheme, cls in PROVIDERS.items() if scheme != provider.scheme]
    before = snapshot()
    for other in others:  # this identity's id on another provider's route
        response = post(client, other.complaint(identity_id, "m", READER))
        assert response.status_code == 404 and "error" in response.json
    for missing in (identity_id + 100, 0, 2**31, 2**63):
        response = post(client, provider.complaint(missing, "m", READER))
        assert response.status_code == 404
    smtp = make_identity("smtp", "smtp://user:pw@smtp.example.com:587", provider.secret, "smtp")
    assert post(client, provider.complaint(smtp, "m", READER)).status_code == 404
    db.session.execute(Identity.__table__.update().where(Identity.id == identity_id)
                       .values(status="deleted", name_key=None))
    db.session.commit()
    assert post(client, provider.complaint(identity_id, "m", READER)).status_code == 404
    assert snapshot() == before


def test_an_identity_without_a_webhook_secret_refuses_everything(app, client, provider):
    identity_id = make_identity(provider.scheme, provider.transport, "")
    make_list(db.session, 1)
    before = snapshot()
    for secret in (provider.secret, ""):
        if provider.scheme == "resend" and not secret:
            continue  # Svix cannot sign with an empty key
        response = post(client, provider.complaint(identity_id, "m", READER, secret=secret or "x"))
        assert response.status_code == 401
        assert "webhook secret" in response.json["error"]
    assert snapshot() == before


def test_the_default_identity_takes_its_webhooks_without_an_id(app, client):
    postmark = Postmark()
    app.config["SMTP_URL"] = postmark.transport
    app.config["WEBHOOK_SECRET"] = postmark.secret
    make_list(db.session, 1)
    request = postmark.complaint(0, "m", READER)
    response = client.post("/webhooks/postmark", data=request.body, headers=request.headers)
    assert response.status_code == 200
    assert suppression(READER) == ("complained", 0)
    resend = Resend()
    request = resend.complaint(0, "m", READER)
    assert client.post("/webhooks/resend", data=request.body,
                       headers=request.headers).status_code == 404  # the default is Postmark


MALFORMED = {
    "postmark": [b"not json", b"[]", b"{}", b'{"RecordType": 7}',
                 b'{"RecordType": "Bounce", "MessageID": "m"}',
                 b'{"RecordType": "Bounce", "Email": 42}',
                 b'{"RecordType": "Delivery", "Recipient": "ann@example.com", "MessageID": ["m"]}',
                 b'{"RecordType": "Bounce", "Email": "ann@example.com", "Type": {"x": 1}}'],
    "resend": [b"not json", b"[]", b"{}", b'{"type": "email.bounced"}',
               b'{"type": "email.bounced", "data": {"email_id": "m"}}',
               b'{"type": "email.bounced", "data": {"email_id": "m", "to": [42]}}',
               b'{"type": "email.delivered", "data": {"email_id": 7, "to": ["ann@example.com"]}}',
               b'\xff\xfe'],
    "mailgun": [b"not json", b"[]", b'"x"'],
}
MAILGUN_MALFORMED_EVENTS = [None, [], {}, {"event": 7}, {"event": "failed"},
                            {"event": "delivered", "recipient": ["ann@example.com"]},
                            {"event": "failed", "recipient": "ann@example.com",
                             "message": {"headers": {"message-id": 42}}}]


def test_a_malformed_body_is_400_and_writes_nothing(app, client, provider, identity_id):
    make_list(db.session, 1)
    before = snapshot()
    requests = []
    for raw in MALFORMED[provider.scheme]:
        if provider.scheme == "postmark":
            request = provider.request(identity_id, {})
            requests.append(Request(request.path, raw, request.headers))
        elif provider.scheme == "resend":
            stamp, svix_id = str(int(time.time())), f"msg_{uuid.uuid4().hex}"
            requests.append(Request(f"/webhooks/resend/{identity_id}", raw, {
                "svix-id": svix_id, "svix-timestamp": stamp,
                "svix-signature": "v1," + Resend.sign(provider.secret, svix_id, stamp, raw)}))
        else:
            requests.append(Request(f"/webhooks/mailgun/{identity_id}", raw, {}))
    if provider.scheme == "mailgun":
        requests += [provider.request(identity_id, event) for event in MAILGUN_MALFORMED_EVENTS]
    for request in requests:
        response = post(client, request)
        assert response.status_code == 400, request.body
        assert "error" in response.json
    assert snapshot() == before


def test_a_body_over_the_limit_is_413(client, provider, identity_id):
    request = provider.complaint(identity_id, "m", READER)
    response = client.post(request.path, data=b"{" + b" " * (600 * 1024) + b"}",
                           headers=request.headers)
    assert response.status_code == 413


@pytest.fixture
def redis_down(app_config):
    app_config["REDIS_URL"] = "redis://127.0.0.1:1/0"  # nothing listens there


def test_while_redis_is_down_events_get_503_and_change_nothing(redis_down, app, client, provider,
                                                               identity_id):
    provider_id = provider.provider_id()
    _, delivery_id, _ = unknown_delivery(app, provider_id)
    before = snapshot()
    for request in (provider.delivery(identity_id, provider_id, READER),
                    provider.complaint(identity_id, provider_id, READER)):
        response = post(client, request)
        assert response.status_code == 503 and "retry" in response.json["error"]
    assert snapshot() == before


# ------------------------------------------------------------------ SES gains delivery events

def test_an_ses_delivery_notification_turns_an_unknown_delivery_sent(app, client):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.now(UTC)
    app.config["SNS_HTTP_GET"] = FakeAws({CERT_URL: _certificate(key, now - timedelta(days=1),
                                                                 now + timedelta(days=1))})
    app.config["SNS_TOPIC_ARNS"] = TOPIC
    ses_id = "010701234567890a-1b2c3d4e-0000-0000-0000-000000000000-000000"
    broadcast_id, delivery_id, _ = unknown_delivery(app, ses_id)
    delivered = {"notificationType": "Delivery",
                 "mail": {"messageId": ses_id, "destination": [READER],
                          "commonHeaders": {"messageId": "<not-ours@example.com>"}},
                 "delivery": {"recipients": [READER], "smtpResponse": "250 2.6.0 Message received"}}

    response = client.post("/webhooks/ses", data=json.dumps(signed(notification(delivered), key)),
                           headers={"Content-Type": "text/plain"})

    assert response.status_code == 200
    row = delivery_row(delivery_id)
    assert row.status == "sent"
    assert row.reason == f"delivered: confirmed by ses's delivery event (messageId {ses_id})"
    assert counters(broadcast_id) == {"pending": 1, "sent": 1}
