"""DKIM signing of an identity's SMTP mail, proven by dkimpy's own verifier: a broadcast to 20
people through a real worker and a real SMTP server (aiosmtpd), each received message checked
against the key published on a loopback DNS server (tests/dns_server.py, queried through
dnspython). Full speed rides each next envelope behind the previous body (jobs.riding), so the
pipelined path signs too; a paced identity sends one by one. A key that cannot sign pauses the
identity: nothing leaves unsigned."""

from __future__ import annotations

import dkim
import dns.resolver
import pytest
from sqlalchemy import update

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Identity
from broadside.delivery.identities import service as identities
from broadside.mail import dkim_keys
from tests.dns_server import DnsServer
from tests.helpers import broadcast_row, get_jobs, make_list, statuses
from tests.jobs.test_identity_pause import burst
from webapp.extensions import db

PEOPLE = 20


@pytest.fixture
def dns_server():
    with DnsServer() as server:
        yield server


def txt_lookup(server: DnsServer):
    """dkimpy's `dnsfunc`: the TXT record's strings joined, asked of the loopback server."""
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers, resolver.port, resolver.lifetime = ["127.0.0.1"], server.port, 2

    def lookup(name: bytes, timeout: float = 5) -> bytes:
        try:
            answer = resolver.resolve(name.decode().rstrip("."), "TXT")
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return b""
        return b"".join(b"".join(record.strings) for record in answer)

    return lookup


def signing_identity(smtp_url: str, delay_ms: int, selector: str = "news") -> Identity:
    return identities.create(db.session, identities.parse_input({
        "name": "Signed", "from": "Acme News <news@acme.example>", "transport": smtp_url,
        "delay_ms": delay_ms, "dkim": {"selector": selector, "private_key": "generate"}}))


def publish(server: DnsServer, identity: Identity) -> None:
    server.add(dkim_keys.record_name(identity.dkim_selector, "acme.example"), "TXT",
               dkim_keys.txt_record(identity.dkim_private_key))


def send(app, list_id: int, identity_id: int) -> int:
    draft = create_draft(db.session, list_id=list_id, subject="Signed news", body="Hello **you**.\n\n.a dot",
                         identity_id=identity_id)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs()).id


@pytest.mark.parametrize("delay_ms", [0, 1], ids=["riding", "one-by-one"])
def test_every_message_of_a_broadcast_verifies_against_the_published_key(
        app, smtp_server, dns_server, delay_ms):
    identity = signing_identity(smtp_server.url, delay_ms)
    publish(dns_server, identity)
    readers = make_list(db.session, PEOPLE, "Readers", domain="readers.example")
    broadcast_id = send(app, readers.id, identity.id)

    burst(app, "Signed")
    assert broadcast_row(broadcast_id).status == "sent"
    received = smtp_server.messages
    assert len(received) == PEOPLE
    lookup = txt_lookup(dns_server)
    for message in received:
        assert message.data.startswith(
            b"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=acme.example;")
        assert dkim.verify(message.data, dnsfunc=lookup), message.rcpt_tos
        signed = dkim.DKIM(message.data)
        signed.verify(dnsfunc=lookup)
        covered = {name.lower() for name, _ in signed.signed_headers}
        assert {b"from", b"subject", b"list-unsubscribe", b"list-unsubscribe-post",
                b"message-id", b"to", b"date"} <= covered
    assert ("news._domainkey.acme.example", "TXT") in dns_server.queries  # asked of our DNS
    if delay_ms == 0:  # the envelopes rode behind the bodies: the pipelined path signed them
        assert sum(m.followed for m in received) >= PEOPLE // 2

    # What the signature covers cannot be changed: the body, the subject, the unsubscribe link.
    first = received[0].data
    tampered = [first.replace(b"Subject: Signed news", b"Subject: Signed nows"),
                first.replace(b"Hello", b"Jello", 1),
                first.replace(b"List-Unsubscribe: <http",
                              b"List-Unsubscribe: <mailto:x@evil.example>, <http")]
    for changed in tampered:
        assert changed != first
        assert not dkim.verify(changed, dnsfunc=lookup)
    # Nor does it verify against another key published under the selector.
    dns_server.clear()
    dns_server.add("news._domainkey.acme.example", "TXT",
                   dkim_keys.txt_record(dkim_keys.generate_private_key()))
    assert not dkim.verify(first, dnsfunc=txt_lookup(dns_server))


def test_a_key_that_cannot_sign_pauses_the_identity_and_sends_nothing_unsigned(app, smtp_server):
    identity = signing_identity(smtp_server.url, 0)
    broken = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
    db.session.execute(update(Identity).where(Identity.id == identity.id)
                       .values(dkim_private_key=broken))
    readers = make_list(db.session, 5, "Readers", domain="readers.example")
    broadcast_id = send(app, readers.id, identity.id)

    burst(app, "Signed")
    paused = broadcast_row(broadcast_id)
    assert paused.status == "paused"
    assert "DKIM private key of this identity cannot sign" in paused.pause_reason
    assert statuses(broadcast_id) == {"pending": 5}  # nobody failed, nobody sent
    row = db.session.get(Identity, identity.id)
    assert row.status == "paused" and "DKIM" in row.pause_reason
    assert smtp_server.messages == []

