"""Outgoing webhooks: recorded with the change, signed, retried, delivered once per event id,
disabled after a window of failures, never sent to private addresses unless allowed.

Receivers are real HTTP servers on loopback (tests/webhook_receiver.py), so the app here
runs with WEBHOOKS_ALLOW_PRIVATE=1; the refusals are checked with it off. SQLite only: no SQL
here differs between the engines.
"""

from __future__ import annotations

import re
import ssl
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from sqlalchemy import event, func, select

from broadside.audience.subscribers.service import erase, save_subscriber
from broadside.audience.unsubscribe.service import leave_list
from broadside.audience.unsubscribe.suppression import suppress
from broadside.core.errors import ValidationError
from broadside.core.models import Subscriber, WebhookEndpoint, WebhookMessage
from broadside.core.timeutil import utcnow
from broadside.webhooks import endpoints, ledger
from broadside.webhooks import posting as delivery
from tests.helpers import make_list, start_broadcast
from tests.webhook_receiver import Receiver
from webapp.extensions import db

README = Path(__file__).resolve().parents[2] / "README.md"
ALLOW = delivery.Settings(allow_private=True, base_seconds=30)


@pytest.fixture(params=["sqlite"])
def backend(request):
    return request.param


@pytest.fixture
def app_config(app_config):
    app_config["WEBHOOKS_ALLOW_PRIVATE"] = "1"
    return app_config


@pytest.fixture
def receiver():
    with Receiver() as server:
        yield server


