"""POST /webhooks/ses: Amazon SES notifications through SNS, with real RSA signatures.

Tests cannot reach AWS, so they make their own RSA key and self-signed certificate, sign real
SNS messages with them (SignatureVersion 1 = SHA1, 2 = SHA256), and serve the certificate
through the app's injectable SNS_HTTP_GET, which also records the SubscribeURL visit. The
canonical string is written out here independently of the app's code, from AWS's docs.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from sqlalchemy import select

from broadside.core.models import Delivery, Subscriber
from broadside.feedback import sns
from broadside.mail.message_refs import delivery_message_id
from tests.webapp.test_unsubscribe import add_broadcast, add_list, add_subscriber, events, http
from webapp.extensions import db

TOPIC = "arn:aws:sns:eu-west-1:123456789012:ses-feedback"
CERT_URL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0000.pem"
SUBSCRIBE_URL = (
    "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription"
    f"&TopicArn={TOPIC}&Token=2336412f37"
)


def _certificate(key: rsa.RSAPrivateKey, not_before: datetime, not_after: datetime) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="session")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def certificate_pem(signing_key) -> bytes:
    now = datetime.now(UTC)
    return _certificate(signing_key, now - timedelta(days=1), now + timedelta(days=30))


class FakeAws:
    """SNS_HTTP_GET for tests: serves certificates by URL and records every GET."""

    def __init__(self, certificates: dict[str, bytes]) -> None:
        self.certificates = certificates
        self.fetched: list[str] = []

    def __call__(self, url: str) -> bytes:
        self.fetched.append(url)
        if url in self.certificates:
            return self.certificates[url]
        if "Action=ConfirmSubscription" in url:
            return b"<ConfirmSubscriptionResponse/>"
        raise OSError(f"no route to {url}")


@pytest.fixture
def aws(certificate_pem) -> FakeAws:
    return FakeAws({CERT_URL: certificate_pem})


@pytest.fixture
def app_config(app_config, aws):
    return {**app_config, "SNS_HTTP_GET": aws, "SNS_TOPIC_ARNS": f"{TOPIC}, arn:aws:sns:x:1:other"}


def canonical(message: dict) -> bytes:
    """Straight from AWS's documentation, kept separate from the app's implementation."""
    if message["Type"] == "Notification":
        keys = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
    else:
        keys = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
    text = ""
    for key in keys:
        if key in message:
            text += key + "\n" + message[key] + "\n"
    return text.encode()


def signed(message: dict, key: rsa.RSAPrivateKey, version: str = "1", cert_url: str = CERT_URL):
    algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
    signature = key.sign(canonical(message), padding.PKCS1v15(), algorithm)
    return {**message, "SignatureVersion": version, "SigningCertURL": cert_url,
            "Signature": base64.b64encode(signature).decode()}


def sns_time(seconds_from_now: float = 0) -> str:
    """A Timestamp as SNS writes it (ISO 8601, UTC, milliseconds), now unless told."""
    moment = datetime.now(UTC) + timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def notification(inner: dict, subject: str | None = None, topic: str = TOPIC,
                 timestamp: str | None = None) -> dict:
    message = {
        "Type": "Notification", "MessageId": str(uuid.uuid4()), "TopicArn": topic,
        "Message": json.dumps(inner), "Timestamp": sns_time() if timestamp is None else timestamp,
        "UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
    }
    if subject is not None:
        message["Subject"] = subject
    return message


def ses_bounce(*addresses: str, bounce_type="Permanent", sub_type="General",
               message_id="<m1@broadside.test>") -> dict:
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": bounce_type, "bounceSubType": sub_type,
            "bouncedRecipients": [{"emailAddress": a, "action": "failed", "status": "5.1.1",
                                   "diagnosticCode": "smtp; 550 5.1.1 user unknown"}
                                  for a in addresses],
            "timestamp": "2026-11-30T10:00:00.000Z", "feedbackId": "0100-feedback",
        },
        "mail": {
            "timestamp": "2026-11-30T09:59:58.000Z", "messageId": "0100-ses-id",
            "source": "news@example.com", "destination": list(addresses),
            "headersTruncated": False,
            "headers": [{"name": "Message-ID", "value": message_id}],
            "commonHeaders": {"messageId": message_id, "subject": "Hello"},
        },
    }


def ses_complaint(address: str) -> dict:
    return {
        "notificationType": "Complaint",
        "complaint": {"complainedRecipients": [{"emailAddress": address}],
                      "complaintFeedbackType": "abuse", "timestamp": "2026-11-30T10:00:00Z",
                      "feedbackId": "0100-complaint"},
        "mail": {"messageId": "0100-ses-id-2", "commonHeaders": {"messageId": "<m9@b.test>"}},
    }


def post(client, message: dict):
    return client.post("/webhooks/ses", data=json.dumps(message),
                       headers={"Content-Type": "text/plain; charset=UTF-8",
                                "x-amz-sns-message-type": message.get("Type", "")})


def state(subscriber_id: int) -> tuple[str | None, int]:
    db.session.rollback()
    row = db.session.execute(select(Subscriber.suppression, Subscriber.soft_bounce_count)
                             .where(Subscriber.id == subscriber_id)).one()
    return row.suppression, row.soft_bounce_count


# ------------------------------------------------------------------ the handshake

def test_subscription_confirmation_is_verified_then_confirmed_over_real_http(
    app, live_server, aws, signing_key
):
    message = signed({
        "Type": "SubscriptionConfirmation", "MessageId": str(uuid.uuid4()), "Token": "2336412f37",
        "TopicArn": TOPIC, "Message": "You have chosen to subscribe to the topic ...",
        "SubscribeURL": SUBSCRIBE_URL, "Timestamp": sns_time(),
    }, signing_key, version="1")

    status, headers, text = http("POST", live_server.url + "/webhooks/ses",
                                 json.dumps(message).encode(), {"Content-Type": "text/plain"})

    assert status == 200 and json.loads(text) == {"status": "subscribed"}
    assert "Set-Cookie" not in headers
    assert aws.fetched == [CERT_URL, SUBSCRIBE_URL]


def test_a_confirmation_whose_subscribe_url_is_not_amazon_is_not_visited(client, aws, signing_key):
    message = signed({
        "Type": "SubscriptionConfirmation", "MessageId": "m-1", "Token": "t", "TopicArn": TOPIC,
        "Message": "m", "SubscribeURL": "https://evil.example/confirm",
        "Timestamp": sns_time(),
    }, signing_key)
    assert post(client, message).status_code == 400
    assert "https://evil.example/confirm" not in aws.fetched


def test_an_unsigned_confirmation_is_refused_without_visiting_anything(client, aws):
    message = {"Type": "SubscriptionConfirmation", "MessageId": "m-2", "Token": "t",
               "TopicArn": TOPIC, "Message": "m", "SubscribeURL": SUBSCRIBE_URL,
               "Timestamp": sns_time()}
    assert post(client, message).status_code == 401
    assert aws.fetched == []


# ------------------------------------------------------------------ notifications

@pytest.mark.parametrize("version", ["1", "2"])
def test_signed_bounce_notification_over_real_http_suppresses_and_links(
    app, live_server, signing_key, version
):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    bob = add_subscriber("bob@example.com", {weekly: "active"})
    broadcast = add_broadcast(weekly)
    delivery = Delivery(broadcast_id=broadcast, subscriber_id=alice, status="sent")
    db.session.add(delivery)
    db.session.commit()
    # Our Message-ID names the row (it is not stored: broadside.mail.message_refs).
    ours = delivery_message_id(delivery.id, broadcast, "news@broadside.test")
    message = signed(notification(ses_bounce("alice@example.com", "Bob@Example.com",
                                             message_id=ours)),
                     signing_key, version)

    status, _, text = http("POST", live_server.url + "/webhooks/ses",
                           json.dumps(message).encode(), {"Content-Type": "text/plain"})

    assert status == 200 and json.loads(text) == {"status": "processed"}
    assert state(alice)[0] == state(bob)[0] == "bounced"
    alice_bounce = events("bounce", alice)[0]
    assert alice_bounce.delivery_id == delivery.id and alice_bounce.broadcast_id == broadcast
    assert "Permanent/General" in alice_bounce.detail and "550 5.1.1" in alice_bounce.detail
    assert alice_bounce.data["source"] == "ses"
    assert events("bounce", bob)[0].delivery_id is None  # Alice's Message-ID is not Bob's


def test_a_notification_with_a_subject_is_verified_with_it(client, signing_key):
    alice = add_subscriber("alice@example.com")
    message = signed(notification(ses_complaint("alice@example.com"), subject="Complaint"),
                     signing_key, "2")
    assert post(client, message).status_code == 200
    assert state(alice)[0] == "complained"
    tampered = signed(notification(ses_complaint("alice@example.com"), subject="A"), signing_key)
    tampered["Subject"] = "B"
    assert post(client, tampered).status_code == 401


def test_transient_bounces_count_and_a_delivery_resets_them(client, signing_key):
    alice = add_subscriber("alice@example.com")
    transient = ses_bounce("alice@example.com", bounce_type="Transient", sub_type="MailboxFull")
    for _ in range(2):
        assert post(client, signed(notification(transient), signing_key)).status_code == 200
    assert state(alice) == (None, 2)
    delivered = {"notificationType": "Delivery", "mail": {"messageId": "x"},
                 "delivery": {"recipients": ["alice@example.com"], "smtpResponse": "250 ok"}}
    assert post(client, signed(notification(delivered), signing_key)).status_code == 200
    assert state(alice) == (None, 0)
    for _ in range(3):
        post(client, signed(notification(transient), signing_key))
    assert state(alice) == ("bounced", 3)


def test_sns_redelivering_the_same_message_counts_it_once(client, signing_key):
    alice = add_subscriber("alice@example.com")
    message = signed(notification(ses_bounce("alice@example.com", bounce_type="Transient")),
                     signing_key)
    answers = [post(client, message).json["status"] for _ in range(3)]
    assert answers == ["processed", "duplicate", "duplicate"]
    assert state(alice) == (None, 1)
    assert len(events("bounce")) == 1


def test_wrongly_signed_notifications_get_401_and_change_nothing(client, aws, signing_key):
    alice = add_subscriber("alice@example.com")
    good = signed(notification(ses_complaint("alice@example.com")), signing_key)
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    cases = {
        "tampered message": {**good, "Message": json.dumps(ses_complaint("bob@example.com"))},
        "tampered timestamp": {**good, "Timestamp": sns_time(-60)},
        "other key": signed(notification(ses_complaint("alice@example.com")), other_key),
        "garbage signature": {**good, "Signature": "!!!not base64!!!"},
        "no signature": {k: v for k, v in good.items() if k != "Signature"},
        "unknown version": {**good, "SignatureVersion": "3"},
        "http certificate": {**good, "SigningCertURL": CERT_URL.replace("https", "http")},
        "foreign host": {**good, "SigningCertURL": "https://sns.eu-west-1.evil.example/c.pem"},
        "lookalike host": {**good, "SigningCertURL": "https://sns.eu-west-1.amazonaws.com.evil.example/c.pem"},
        "credentials in URL": {**good, "SigningCertURL": "https://x@sns.eu-west-1.amazonaws.com/c.pem"},
        "odd port": {**good, "SigningCertURL": "https://sns.eu-west-1.amazonaws.com:8443/c.pem"},
    }
    for name, message in cases.items():
        response = post(client, message)
        assert response.status_code == 401, name
        assert "error" in response.json
    assert all(url == CERT_URL for url in aws.fetched)  # nothing else was ever fetched
    assert state(alice) == (None, 0)
    assert events() == []


def test_topics_not_listed_in_sns_topic_arns_are_refused_before_any_fetch(app, client, aws,
                                                                          signing_key):
    alice = add_subscriber("alice@example.com")
    foreign = signed(notification(ses_complaint("alice@example.com"),
                                  topic="arn:aws:sns:eu-west-1:666:attacker"), signing_key)
    assert post(client, foreign).status_code == 403
    app.config["SNS_TOPIC_ARNS"] = ""
    ours = signed(notification(ses_complaint("alice@example.com")), signing_key)
    assert post(client, ours).status_code == 403
    assert aws.fetched == []
    assert state(alice) == (None, 0)


def test_the_certificate_is_fetched_once_and_cached(client, aws, signing_key):
    add_subscriber("alice@example.com")
    for _ in range(3):
        message = signed(notification(ses_complaint("alice@example.com")), signing_key)
        assert post(client, message).status_code == 200
    assert aws.fetched == [CERT_URL]


def test_an_unreachable_certificate_is_503_so_sns_retries(client, aws, signing_key):
    alice = add_subscriber("alice@example.com")
    missing = CERT_URL.replace("0000", "1111")
    message = signed(notification(ses_complaint("alice@example.com")), signing_key,
                     cert_url=missing)
    assert post(client, message).status_code == 503
    assert state(alice) == (None, 0)


def test_an_expired_certificate_is_refused(client, aws, signing_key):
    alice = add_subscriber("alice@example.com")
    old_url = CERT_URL.replace("0000", "2016")
    now = datetime.now(UTC)
    aws.certificates[old_url] = _certificate(signing_key, now - timedelta(days=400),
                                             now - timedelta(days=35))
    message = signed(notification(ses_complaint("alice@example.com")), signing_key,
                     cert_url=old_url)
    assert post(client, message).status_code == 401
    assert state(alice) == (None, 0)


@pytest.mark.parametrize("body", [
    b"not json", b"[]", b'{"Type": "Shout"}',
    b'{"Type": "Notification", "MessageId": "x"}',
])
def test_malformed_sns_bodies_get_400_json(client, body):
    response = client.post("/webhooks/ses", data=body, content_type="text/plain")
    assert response.status_code == 400 and "error" in response.json


def test_a_signed_message_that_is_not_an_ses_notification_gets_400(client, signing_key):
    message = signed({**notification({}), "Message": "plain text, not SES"}, signing_key)
    assert post(client, message).status_code == 400
    assert events() == []


def test_other_ses_event_types_are_accepted_and_ignored(client, signing_key):
    add_subscriber("alice@example.com")
    message = signed(notification({"eventType": "Open", "mail": {}, "open": {}}), signing_key)
    assert post(client, message).status_code == 200
    assert events() == []


def test_canonical_string_matches_the_documented_layout():
    message = {"Type": "Notification", "MessageId": "id", "TopicArn": "arn", "Message": "hi",
               "Timestamp": "t", "Subject": "s", "UnsubscribeURL": "u", "SignatureVersion": "1"}
    assert sns.canonical_string(message) == (
        b"Message\nhi\nMessageId\nid\nSubject\ns\nTimestamp\nt\nTopicArn\narn\nType\nNotification\n"
    )


# ------------------------------------------------------------------ replays

def test_a_signed_notification_older_than_an_hour_is_refused_and_changes_nothing(
    client, signing_key
):
    """SNS stops retrying an HTTP/S endpoint after 3,600 s: anything older is a replay."""
    alice = add_subscriber("alice@example.com")
    transient = ses_bounce("alice@example.com", bounce_type="Transient")
    for age in (66 * 60, 2 * 3600, 30 * 24 * 3600):
        message = signed(notification(transient, timestamp=sns_time(-age)), signing_key, "2")
        response = post(client, message)
        assert response.status_code == 401, age
        assert "old" in response.json["error"]
    assert state(alice) == (None, 0)
    assert events() == []
    # SNS's own retries (up to an hour late, give or take a clock) still count.
    for age in (0, 30 * 60, 64 * 60):
        message = signed(notification(transient, timestamp=sns_time(-age)), signing_key, "2")
        assert post(client, message).status_code == 200, age
    assert state(alice) == ("bounced", 3)


def test_a_notification_dated_in_the_future_is_refused(client, signing_key):
    alice = add_subscriber("alice@example.com")
    for ahead in (6 * 60, 24 * 3600):
        message = signed(notification(ses_complaint("alice@example.com"),
                                      timestamp=sns_time(ahead)), signing_key)
        response = post(client, message)
        assert response.status_code == 401 and "future" in response.json["error"]
    assert state(alice) == (None, 0)
    message = signed(notification(ses_complaint("alice@example.com"), timestamp=sns_time(120)),
                     signing_key)
    assert post(client, message).status_code == 200  # a clock a little behind SNS's is fine
    assert state(alice)[0] == "complained"


@pytest.mark.parametrize("timestamp", ["yesterday", "", "2026-11-30T10:00:00", "1764523200"])
def test_a_signed_notification_with_an_unusable_timestamp_is_refused(client, signing_key,
                                                                     timestamp):
    alice = add_subscriber("alice@example.com")
    message = signed(notification(ses_complaint("alice@example.com"), timestamp=timestamp),
                     signing_key)
    response = post(client, message)
    assert response.status_code == 401 and "Timestamp" in response.json["error"]
    assert state(alice) == (None, 0)


def test_an_old_subscription_confirmation_is_refused_without_visiting_subscribe_url(
    client, aws, signing_key
):
    message = signed({
        "Type": "SubscriptionConfirmation", "MessageId": str(uuid.uuid4()), "Token": "t",
        "TopicArn": TOPIC, "Message": "m", "SubscribeURL": SUBSCRIBE_URL,
        "Timestamp": sns_time(-2 * 3600),
    }, signing_key)
    assert post(client, message).status_code == 401
    assert SUBSCRIBE_URL not in aws.fetched


def test_a_message_id_re_signed_and_delivered_again_counts_once(client, signing_key):
    """The MessageId decides, not the bytes: a redelivery signed anew is still a repeat."""
    alice = add_subscriber("alice@example.com")
    first = notification(ses_bounce("alice@example.com", bounce_type="Transient"))
    again = {**first, "Timestamp": sns_time(-1)}
    answers = [post(client, signed(first, signing_key, "1")).json["status"],
               post(client, signed(again, signing_key, "2")).json["status"]]
    assert answers == ["processed", "duplicate"]
    assert state(alice) == (None, 1)


def test_seen_message_ids_live_in_redis_in_this_installations_namespace_for_a_day(
    client, signing_key, redis_client, namespace
):
    add_subscriber("alice@example.com")
    message = signed(notification(ses_complaint("alice@example.com")), signing_key)
    assert post(client, message).status_code == 200
    ttl = redis_client.ttl(f"{namespace}:sns:seen:{message['MessageId']}")
    assert 23 * 3600 < ttl <= 24 * 3600


@pytest.fixture
def redis_down(app_config):
    app_config["REDIS_URL"] = "redis://127.0.0.1:1/0"  # nothing listens there


def test_while_redis_is_down_notifications_get_503_so_sns_retries(redis_down, client,
                                                                  signing_key):
    alice = add_subscriber("alice@example.com")
    message = signed(notification(ses_complaint("alice@example.com")), signing_key)
    response = post(client, message)
    assert response.status_code == 503 and "retry" in response.json["error"]
    assert state(alice) == (None, 0)
    assert events() == []
