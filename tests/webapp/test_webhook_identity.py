"""A provider's delivery event settles only rows sent through the identity whose webhook
received it (broadside.feedback.settle: `Senders`), on SQLite and PostgreSQL.

Two identities on one provider, each with its own webhook secret: an event that names a
message of identity A, proved with identity B's secret at B's webhook, is acknowledged like any
event naming nothing (200 "processed": the answer says nothing about which messages exist,
and a 4xx would have the provider retry it for hours) and settles nothing; the same event at
A's webhook settles the row, so it is the identity that made the difference. SES speaks for
the identities that do not send through Postmark, Resend or Mailgun.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from broadside.core.models import Delivery, TransactionalMessage
from tests.helpers import counters
from tests.webapp.test_provider_webhooks import (
    PROVIDERS,
    READER,
    Mailgun,
    Postmark,
    delivery_row,
    make_identity,
    post,
    snapshot,
    unknown_delivery,
)
from tests.webapp.test_webhooks_ses import CERT_URL, TOPIC, FakeAws, _certificate, notification, signed
from webapp.extensions import db


@pytest.fixture(params=list(PROVIDERS))
def provider(request):
    return PROVIDERS[request.param]()


def two_identities(provider) -> tuple[int, int, object]:
    """Identity A (the provider's secret) and identity B (another account's secret) on one
    provider; returns (A, B, B's provider as the tests sign for it)."""
    other = PROVIDERS[provider.scheme]()
    first = make_identity(provider.scheme, provider.transport, provider.secret, "A")
    second = make_identity(other.scheme, other.transport, other.secret, "B")
    return first, second, other


def test_an_event_for_one_identitys_message_at_anothers_webhook_settles_nothing(
    app, client, provider
):
    first, second, other = two_identities(provider)
    provider_id = provider.provider_id()
    broadcast_id, delivery_id, _ = unknown_delivery(app, provider_id, identity_id=first)
    before = snapshot()

    elsewhere = post(client, other.delivery(second, provider_id, READER))

    assert (elsewhere.status_code, elsewhere.json) == (200, {"status": "processed"})
    assert delivery_row(delivery_id).status == "unknown"
    assert counters(broadcast_id) == {"pending": 1, "unknown": 1}
    assert snapshot() == before

    own = post(client, provider.delivery(first, provider_id, READER))

    assert own.status_code == 200
    assert delivery_row(delivery_id).status == "sent"


def test_our_message_id_names_a_row_only_for_the_identity_it_went_through(app, client):
    """The fallback for a row whose ids were never recorded (our Message-ID names it) obeys
    the same rule."""
    a, b = Mailgun(), Mailgun()
    first = make_identity("mailgun", a.transport, a.secret, "A")
    second = make_identity("mailgun", b.transport, b.secret, "B")
    broadcast_id, delivery_id, _ = unknown_delivery(app, "", identity_id=first)
    db.session.execute(Delivery.__table__.update().where(Delivery.id == delivery_id)
                       .values(provider_message_id=None))
    db.session.commit()
    ours = f"broadside.d{delivery_id}.b{broadcast_id}@example.com"

    assert post(client, b.delivery(second, ours, READER)).status_code == 200
    assert delivery_row(delivery_id).status == "unknown"
    assert post(client, a.delivery(first, ours, READER)).status_code == 200
    assert delivery_row(delivery_id).status == "sent"


def test_a_transactional_message_is_settled_only_by_its_own_identitys_webhook(app, client):
    a, b = Postmark(), Postmark()
    first = make_identity("postmark", a.transport, a.secret, "A")
    second = make_identity("postmark", b.transport, b.secret, "B")
    provider_id = str(uuid.uuid4())
    message = TransactionalMessage(kind="test", to_email=READER, subject="[Test] Hello",
                                   status="unknown", provider_message_id=provider_id,
                                   identity_id=first)
    db.session.add(message)
    db.session.commit()

    assert post(client, b.delivery(second, provider_id, READER)).status_code == 200
    db.session.rollback()
    assert db.session.get_one(TransactionalMessage, message.id).status == "unknown"
    assert post(client, a.delivery(first, provider_id, READER)).status_code == 200
    db.session.rollback()
    assert db.session.get_one(TransactionalMessage, message.id).status == "sent"


def test_an_ses_notification_never_settles_a_row_of_an_identity_with_its_own_webhook(app, client):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.now(UTC)
    app.config["SNS_HTTP_GET"] = FakeAws({CERT_URL: _certificate(key, now - timedelta(days=1),
                                                                 now + timedelta(days=1))})
    app.config["SNS_TOPIC_ARNS"] = TOPIC
    postmark = Postmark()
    postmark_identity = make_identity("postmark", postmark.transport, postmark.secret)
    ses_id = "010701234567890a-1b2c3d4e-0000-0000-0000-000000000001-000000"
    _, delivery_id, _ = unknown_delivery(app, ses_id, identity_id=postmark_identity)
    delivered = {"notificationType": "Delivery",
                 "mail": {"messageId": ses_id, "destination": [READER]},
                 "delivery": {"recipients": [READER], "smtpResponse": "250 OK"}}
    before = snapshot()

    response = client.post("/webhooks/ses", data=json.dumps(signed(notification(delivered), key)),
                           headers={"Content-Type": "text/plain"})

    assert response.status_code == 200
    assert delivery_row(delivery_id).status == "unknown"
    assert snapshot() == before
