"""The outbox signs as SMTP does (an identity on `outbox://` with DKIM writes signed .eml
files that dkimpy verifies), a key that cannot sign is Broadside's own `dkim` refusal with
nothing written, and the signature is made over the message as delivered, whatever lines of
it SMTP dot-stuffs."""

from __future__ import annotations

import dkim
import pytest

from broadside.delivery import smtp_wire
from broadside.delivery.eml_folder import OutboxTransport
from broadside.delivery.transports import DeliveryError
from broadside.mail import dkim_keys
from broadside.mail.dkim_signing import DkimSigner

KEY = dkim_keys.generate_private_key()
MESSAGE = (b"From: Acme <news@acme.example>\r\nTo: ada@example.org\r\nSubject: Dots\r\n"
           b"Message-ID: <1@acme.example>\r\n\r\n.a line starting with a dot\r\n..two\r\nend\r\n")


def lookup(name: bytes, timeout: float = 5) -> bytes:
    assert name.rstrip(b".") == b"news._domainkey.acme.example"
    return dkim_keys.txt_record(KEY).encode()


def test_the_outbox_writes_signed_messages(tmp_path):
    outbox = OutboxTransport(tmp_path, signer=DkimSigner("news", KEY))
    outbox.send("news@acme.example", "ada@example.org", outbox.wire(MESSAGE))
    [written] = tmp_path.glob("*.eml")
    data = written.read_bytes()
    assert data.startswith(b"DKIM-Signature:") and data.endswith(MESSAGE)
    assert dkim.verify(data, dnsfunc=lookup)


def test_a_key_that_cannot_sign_writes_nothing(tmp_path):
    broken = DkimSigner("news", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
    outbox = OutboxTransport(tmp_path, signer=broken)
    with pytest.raises(DeliveryError) as refused:
        outbox.send("news@acme.example", "ada@example.org", MESSAGE)
    assert refused.value.phase == "dkim" and refused.value.ours
    assert "DKIM private key of this identity cannot sign" in refused.value.reply
    assert list(tmp_path.glob("*.eml")) == []


def test_smtp_signs_the_message_as_delivered_not_its_dot_stuffed_payload():
    payload = smtp_wire.wire(MESSAGE)
    assert b"\r\n..a line" in payload and b"\r\n...two" in payload
    assert smtp_wire.delivered(payload) == MESSAGE
    signed = smtp_wire.signed(DkimSigner("news", KEY), payload)
    assert dkim.verify(smtp_wire.delivered(signed), dnsfunc=lookup)