def readme_verify():
    """The README's verification snippet, run as written."""
    text = README.read_text()
    section = text[text.index("## Outgoing webhooks"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(snippet, namespace)
    return namespace["verify"]


def outbox_rows(**where) -> list[WebhookMessage]:
    db.session.expire_all()
    query = select(WebhookMessage).order_by(WebhookMessage.id)
    for key, value in where.items():
        query = query.where(getattr(WebhookMessage, key) == value)
    return list(db.session.scalars(query))


def add_endpoint(url: str, *events: str) -> WebhookEndpoint:
    return endpoints.create(db.session, url, list(events), allow_private=True)


def test_an_event_is_signed_and_verifies_with_the_readme_snippet(app, receiver):
    endpoint = add_endpoint(receiver.url, "subscriber.created")
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="ann@example.com", name="Ann", list_ids=[weekly.id])

    outcome = delivery.deliver_due(db.session, ALLOW)

    assert outcome.delivered == 1 and len(receiver.requests) == 1
    request = receiver.requests[0]
    verify = readme_verify()
    assert verify(endpoint.secret, request.header("Broadside-Signature"), request.body)
    assert not verify(endpoint.secret, request.header("Broadside-Signature"), request.body + b" ")
    assert not verify("whsec_other", request.header("Broadside-Signature"), request.body)
    stale = f"t={int(time.time()) - 600}," + request.header("Broadside-Signature").split(",")[1]
    assert not verify(endpoint.secret, stale, request.body)
    body = request.json()
    assert body["type"] == "subscriber.created" and body["id"].startswith("evt_")
    assert body["id"] == request.header("Broadside-Event-Id")
    assert body["data"]["subscriber"]["email"] == "ann@example.com"
    assert body["data"]["list_id"] == weekly.id and body["data"]["status"] == "active"
    assert request.header("Content-Type") == "application/json"
    assert request.header("Host") == f"127.0.0.1:{receiver.port}"
    [row] = outbox_rows()
    assert (row.status, row.response_code, row.attempts) == ("delivered", 200, 1)


def test_a_500_is_retried_with_backoff_and_each_event_id_delivered_once(app, receiver):
    add_endpoint(receiver.url, "subscriber.unsubscribed", "subscriber.suppressed")
    weekly = make_list(db.session, 1)
    person = db.session.scalar(select(Subscriber.id))
    leave_list(db.session, person, weekly.id, "owner")
    db.session.commit()
    receiver.fail(1, 500)
    t0 = utcnow()

    first = delivery.deliver_due(db.session, ALLOW, now=t0)
    [row] = outbox_rows()
    assert first.statuses == ["pending"] and row.response_code == 500 and row.attempts == 1
    assert "HTTP 500: receiver is unhappy" in row.last_error
    assert timedelta(seconds=30) <= row.next_attempt_at - t0 <= timedelta(seconds=37)
    # Not due yet: a job now sends nothing.
    assert delivery.deliver_due(db.session, ALLOW, now=t0 + timedelta(seconds=5)).delivered == 0

    later = t0 + timedelta(seconds=40)
    assert delivery.deliver_due(db.session, ALLOW, now=later).delivered == 1
    assert delivery.deliver_due(db.session, ALLOW, now=later).delivered == 0  # a duplicate job
    [row] = outbox_rows()
    assert (row.status, row.response_code, row.attempts) == ("delivered", 200, 2)
    ids = [r.header("Broadside-Event-Id") for r in receiver.requests]
    assert len(ids) == 2 and ids[0] == ids[1]  # the same event, retried under its stable id
    assert [r.answered for r in receiver.requests] == [500, 200]

    # A second event gets its own id; a worker that died mid-POST leaves it `sending`, and it
    # is sent again (at least once) under the same id.
    suppress(db.session, person, "blocked", "test")
    claimed = ledger.claim(db.session, utcnow(), 10)
    db.session.commit()
    assert ledger.release_stale(db.session, utcnow() + ledger.STALE_CLAIM + timedelta(seconds=1),
                                window=ALLOW.window, base_seconds=ALLOW.base_seconds) == 1
    db.session.commit()
    assert delivery.deliver_due(db.session, ALLOW, now=utcnow() + timedelta(minutes=10)).delivered == 1
    [suppressed] = outbox_rows(event_type="subscriber.suppressed")
    assert suppressed.id == claimed[0] and suppressed.status == "delivered"
    assert receiver.requests[-1].json()["data"]["kind"] == "blocked"
    assert len({r.header("Broadside-Event-Id") for r in receiver.requests}) == 2


def test_an_endpoint_down_for_the_whole_window_is_disabled_with_a_notice(
        app, logged_in_client, receiver):
    endpoint = add_endpoint(receiver.url, "subscriber.created")
    receiver.stop()  # nothing listens on its port any more
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="bob@example.com", list_ids=[weekly.id])
    window = timedelta(minutes=2)
    settings = delivery.Settings(allow_private=True, window=window, base_seconds=30, timeout=2)
    t0 = utcnow()

    assert delivery.deliver_due(db.session, settings, now=t0).statuses == ["pending"]
    [row] = outbox_rows()
    assert row.response_code is None and "No answer from 127.0.0.1" in row.last_error
    assert row.next_attempt_at <= row.created_at + window  # never scheduled past the window
    db.session.refresh(endpoint)
    assert endpoint.status == "enabled" and endpoint.failing_since == t0

    end = t0 + window + timedelta(seconds=1)
    assert delivery.deliver_due(db.session, settings, now=end).statuses == ["failed"]
    db.session.refresh(endpoint)
    assert endpoint.status == "disabled"
    assert "every delivery failed" in endpoint.disabled_reason
    assert outbox_rows()[0].status == "failed"

    # A disabled endpoint gets no new events, and says why on the pages.
    save_subscriber(db.session, email="cy@example.com", list_ids=[weekly.id])
    assert len(outbox_rows()) == 1
    page = logged_in_client.get("/settings/webhooks").get_data(as_text=True)
    assert f'id="disabled-{endpoint.id}"' in page and "every delivery failed" in page
    page = logged_in_client.get(f"/settings/webhooks/{endpoint.id}").get_data(as_text=True)
    assert 'id="disabled-notice"' in page
    dashboard = logged_in_client.get("/").get_data(as_text=True)
    assert "webhook-disabled-banner" in dashboard and "1 webhook endpoint disabled" in dashboard

    # The owner enables it again: events flow once more.
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    logged_in_client.post(f"/settings/webhooks/{endpoint.id}/enable", data={"csrf_token": token})
    db.session.refresh(endpoint)
    assert endpoint.status == "enabled" and endpoint.failing_since is None
    save_subscriber(db.session, email="dee@example.com", list_ids=[weekly.id])
    assert len(outbox_rows()) == 2


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/hook", "http://localhost:8080/hook", "http://10.1.2.3/", "https://192.168.0.9/",
    "http://172.16.5.5/", "http://169.254.169.254/latest/meta-data/", "http://[::1]/",
    "http://[::ffff:127.0.0.1]/", "http://[fe80::1]/", "http://[fd00::1]/", "http://0.0.0.0/",
    "http://100.64.0.1/",
])
def test_private_loopback_and_link_local_addresses_are_refused(app, url):
    with pytest.raises(ValidationError, match="private, loopback or link-local|never calls link-local"):
        endpoints.create(db.session, url, ["delivery.sent"], allow_private=False)
    assert db.session.scalar(select(func.count()).select_from(WebhookEndpoint)) == 0


