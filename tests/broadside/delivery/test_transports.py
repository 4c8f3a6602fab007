"""The four provider transports against their loopback servers (tests/provider_servers.py):
what is accepted comes back with the provider's ids in the items' order, every failure is
reported with the phase that says whether the message could have been accepted, nothing is
ever sent twice, and the pace runs once, right before each request."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from broadside.core.transport_urls import check_transport_url
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.providers.http import mime_fields, parse_retry_after
from broadside.delivery.transports import DeliveryError, Outgoing, SendResult
from broadside.mail.rendering import RenderedEmail, message_bytes
from tests.provider_servers import (
    MailgunServer,
    PostmarkServer,
    ProviderServer,
    ResendServer,
    SesServer,
)
from tests.smtp_server import free_port

SERVERS: dict[str, type[ProviderServer]] = {
    "postmark": PostmarkServer, "resend": ResendServer, "ses": SesServer, "mailgun": MailgunServer}
BATCHING = ["postmark", "resend"]
SENDER = "news@example.com"
UNSUBSCRIBE = "<https://news.example.com/u/token>, <mailto:unsubscribe@example.com>"


def message(rcpt: str) -> bytes:
    return message_bytes(
        RenderedEmail(subject="News for Zoë", html="<p>Hello <b>there</b></p>", text="Hello there"),
        from_addr="Broadside News <news@example.com>", to_addr=rcpt,
        message_id=f"<{rcpt.replace('@', '.')}@broadside.test>",
        headers={"List-Unsubscribe": UNSUBSCRIBE, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
                 "X-Broadside-Delivery": "42"},
    )


def items(*rcpts: str) -> list[Outgoing]:
    return [Outgoing(SENDER, rcpt, message(rcpt)) for rcpt in rcpts]


class Pacer:
    """Records when pace() ran."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self) -> None:
        self.calls.append(time.monotonic())


def transport_for(server: ProviderServer, timeout: float = 5.0, **url: str):
    return make_transport(check_transport_url(server.transport_url(**url)), "", timeout,
                          allow_private=True)


@pytest.fixture(params=list(SERVERS))
def server(request) -> Iterator[ProviderServer]:
    with SERVERS[request.param]() as running:
        yield running


@pytest.fixture(params=BATCHING)
def batch_server(request) -> Iterator[ProviderServer]:
    with SERVERS[request.param]() as running:
        yield running


@pytest.fixture
def transport(server):
    made = transport_for(server)
    yield made
    made.close()


def send_error(transport, rcpt: str = "ann@example.com", pace=lambda: None) -> DeliveryError:
    with pytest.raises(DeliveryError) as caught:
        transport.send(SENDER, rcpt, message(rcpt), pace)
    return caught.value


# ------------------------------------------------------------------ accepted


def test_a_message_is_accepted_with_the_providers_id(server, transport):
    result = transport.send(SENDER, "ann@example.com", message("ann@example.com"))
    [taken] = server.accepted
    assert result.code == 200 and result.provider_id == taken.provider_id.strip("<>")
    assert taken.rcpt == "ann@example.com"
    assert transport.description.startswith(f"{server.scheme} (")
    for secret in (urlsplit(server.transport_url()).username, urlsplit(server.transport_url()).password):
        assert not secret or unquote(secret) not in transport.description


def test_a_batch_comes_back_in_the_items_order_with_rejects_in_place(batch_server):
    batch_server.reject("bob@example.com")
    batch_server.reject("dan@example.com")
    transport = transport_for(batch_server)
    rcpts = ["ann@example.com", "bob@example.com", "cat@example.com", "dan@example.com", "eve@example.com"]
    results = transport.send_batch(items(*rcpts), "batch-1")
    transport.close()
    assert [type(r) for r in results] == [SendResult, DeliveryError, SendResult, DeliveryError, SendResult]
    ids = {taken.rcpt: taken.provider_id for taken in batch_server.accepted}
    assert [r.provider_id for r in results if isinstance(r, SendResult)] == [
        ids["ann@example.com"], ids["cat@example.com"], ids["eve@example.com"]]
    expected_code = {"postmark": "406", "resend": "validation_error"}[batch_server.scheme]
    for rejected in (results[1], results[3]):
        assert isinstance(rejected, DeliveryError)
        assert (rejected.phase, rejected.code, rejected.provider, rejected.provider_code) == (
            "api", 422, batch_server.scheme, expected_code)
    assert len(batch_server.sends()) == 1


