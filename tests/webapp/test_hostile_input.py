"""What a stranger (or a provider's odd event) sends gets a 4xx with a reason, never a 500 with
tracebacks in the log, and writes nothing: deeply nested JSON to every webhook, NUL and lone
surrogates in a proved provider event, NUL in the owner's search boxes, a bad `tracking` value
on a broadcast in any state, and a Host header with a label over 63 characters (through the
test client and through the Procfile's gunicorn)."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import update

from broadside.core.models import Broadcast
from tests.helpers import (
    WorkerProcess,
    csrf_token_from,
    make_list,
    start_broadcast,
    webhook_body,
    webhook_headers,
)
from tests.procfile import serving
from tests.webapp.test_provider_webhooks import (
    PROVIDERS,
    READER,
    Mailgun,
    Postmark,
    Request,
    Resend,
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

DEEP = b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"  # 100 KB: under the body limit
SECRET = "whsec-hostile-input"
BAD_TEXT = {"NUL": "\x00", "lone surrogate": "\ud800"}


def no_traceback(caplog) -> None:
    """The log holds no error and no exception for the request."""
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


@pytest.fixture
def ses(app):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = time.time()
    from datetime import UTC, datetime, timedelta

    moment = datetime.fromtimestamp(now, UTC)
    app.config["SNS_HTTP_GET"] = FakeAws({CERT_URL: _certificate(key, moment - timedelta(days=1),
                                                                 moment + timedelta(days=1))})
    app.config["SNS_TOPIC_ARNS"] = TOPIC
    return key


# ------------------------------------------------------------------ deeply nested JSON

def deep_requests(app) -> dict[str, Request]:
    """The deep body to every webhook, proved where the route checks the proof first."""
    app.config["WEBHOOK_SECRET"] = SECRET
    postmark, resend, mailgun = Postmark(), Resend(), Mailgun()
    ids = {p.scheme: make_identity(p.scheme, p.transport, p.secret)
           for p in (postmark, resend, mailgun)}
    stamp, svix_id = str(int(time.time())), f"msg_{uuid.uuid4().hex}"
    basic = postmark.request(ids["postmark"], {}).headers
    return {
        "ses": Request("/webhooks/ses", DEEP, {"Content-Type": "text/plain"}),
        "mailgun": Request(f"/webhooks/mailgun/{ids['mailgun']}", DEEP,
                           {"Content-Type": "application/json"}),
        "postmark": Request(f"/webhooks/postmark/{ids['postmark']}", DEEP, basic),
        "resend": Request(f"/webhooks/resend/{ids['resend']}", DEEP, {
            "Content-Type": "application/json", "svix-id": svix_id, "svix-timestamp": stamp,
            "svix-signature": "v1," + Resend.sign(resend.secret, svix_id, stamp, DEEP)}),
        "events": Request("/webhooks/events", DEEP, webhook_headers(DEEP, SECRET)),
    }


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("route", ["ses", "mailgun", "postmark", "resend", "events"])
def test_deeply_nested_json_to_any_webhook_is_a_400_and_no_traceback(app, client, route, caplog):
    request = deep_requests(app)[route]
    before = snapshot()
    with caplog.at_level(logging.INFO):
        response = post(client, request)
    assert response.status_code == 400, response.data[:300]
    assert "deep" in response.json["error"]
    no_traceback(caplog)
    assert snapshot() == before


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_deep_json_inside_a_signed_ses_notification_is_a_400(app, client, ses, caplog):
    message = signed(notification({}), ses)
    message = signed({**message, "Message": DEEP.decode()}, ses)
    with caplog.at_level(logging.INFO):
        response = client.post("/webhooks/ses", data=json.dumps(message),
                               headers={"Content-Type": "text/plain"})
    assert response.status_code == 400 and "deep" in response.json["error"]
    no_traceback(caplog)


# ------------------------------------------------------------------ NUL and lone surrogates

@pytest.mark.parametrize("bad", list(BAD_TEXT))
@pytest.mark.parametrize("where", ["address", "message id"])
def test_nul_or_a_lone_surrogate_in_a_proved_provider_event_is_refused_naming_the_field(
    app, client, provider, bad, where, caplog
):
    identity_id = make_identity(provider.scheme, provider.transport, provider.secret)
    provider_id = provider.provider_id()
    unknown_delivery(app, provider_id, identity_id=identity_id)
    before = snapshot()
    text = BAD_TEXT[bad]
    email = f"reader{text}@example.com" if where == "address" else READER
    message_id = provider_id if where == "address" else provider_id[:-1] + text + ">"
    with caplog.at_level(logging.INFO):
        responses = [post(client, request) for request in (
            provider.delivery(identity_id, message_id, email),
            provider.bounce(identity_id, message_id, email))]
    for response in responses:
        assert response.status_code == 400, response.data[:300]
        error = response.json["error"]
        assert "field " in error and "NUL character or a lone surrogate" in error, error
    no_traceback(caplog)
    assert snapshot() == before


@pytest.mark.parametrize("bad", list(BAD_TEXT))
def test_nul_or_a_lone_surrogate_in_an_ses_notification_is_refused(app, client, ses, bad,
                                                                    caplog):
    bounced = {"notificationType": "Bounce",
               "bounce": {"bounceType": "Permanent", "bouncedRecipients": [
                   {"emailAddress": f"ann{BAD_TEXT[bad]}@example.com"}]},
               "mail": {"messageId": "0100-ses-id"}}
    before = snapshot()
    with caplog.at_level(logging.INFO):
        response = client.post("/webhooks/ses",
                               data=json.dumps(signed(notification(bounced), ses)),
                               headers={"Content-Type": "text/plain"})
    assert response.status_code == 400
    assert "bounce.bouncedRecipients[0].emailAddress" in response.json["error"]
    no_traceback(caplog)
    assert snapshot() == before


@pytest.mark.parametrize("field", ["message_id", "detail"])
def test_nul_in_a_signed_generic_event_is_refused_naming_the_field(app, client, field, caplog):
    app.config["WEBHOOK_SECRET"] = SECRET
    body = webhook_body(id=str(uuid.uuid4()), type="bounce", email="ann@example.com",
                        **{field: "a\x00b"})
    before = snapshot()
    with caplog.at_level(logging.INFO):
        response = client.post("/webhooks/events", data=body,
                               headers=webhook_headers(body, SECRET))
    assert response.status_code == 400 and field in response.json["error"]
    no_traceback(caplog)
    assert snapshot() == before


# ------------------------------------------------------------------ the owner's search boxes

def test_a_nul_in_the_owners_searches_is_no_500(app, logged_in_client, caplog):
    weekly = make_list(db.session, 2)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    with caplog.at_level(logging.INFO):
        people = logged_in_client.get("/subscribers/?q=reader%0000000")
        deliveries = logged_in_client.get(f"/broadcasts/{broadcast.id}/deliveries?q=%00")
    # Both say why they did not search, as every form and address does (the one rule for
    # text: tests/webapp/test_text_rule.py); the people search used to drop the NUL silently.
    for answer in (people, deliveries):
        assert answer.status_code == 422
        assert "The “search” in the address holds a NUL character" in answer.text
    no_traceback(caplog)


# ------------------------------------------------------------------ tracking

@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("state", ["draft", "scheduled", "sending", "sent"])
@pytest.mark.parametrize("value", ["everything", "", None, "per_person", "aggregate\x00"])
def test_a_bad_tracking_value_is_a_4xx_with_a_reason_in_every_state(app, logged_in_client,
                                                                   state, value, caplog):
    weekly = make_list(db.session, 1)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                       .values(status=state, tracking="off"))
    db.session.commit()
    token = csrf_token_from(logged_in_client.get("/subscribers/").text)
    data = {"csrf_token": token, **({"tracking": value} if value is not None else {})}
    with caplog.at_level(logging.INFO):
        response = logged_in_client.post(f"/broadcasts/{broadcast.id}/tracking", data=data)
    assert response.status_code == 422, response.status_code
    if value and "\x00" in value:  # the one rule for text, before the view
        assert "The “tracking” field holds a NUL character" in response.text
    else:
        assert "Choose the tracking" in response.text or "Per-person tracking is off" in response.text
    no_traceback(caplog)
    db.session.rollback()
    assert db.session.get(Broadcast, broadcast.id).tracking == "off"


# ------------------------------------------------------------------ Host header

LONG_LABEL = "a" * 64 + ".example.com"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("host", [LONG_LABEL, "news..example.com", LONG_LABEL + ":8000"])
def test_a_host_no_url_can_be_built_for_is_a_400_with_one_line_in_the_log(app, client, host,
                                                                           caplog):
    with caplog.at_level(logging.INFO):
        answers = [client.get("/login", headers={"Host": host}),
                   client.get("/subscribe/1", headers={"Host": host}),
                   client.post("/webhooks/ses", data=b"{}", headers={"Host": host})]
    for answer in answers:
        assert answer.status_code == 400 and answer.text.startswith("Bad Host header")
    no_traceback(caplog)
    assert [r.getMessage()[:25] for r in caplog.records] == ["refused GET /login: bad H",
                                                             "refused GET /subscribe/1:",
                                                             "refused POST /webhooks/se"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_long_host_label_through_gunicorn_is_a_400_without_a_traceback(app, app_config,
                                                                        tmp_path):
    log_path = tmp_path / "web.log"
    with serving(WorkerProcess(app_config).env, log_path) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(f"GET /login HTTP/1.1\r\nHost: {LONG_LABEL}\r\n"
                         "Connection: close\r\n\r\n".encode())
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
            reply = b"".join(chunks)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b"Bad Host header" in reply
    log = log_path.read_text()
    assert "Traceback" not in log and "bad Host header" in log