def test_urls_that_are_not_plain_http_are_refused_and_public_and_allowed_ones_kept(app, receiver):
    for url, message in [("ftp://93.184.216.34/", "https://"), ("https://u:p@93.184.216.34/", "user name"),
                         ("", "Enter"), ("https://93.184.216.34:99999/", "port"),
                         ("https://no-such-host.invalid/", "does not resolve")]:
        with pytest.raises(ValidationError, match=message):
            endpoints.create(db.session, url, ["delivery.sent"], allow_private=False)
    assert endpoints.create(db.session, "https://93.184.216.34/hook", ["delivery.sent"],
                            allow_private=False).id
    # WEBHOOKS_ALLOW_PRIVATE=1 allows the owner's own network...
    endpoint = endpoints.create(db.session, receiver.url, ["subscriber.created"], allow_private=True)
    # ...and the check is made again at send time: with it off, nothing reaches the receiver.
    save_subscriber(db.session, email="eve@example.com", list_ids=[make_list(db.session, 0).id])
    outcome = delivery.deliver_due(db.session, delivery.Settings(allow_private=False))
    assert outcome.statuses == ["pending"] and receiver.requests == []
    [row] = outbox_rows(endpoint_id=endpoint.id)
    assert "resolves to 127.0.0.1" in row.last_error


def test_nothing_is_recorded_when_no_enabled_endpoint_wants_the_event(app):
    add_endpoint("http://127.0.0.1:9/", "broadcast.finished")
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="fay@example.com", list_ids=[weekly.id])
    person = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "fay@example.com"))
    leave_list(db.session, person, weekly.id, "owner")
    db.session.commit()
    suppress(db.session, person, "blocked")
    assert outbox_rows() == []

    wanting = add_endpoint("http://127.0.0.1:9/", "subscriber.unsubscribed")
    save_subscriber(db.session, email="gus@example.com", list_ids=[weekly.id])
    other = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "gus@example.com"))
    leave_list(db.session, other, weekly.id, "owner")
    db.session.rollback()  # rolled back with its change: no event
    assert outbox_rows() == []
    leave_list(db.session, other, weekly.id, "owner")
    db.session.commit()
    [row] = outbox_rows()
    assert (row.endpoint_id, row.event_type) == (wanting.id, "subscriber.unsubscribed")