@pytest.mark.parametrize("scheme", ["ses", "mailgun"])
def test_a_refused_message_is_an_api_error_with_the_providers_code(scheme):
    with SERVERS[scheme]() as server:
        server.reject("bob@example.com")
        transport = transport_for(server)
        error = send_error(transport, "bob@example.com")
        transport.close()
    assert (error.phase, error.code) == ("api", 400)
    assert error.provider_code == {"ses": "MessageRejected", "mailgun": None}[scheme]
    assert "bob@example.com" in error.reply and not server.accepted


def test_a_batch_over_the_limit_is_refused_before_any_request(server, transport):
    pace = Pacer()
    with pytest.raises(ValueError):
        transport.send_batch(items(*[f"p{i}@x.example" for i in range(transport.batch_limit + 1)]), "k", pace)
    assert not server.requests and not pace.calls
    assert transport.batch_limit == {"postmark": 500, "resend": 100, "ses": 1, "mailgun": 1}[server.scheme]
    assert transport.idempotent is (server.scheme == "resend")


def test_the_server_refuses_a_batch_over_the_providers_limit(batch_server):
    transport = transport_for(batch_server)
    transport.batch_limit += 1  # as a transport that miscounted would
    with pytest.raises(DeliveryError) as caught:
        transport.send_batch(items(*[f"p{i}@example.com" for i in range(transport.batch_limit)]), "k")
    transport.close()
    assert (caught.value.phase, caught.value.code) == ("api", 422) and not batch_server.accepted


# ------------------------------------------------------------------ what reaches the provider


def test_list_unsubscribe_headers_reach_the_provider(server, transport):
    sent = message("ann@example.com")
    transport.send(SENDER, "ann@example.com", sent)
    [taken] = server.accepted
    assert taken.header("List-Unsubscribe") == UNSUBSCRIBE
    assert taken.header("List-Unsubscribe-Post") == "List-Unsubscribe=One-Click"
    assert taken.header("X-Broadside-Delivery") == "42"
    if server.scheme in ("ses", "mailgun"):
        assert taken.raw == sent  # the MIME bytes, unchanged
    else:
        assert taken.header("Message-ID") == "<ann.example.com@broadside.test>"
        assert taken.header("Date") is None and taken.header("Content-Type") is None


def test_the_json_fields_come_from_the_mime_message(batch_server):
    transport = transport_for(batch_server)
    transport.send(SENDER, "ann@example.com", message("ann@example.com"))
    transport.close()
    fields = batch_server.accepted[0].fields
    if batch_server.scheme == "postmark":
        assert (fields["From"], fields["To"], fields["Subject"]) == (
            "Broadside News <news@example.com>", "ann@example.com", "News for Zoë")
        assert (fields["TextBody"], fields["HtmlBody"]) == ("Hello there", "<p>Hello <b>there</b></p>")
        assert fields["MessageStream"] == "outbound"
    else:
        assert (fields["from"], fields["to"], fields["subject"]) == (
            "Broadside News <news@example.com>", ["ann@example.com"], "News for Zoë")
        assert (fields["text"], fields["html"]) == ("Hello there", "<p>Hello <b>there</b></p>")


def test_the_postmark_stream_comes_from_the_url():
    with PostmarkServer() as server:
        transport = transport_for(server, stream="broadcast")
        transport.send(SENDER, "ann@example.com", message("ann@example.com"))
        transport.close()
    assert server.accepted[0].fields["MessageStream"] == "broadcast"


def test_mime_fields_keep_a_named_recipient_and_the_reply_to():
    raw = (b"From: News <news@example.com>\r\nTo: Ann <ann@example.com>\r\nReply-To: desk@example.com\r\n"
           b"Subject: =?utf-8?q?Caf=C3=A9?=\r\nX-Campaign: 7\r\nContent-Type: text/plain\r\n\r\nHi\r\n")
    fields = mime_fields(raw, "ann@example.com")
    assert (fields.to, fields.subject, fields.reply_to, fields.text, fields.html) == (
        "Ann <ann@example.com>", "Café", "desk@example.com", "Hi\n", None)
    assert fields.headers == [("X-Campaign", "7")]
    assert mime_fields(raw, "other@example.com").to == "other@example.com"  # the envelope rules


# ------------------------------------------------------------------ the provider says no


WRONG_KEY = {"postmark": (401, "10"), "resend": (403, "invalid_api_key"),
             "ses": (403, "InvalidSignatureException"), "mailgun": (401, None)}


