"""Each identity's DNS checks on Settings → Sending identities and in `doctor`, on SQLite and
PostgreSQL, answered by the DNS server on loopback that the test app's DNS_RESOLVER names: the
section loads itself, is kept (a page view asks DNS nothing), "Check DNS again" asks afresh
(htmx and plain), a silent resolver says "could not ask" naming it (never a 500), an unknown
identity is a 404, and Broadside's DKIM private key never reaches a page."""

from __future__ import annotations

import re
import socket

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from broadside.core.models import Identity
from broadside.delivery.dns_checks.records import dkim_public_key
from broadside.delivery.identities import service as identities
from tests.helpers import csrf_token_from
from webapp.doctor.dns import check_dns
from webapp.doctor.report import report
from webapp.extensions import db

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def make_smtp_identity(key_pem: str = "", name: str = "Relay") -> int:
    data = identities.parse_input({"name": name, "from": "Acme <news@acme.example>",
                                   "transport": "smtp://127.0.0.1:2525"})
    identity_id = identities.create(db.session, data).id
    row = db.session.get(Identity, identity_id)
    row.verp_domain = "bounces.acme.example"
    row.dkim_selector, row.dkim_private_key = ("s1", key_pem) if key_pem else ("", "")
    db.session.commit()
    return identity_id


def post(client, path, headers=None):
    token = csrf_token_from(client.get("/settings/identities/").text)
    return client.post(path, data={"csrf_token": token}, headers=headers or {})


def test_the_section_loads_itself_is_kept_and_asks_again(logged_in_client, dns_server, key_pem):
    identity_id = make_smtp_identity(key_pem)
    page = logged_in_client.get("/settings/identities/").text
    assert f'hx-get="/settings/identities/{identity_id}/dns"' in page  # nothing kept yet
    assert dns_server.queries == []

    section = logged_in_client.get(f"/settings/identities/{identity_id}/dns")
    assert section.status_code == 200
    words = text_of(section.text)
    assert "SPF: missing" in words and "DKIM: missing" in words and "DMARC: missing" in words
    assert "MX: missing" in words
    assert 'bounces.acme.example. TXT "v=spf1 ip4:127.0.0.1 ~all"' in section.text.replace("&#34;", '"')
    _, public = dkim_public_key(key_pem)
    assert "s1._domainkey.acme.example. TXT" in section.text and public[:100] in section.text
    assert "PRIVATE KEY" not in section.text and key_pem[40:90] not in section.text

    asked = len(dns_server.queries)
    page = logged_in_client.get("/settings/identities/").text
    assert len(dns_server.queries) == asked  # the page shows what is kept
    assert "SPF: missing" in text_of(page) and f'hx-get="/settings/identities/{identity_id}/dns"' not in page

    dns_server.add("bounces.acme.example", "TXT", "v=spf1 ip4:127.0.0.1 -all")
    dns_server.add("bounces.acme.example", "MX", "10 mx.acme.example.")
    dns_server.add("s1._domainkey.acme.example", "TXT", f"v=DKIM1; k=rsa; p={public}")
    dns_server.add("_dmarc.acme.example", "TXT", "v=DMARC1; p=none")
    again = post(logged_in_client, f"/settings/identities/{identity_id}/dns", HX)
    assert again.status_code == 200 and again.text.lstrip().startswith("<div class=\"dns\"")
    words = text_of(again.text)
    assert all(f"{k}: ok" in words for k in ("SPF", "DKIM", "DMARC", "MX")), words
    assert "through the resolver at" in words and dns_server.address in words

    plain = post(logged_in_client, f"/settings/identities/{identity_id}/dns")
    assert plain.status_code in (302, 303)
    assert plain.headers["Location"].endswith(f"#dns-identity-{identity_id}")
    assert "DNS checked: every check is ok." in text_of(logged_in_client.get("/settings/identities/").text)


def test_a_silent_resolver_is_could_not_ask_naming_it(app, logged_in_client):
    identity_id = make_smtp_identity()
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    app.config["DNS_RESOLVER"] = address = f"127.0.0.1:{silent.getsockname()[1]}"
    try:
        response = logged_in_client.get(f"/settings/identities/{identity_id}/dns")
    finally:
        silent.close()
    assert response.status_code == 200
    words = text_of(response.text)
    assert "SPF: could not ask" in words and f"the resolver at {address} (DNS_RESOLVER)" in words


def test_the_default_identity_and_unknown_ones(app, logged_in_client, dns_server):
    response = logged_in_client.get("/settings/identities/default/dns")
    assert response.status_code == 200 and "the outbox sends nothing" in response.text
    assert logged_in_client.get("/settings/identities/999999/dns").status_code == 404
    assert logged_in_client.get("/settings/identities/99999999999999/dns").status_code == 404
    identity_id = make_smtp_identity()
    identities.delete(db.session, identity_id)
    assert logged_in_client.get(f"/settings/identities/{identity_id}/dns").status_code == 404
    assert post(logged_in_client, f"/settings/identities/{identity_id}/dns").status_code == 404
    token = csrf_token_from(logged_in_client.get("/settings/identities/").text)
    assert logged_in_client.post("/settings/identities/default/dns").status_code == 400  # no CSRF
    assert logged_in_client.post("/settings/identities/default/dns",
                                 data={"csrf_token": token}).status_code in (302, 303)


def test_doctor_prints_a_line_per_identity_per_check_as_warnings(app, dns_server, key_pem):
    make_smtp_identity(key_pem)
    dns_server.add("_dmarc.acme.example", "TXT", "v=DMARC1; p=none")
    lines = {c.name: c for c in check_dns(app)}
    assert set(lines) == {f"DNS {k} of Relay" for k in ("SPF", "DKIM", "DMARC", "MX")}
    assert lines["DNS DMARC of Relay"].ok
    spf = lines["DNS SPF of Relay"]
    assert spf.ok is False and spf.warning and spf.line().startswith("! DNS SPF of Relay")
    assert 'add bounces.acme.example. TXT "v=spf1 ip4:127.0.0.1 ~all"' in spf.line()
    printed: list[str] = []
    report(app, echo=printed.append)
    summary = printed[-1]
    assert "3 warnings (they do not stop sending)" in summary
    assert "DNS" not in summary.partition("fix:")[2]  # a warning is never a check to fix