def test_a_real_send_records_delivery_events_in_bulk_and_the_worker_posts_them(
        app, receiver, run_worker_burst):
    endpoint = add_endpoint(receiver.url, "delivery.sent", "broadcast.started", "broadcast.finished")
    weekly = make_list(db.session, 30)
    inserts: list[tuple[int, bool]] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO WEBHOOK_OUTBOX"):
            inserts.append((len(parameters) if executemany else 1, executemany))

    event.listen(db.engine, "before_cursor_execute", count)
    try:
        broadcast = start_broadcast(app, weekly)
        assert run_worker_burst() == 0
    finally:
        event.remove(db.engine, "before_cursor_execute", count)

    sent = outbox_rows(event_type="delivery.sent")
    assert len(sent) == 30 and {r.endpoint_id for r in sent} == {endpoint.id}
    assert len({r.event_id for r in sent}) == 30
    assert [r.event_type for r in outbox_rows() if r.event_type.startswith("broadcast.")] == [
        "broadcast.started", "broadcast.finished"]
    # In bulk: one INSERT (an executemany) per ledger flush, never one per recipient. A flush
    # may hold a single row (the message the send loop carried across its last claim), so
    # count statements and rows: 30 deliveries plus started and finished.
    assert sum(n for n, _ in inserts) == 32 and len(inserts) < 12, inserts
    assert any(many and n > 1 for n, many in inserts), inserts

    # The worker's webhook threads delivered them in the same run (a burst ends once every
    # event due has been attempted).
    assert not ledger.anything_due(db.session, utcnow())
    assert len(receiver.requests) == 32
    assert [r.status for r in outbox_rows()] == ["delivered"] * 32
    finished = [r.json() for r in receiver.requests
                if r.header("Broadside-Event-Type") == "broadcast.finished"]
    assert finished[0]["data"]["broadcast"]["id"] == broadcast.id
    assert finished[0]["data"]["counts"]["sent"] == 30
    emails = {r.json()["data"]["subscriber"]["email"] for r in receiver.requests
              if r.header("Broadside-Event-Type") == "delivery.sent"}
    assert emails == {f"reader{i:05d}@example.com" for i in range(30)}


def test_a_broadcast_with_no_endpoint_for_deliveries_writes_no_outbox_rows(app, run_worker_burst):
    add_endpoint("http://127.0.0.1:9/", "subscriber.created")
    start_broadcast(app, make_list(db.session, 5))
    assert run_worker_burst() == 0
    assert outbox_rows() == []


@pytest.fixture(scope="module")
def localhost_certificate(tmp_path_factory) -> Path:
    """A self-signed certificate for the name `localhost` only (not for 127.0.0.1)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=1)).not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path = tmp_path_factory.mktemp("tls") / "localhost.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


def test_https_connects_to_the_checked_address_and_verifies_the_url_host(
        app, localhost_certificate, monkeypatch):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(localhost_certificate)
    with Receiver(tls=context, host="localhost") as receiver:
        endpoint = add_endpoint(receiver.url, "subscriber.created")
        save_subscriber(db.session, email="hal@example.com", list_ids=[make_list(db.session, 0).id])
        # Untrusted: refused at the handshake, nothing sent.
        assert delivery.deliver_due(db.session, ALLOW).statuses == ["pending"]
        assert receiver.requests == [] and "certificate was not accepted (self-signed certificate)" in (
            outbox_rows()[0].last_error)
        # Trusted: the certificate names `localhost`, the connection goes to a checked address.
        monkeypatch.setenv("SSL_CERT_FILE", str(localhost_certificate))
        assert delivery.deliver_due(db.session, ALLOW, now=utcnow() + timedelta(minutes=5)).delivered == 1
        [request] = receiver.requests
        assert request.header("Host") == f"localhost:{receiver.port}"
        assert readme_verify()(endpoint.secret, request.header("Broadside-Signature"), request.body)


def test_the_log_forgets_settled_events_after_a_month_and_keeps_waiting_ones(app, receiver):
    add_endpoint(receiver.url, "subscriber.created")
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="ida@example.com", list_ids=[weekly.id])
    assert delivery.deliver_due(db.session, ALLOW).delivered == 1
    save_subscriber(db.session, email="jo@example.com", list_ids=[weekly.id])  # still waiting
    assert ledger.prune(db.session, utcnow() + timedelta(days=29)) == 0
    assert ledger.prune(db.session, utcnow() + timedelta(days=31)) == 1
    db.session.commit()
    assert [r.status for r in outbox_rows()] == ["pending"]


def test_erasing_a_person_deletes_the_events_that_name_them(app):
    add_endpoint("http://127.0.0.1:9/", "subscriber.created", "broadcast.started")
    weekly = make_list(db.session, 0)
    save_subscriber(db.session, email="kim@example.com", list_ids=[weekly.id])
    save_subscriber(db.session, email="lou@example.com", list_ids=[weekly.id])
    kim = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "kim@example.com"))
    assert [r.subscriber_id is not None for r in outbox_rows()] == [True, True]
    erase(db.session, kim)
    assert [r.data["subscriber"]["email"] for r in outbox_rows()] == ["lou@example.com"]
