"""The DNS checks of a sending identity, answered by a DNS server on loopback (dnslib), never
the internet: SPF through ip4, an include chain, a, redirect, a failing and a broken record and
none; DKIM present, missing and with another key; DMARC present, missing and misaligned; the
bounce domain's MX; a resolver that does not answer. Each check is data: a state, a sentence,
the exact record to add."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from broadside.delivery.dns_checks.checks import DnsSubject, run
from broadside.delivery.dns_checks.records import aligned, dkim_public_key, organisational_domain
from tests.dns_server import DnsServer


@pytest.fixture(scope="module")
def dns_module() -> Iterator[DnsServer]:
    with DnsServer() as server:
        yield server


@pytest.fixture
def dns(dns_module) -> DnsServer:
    dns_module.clear()
    return dns_module


@pytest.fixture(scope="module")
def key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def smtp(**extra) -> DnsSubject:
    return DnsSubject(**{"from_domain": "example.com", "scheme": "smtp", "smtp_host": "127.0.0.1",
                         **extra})


def by_kind(subject: DnsSubject, dns: DnsServer) -> dict:
    return {c.kind: c for c in run(subject, dns.address)}


# ---------------------------------------------------------------- SPF


def test_spf_passes_through_ip4(dns):
    dns.add("example.com", "TXT", "v=spf1 ip4:127.0.0.0/8 -all")
    spf = by_kind(smtp(), dns)["spf"]
    assert spf.state == "ok", spf
    assert "ip4:127.0.0.0/8" in spf.sentence and spf.record == ""


def test_spf_passes_through_an_include_chain_and_a_redirect(dns):
    dns.add("example.com", "TXT", "v=spf1 include:_spf.example.net ~all")
    dns.add("_spf.example.net", "TXT", "v=spf1 include:_relay.example.org -all")
    dns.add("_relay.example.org", "TXT", "v=spf1 redirect=_base.example.org")
    dns.add("_base.example.org", "TXT", "v=spf1 ip4:127.0.0.1 -all")
    assert by_kind(smtp(), dns)["spf"].state == "ok"


def test_spf_passes_through_a_and_mx_of_a_named_host(dns):
    dns.add("mail.example.com", "A", "127.0.0.1")
    dns.add("example.com", "TXT", "v=spf1 a:mail.example.com -all")
    assert by_kind(smtp(smtp_host="mail.example.com"), dns)["spf"].state == "ok"
    dns.clear()
    dns.add("mail.example.com", "A", "127.0.0.1")
    dns.add("example.com", "MX", "10 mail.example.com.")
    dns.add("example.com", "TXT", "v=spf1 mx -all")
    assert by_kind(smtp(smtp_host="mail.example.com"), dns)["spf"].state == "ok"


def test_spf_that_does_not_authorise_the_host_is_wrong_with_the_record_fixed(dns):
    dns.add("example.com", "TXT", "v=spf1 ip4:192.0.2.1 -all")
    spf = by_kind(smtp(), dns)["spf"]
    assert spf.state == "wrong"
    assert "does not authorise the SMTP host 127.0.0.1" in spf.sentence
    assert spf.record == 'example.com. TXT "v=spf1 ip4:192.0.2.1 ip4:127.0.0.1 -all"'


def test_spf_with_more_than_ten_lookups_is_wrong(dns):
    dns.add("example.com", "TXT", "v=spf1 " + " ".join(f"include:s{i}.example.net" for i in range(11))
            + " -all")
    for i in range(11):
        dns.add(f"s{i}.example.net", "TXT", "v=spf1 ip4:192.0.2.1 -all")
    spf = by_kind(smtp(), dns)["spf"]
    assert spf.state == "wrong"
    assert "more than 10 DNS lookups" in spf.sentence


def test_no_spf_is_missing_with_the_record_to_add(dns):
    dns.add("example.com", "MX", "10 mail.example.com.")
    spf = by_kind(smtp(), dns)["spf"]
    assert spf.state == "missing"
    assert spf.record == 'example.com. TXT "v=spf1 ip4:127.0.0.1 ~all"'
    spf = by_kind(smtp(smtp_host="mail.example.com"), dns)["spf"]
    assert spf.state == "wrong" and "has no address in DNS" in spf.sentence


def test_spf_is_judged_on_the_verp_domain_when_there_is_one(dns):
    dns.add("example.com", "TXT", "v=spf1 ip4:127.0.0.1 -all")
    spf = by_kind(smtp(verp_domain="bounces.example.com"), dns)["spf"]
    assert spf.state == "missing" and spf.name == "bounces.example.com"
    assert spf.record.startswith("bounces.example.com. TXT")


def test_providers_spf_resend_on_its_send_subdomain_ses_and_postmark_on_their_own(dns):
    dns.add("send.example.com", "TXT", "v=spf1 include:amazonses.com ~all")
    resend = by_kind(DnsSubject("example.com", "resend"), dns)
    assert resend["spf"].state == "ok" and resend["spf"].name == "send.example.com"
    postmark = by_kind(DnsSubject("example.com", "postmark"), dns)["spf"]
    assert postmark.state == "ok" and "pm.mtasv.net" in postmark.sentence
    assert "no SPF record is needed on example.com" in postmark.sentence
    mailgun = by_kind(DnsSubject("example.com", "mailgun", url_domain="mg.example.com"), dns)["spf"]
    assert mailgun.state == "missing"
    assert mailgun.record == 'mg.example.com. TXT "v=spf1 include:mailgun.org ~all"'


# ---------------------------------------------------------------- DKIM


def test_dkim_present_missing_and_with_another_key(dns, key_pem):
    kind, public = dkim_public_key(key_pem)
    subject = smtp(dkim_selector="s1", dkim_private_key=key_pem)
    missing = by_kind(subject, dns)["dkim"]
    assert missing.state == "missing"
    assert missing.record.startswith('s1._domainkey.example.com. TXT "v=DKIM1; k=rsa; p=')
    assert public[:200] in missing.record.replace('" "', "")

    dns.add("s1._domainkey.example.com", "TXT", f"v=DKIM1; k=rsa; p={public}")  # chunked
    assert by_kind(subject, dns)["dkim"].state == "ok"

    other = rsa.generate_private_key(public_exponent=65537, key_size=1024).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    wrong = by_kind(smtp(dkim_selector="s1", dkim_private_key=other), dns)["dkim"]
    assert wrong.state == "wrong" and "not the one Broadside signs with" in wrong.sentence


def test_dkim_by_provider(dns):
    assert by_kind(DnsSubject("example.com", "resend"), dns)["dkim"].state == "missing"
    dns.add("resend._domainkey.example.com", "TXT", "p=MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQC")
    assert by_kind(DnsSubject("example.com", "resend"), dns)["dkim"].state == "ok"
    postmark = by_kind(DnsSubject("example.com", "postmark"), dns)["dkim"]
    assert postmark.state == "unchecked" and "pm._domainkey" in postmark.sentence
    assert by_kind(smtp(), dns)["dkim"].state == "unchecked"


# ---------------------------------------------------------------- DMARC


def test_dmarc_present_and_aligned(dns, key_pem):
    dns.add("_dmarc.example.com", "TXT", "v=DMARC1; p=quarantine; rua=mailto:d@example.com")
    dmarc = by_kind(smtp(), dns)["dmarc"]
    assert dmarc.state == "ok" and "SPF (Return-Path at example.com)" in dmarc.sentence


def test_dmarc_missing_gives_the_record(dns):
    dmarc = by_kind(smtp(from_domain="news.example.co.uk"), dns)["dmarc"]
    assert dmarc.state == "missing"
    assert dmarc.record == ('_dmarc.example.co.uk. TXT "v=DMARC1; p=none; '
                            'rua=mailto:dmarc-reports@example.co.uk"')


def test_dmarc_misaligned_return_path_without_dkim_is_wrong(dns, key_pem):
    dns.add("_dmarc.example.com", "TXT", "v=DMARC1; p=reject; aspf=s")
    dmarc = by_kind(smtp(verp_domain="bounces.example.com"), dns)["dmarc"]
    assert dmarc.state == "wrong"
    assert "would fail" in dmarc.sentence and "bounces.example.com" in dmarc.sentence
    # Signed by Broadside with d=example.com, it aligns through DKIM.
    signed = smtp(verp_domain="bounces.example.com", dkim_selector="s1", dkim_private_key=key_pem)
    dns.add("s1._domainkey.example.com", "TXT", f"v=DKIM1; k=rsa; p={dkim_public_key(key_pem)[1]}")
    assert by_kind(signed, dns)["dmarc"].state == "ok"
    # Relaxed SPF alignment: bounces.example.com shares example.com's organisational domain.
    dns.clear()
    dns.add("_dmarc.example.com", "TXT", "v=DMARC1; p=reject")
    assert by_kind(smtp(verp_domain="bounces.example.com"), dns)["dmarc"].state == "ok"
    assert by_kind(smtp(verp_domain="bounce.other.org"), dns)["dmarc"].state == "wrong"


def test_organisational_domains_and_alignment():
    assert organisational_domain("a.b.example.com") == "example.com"
    assert organisational_domain("news.shop.example.co.uk") == "example.co.uk"
    assert aligned("example.com", "bounces.example.com", "r")
    assert not aligned("example.com", "bounces.example.com", "s")


# ---------------------------------------------------------------- MX


def test_mx_of_the_bounce_domain_present_missing_null(dns):
    subject = smtp(verp_domain="bounces.example.com", mailbox_host="imap.example.com")
    mx = by_kind(subject, dns)["mx"]
    assert mx.state == "missing" and mx.name == "bounces.example.com"
    assert mx.record == "bounces.example.com. MX 10 imap.example.com."
    dns.add("bounces.example.com", "MX", "10 mx.example.com.")
    assert by_kind(subject, dns)["mx"].state == "ok"
    dns.clear()
    dns.add("bounces.example.com", "MX", "0 .")
    assert by_kind(subject, dns)["mx"].state == "wrong"
    dns.clear()
    dns.add("send.example.com", "MX", "10 mx.example.com.")
    resend = by_kind(DnsSubject("example.com", "resend"), dns)["mx"]
    assert resend.state == "wrong" and "feedback-smtp.us-east-1.amazonses.com." in resend.record


# ---------------------------------------------------------------- the resolver


def test_a_resolver_that_does_not_answer_is_could_not_ask_naming_it_within_bounds():
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # bound, never answers
    silent.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{silent.getsockname()[1]}"
    try:
        started = time.monotonic()
        checks = run(smtp(dkim_selector="s1", dkim_private_key="x"), address)
        took = time.monotonic() - started
    finally:
        silent.close()
    assert [c.kind for c in checks] == ["spf", "dkim", "dmarc", "mx"]
    asked = [c for c in checks if c.state == "could_not_ask"]
    assert len(asked) == 3  # the DKIM key itself is unreadable: that needs no question
    assert all(address in c.sentence for c in asked)
    assert took < 3.5  # one lookup's 2 s, then the rest at once


def test_the_outbox_and_an_identity_without_a_from_are_not_checked(dns):
    assert run(DnsSubject("example.com", "outbox"), dns.address) == []
    assert dns.queries == []


def test_dmarc_does_not_count_a_dkim_signature_whose_key_is_not_published(dns, key_pem):
    dns.add("_dmarc.example.com", "TXT", "v=DMARC1; p=reject")
    subject = smtp(verp_domain="bounce.other.org", dkim_selector="s1", dkim_private_key=key_pem)
    dmarc = by_kind(subject, dns)["dmarc"]
    assert dmarc.state == "wrong" and "cannot be verified" in dmarc.sentence
    dns.add("s1._domainkey.example.com", "TXT", f"v=DKIM1; k=rsa; p={dkim_public_key(key_pem)[1]}")
    assert by_kind(subject, dns)["dmarc"].state == "ok"