def test_a_wrong_key_is_an_api_error_and_check_fails(server):
    transport = transport_for(server, key="wrong-key")
    error = send_error(transport)
    with pytest.raises(DeliveryError) as checked:
        transport.check()
    transport.close()
    assert (error.phase, error.code, error.provider_code) == ("api", *WRONG_KEY[server.scheme])
    assert (checked.value.phase, checked.value.code) == ("api", WRONG_KEY[server.scheme][0])
    assert not server.accepted and "wrong-key" not in error.reply


def test_an_unknown_ses_access_key_is_unrecognized():
    with SesServer() as server:
        transport = transport_for(server, access_key="AKIDUNKNOWN")
        error = send_error(transport)
        transport.close()
    assert (error.phase, error.code, error.provider_code) == ("api", 403, "UnrecognizedClientException")


THROTTLED = {"postmark": "429", "resend": "rate_limit_exceeded", "ses": "TooManyRequestsException",
             "mailgun": None}


def test_throttling_is_api_429_with_retry_after_and_is_not_retried(server, transport):
    server.throttle(1, retry_after="7")
    error = send_error(transport)
    assert (error.phase, error.code, error.retry_after) == ("api", 429, 7.0)
    assert error.provider_code == THROTTLED[server.scheme] and error.network is False
    assert len(server.sends()) == 1 and not server.accepted  # no retry, not even botocore's
    transport.send(SENDER, "ann@example.com", message("ann@example.com"))
    assert len(server.accepted) == 1


def test_a_server_error_is_api_5xx_and_is_not_retried(server, transport):
    server.fail(1, status=503)
    error = send_error(transport)
    assert (error.phase, error.code, error.provider) == ("api", 503, server.scheme)
    assert len(server.sends()) == 1


def test_a_whole_postmark_batch_refusal_carries_its_error_code():
    with PostmarkServer() as server:
        server.fail(1, status=422, code="400", message="The 'From' address is not a Sender Signature.")
        transport = transport_for(server)
        with pytest.raises(DeliveryError) as caught:
            transport.send_batch(items("ann@example.com", "bob@example.com"), "k")
        transport.close()
    error = caught.value
    assert (error.phase, error.code, error.provider_code) == ("api", 422, "400")
    assert "Sender Signature" in error.reply


def test_a_mailgun_domain_the_key_does_not_know_is_404():
    with MailgunServer() as server:
        transport = transport_for(server, domain="other.example.com")
        error = send_error(transport)
        transport.close()
    assert (error.phase, error.code) == ("api", 404) and "other.example.com" in error.reply


# ------------------------------------------------------------------ no answer


def test_a_connection_dropped_after_the_request_is_phase_response(server, transport):
    server.drop(1)
    error = send_error(transport)
    assert (error.phase, error.code, error.network) == ("response", None, True)
    assert len(server.sends()) == 1  # not retried
    transport.send(SENDER, "ann@example.com", message("ann@example.com"))  # a new connection
    assert len(server.accepted) == 1


def test_an_answer_lost_after_the_provider_took_the_message_is_phase_response(server, transport):
    server.drop(1, after_processing=True)
    error = send_error(transport)
    assert error.phase == "response" and len(server.accepted) == 1  # the ambiguous case, for real


def test_no_answer_within_the_timeout_is_phase_response(server):
    transport = transport_for(server, timeout=0.3)
    server.stall(1)
    started = time.monotonic()
    error = send_error(transport)
    transport.close()
    assert (error.phase, error.network) == ("response", True)
    assert 0.25 < time.monotonic() - started < 3 and len(server.sends()) == 1  # not retried


def test_nothing_listening_is_phase_request(server):
    port = free_port()
    url = server.transport_url().replace(f"127.0.0.1:{server.port}", f"127.0.0.1:{port}")
    transport = make_transport(url, "", 5, allow_private=True)
    pace = Pacer()
    error = send_error(transport, pace=pace)
    with pytest.raises(DeliveryError) as checked:
        transport.check()
    transport.close()
    assert (error.phase, error.code, error.network, error.provider) == ("request", None, True, server.scheme)
    assert checked.value.phase == "request"
    assert len(pace.calls) == 1  # a failed attempt is paced like any other


# ------------------------------------------------------------------ pace, connections, check


def test_pace_runs_once_right_before_each_request(server, transport):
    pace = Pacer()
    server.throttle(1)
    server.drop(1)
    for rcpt in ("ann@example.com", "bob@example.com", "cat@example.com"):
        try:
            transport.send(SENDER, rcpt, message(rcpt), pace)
        except DeliveryError:
            pass
    arrivals = [request.at for request in server.sends()]
    assert len(pace.calls) == len(arrivals) == 3
    assert all(0 <= at - paced < 0.5 for paced, at in zip(pace.calls, arrivals, strict=True))


def test_a_kept_alive_connection_serves_many_requests(server, transport):
    for rcpt in ("ann@example.com", "bob@example.com", "cat@example.com"):
        transport.send(SENDER, rcpt, message(rcpt))
    assert len({request.peer for request in server.sends()}) == 1


def test_an_idle_connection_the_provider_closed_is_replaced_before_the_request(server, transport):
    transport.send(SENDER, "ann@example.com", message("ann@example.com"))
    server.close_idle()
    transport.send(SENDER, "bob@example.com", message("bob@example.com"))  # no `response` error
    assert len(server.accepted) == 2 and len({request.peer for request in server.sends()}) == 2


def test_start_keeps_the_verdict_for_finish(server, transport):
    server.reject("bob@example.com")
    transport.start(SENDER, "ann@example.com", transport.wire(message("ann@example.com")))
    assert transport.finish().code == 200
    transport.start(SENDER, "bob@example.com", transport.wire(message("bob@example.com")))
    with pytest.raises(DeliveryError):
        transport.finish()


CHECKED = {"postmark": "postmark: server 'Broadside test'",
           "resend": "resend: 1 domain: example.com (verified)",
           "ses": "ses (eu-west-1): sending enabled, production access, 14 messages/s",
           "mailgun": "mailgun: domain 'mg.example.com' (active)"}


def test_check_authenticates_and_sends_nothing(server, transport):
    assert transport.check().startswith(CHECKED[server.scheme])
    assert not server.sends() and len(server.requests) == 1


def test_a_resend_key_restricted_to_sending_passes_check():
    with ResendServer(sending_only=True) as server:
        transport = transport_for(server)
        assert "sending access only" in transport.check()
        transport.close()


# ------------------------------------------------------------------ Resend's idempotency


def test_resend_same_key_and_items_twice_sends_once():
    with ResendServer() as server:
        transport = transport_for(server)
        batch = items("ann@example.com", "bob@example.com")
        first = transport.send_batch(batch, "broadcast-7-slice-3")
        again = transport.send_batch(items("ann@example.com", "bob@example.com"), "broadcast-7-slice-3")
        transport.close()
    assert [r.provider_id for r in again] == [r.provider_id for r in first]
    assert len(server.accepted) == 2 and len(server.sends()) == 2
    assert server.sends()[0].headers["idempotency-key"] == "broadcast-7-slice-3"


def test_resend_same_key_other_items_is_refused():
    with ResendServer() as server:
        transport = transport_for(server)
        transport.send_batch(items("ann@example.com"), "key-1")
        with pytest.raises(DeliveryError) as caught:
            transport.send_batch(items("bob@example.com"), "key-1")
        transport.send(SENDER, "cat@example.com", message("cat@example.com"))  # no key: sent
        transport.close()
    error = caught.value
    assert (error.phase, error.code, error.provider_code) == ("api", 409, "invalid_idempotent_request")
    assert [taken.rcpt for taken in server.accepted] == ["ann@example.com", "cat@example.com"]
    assert "idempotency-key" not in server.sends()[-1].headers


def test_retry_after_takes_seconds_or_a_date():
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=lambda: 1445412480.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    assert parse_retry_after("nan") is None and parse_retry_after("-3") == 0.0


# ------------------------------------------------------------------ HTTPS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    """A self-signed certificate and key for 127.0.0.1, in one PEM file."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path = tmp_path_factory.mktemp("tls") / "server.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


@pytest.fixture
def https_server(certificate) -> Iterator[ProviderServer]:
    server = PostmarkServer()
    server.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.tls.load_cert_chain(certificate)
    with server:
        yield server


def test_https_with_a_trusted_certificate_sends(https_server, certificate, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))  # what OpenSSL trusts by default
    transport = transport_for(https_server)
    transport.send(SENDER, "ann@example.com", message("ann@example.com"))
    https_server.drop(1)
    error = send_error(transport, "bob@example.com")
    transport.close()
    assert [taken.rcpt for taken in https_server.accepted] == ["ann@example.com"]
    assert error.phase == "response"  # dropped after the request, over TLS too


def test_a_certificate_that_fails_verification_is_phase_request(https_server):
    transport = transport_for(https_server)
    pace = Pacer()
    error = send_error(transport, pace=pace)
    transport.close()
    assert (error.phase, error.network) == ("request", True)
    # In words, with OpenSSL's reason; Python's "[SSL: CERTIFICATE_VERIFY_FAILED]" is for the log.
    assert "certificate was not accepted (self-signed certificate)" in error.reply
    assert not https_server.requests and len(pace.calls) == 1
