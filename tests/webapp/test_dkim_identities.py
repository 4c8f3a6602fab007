"""An identity's DKIM signing through the API and the owner's form, on SQLite and PostgreSQL:
a key generated or pasted (any PEM form of an RSA key, normalised), the TXT record to publish
and where, the private key never in any answer or page; every refusal names its field
(`dkim`, `dkim.selector`, `dkim.private_key`) and writes nothing; a PUT that leaves `dkim`
out keeps it; a provider's transport signs its own mail. And the default identity's key from
DKIM_SELECTOR and DKIM_PRIVATE_KEY_FILE."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from sqlalchemy import func, select

from broadside.core.config import ConfigError, load_config
from broadside.core.models import Identity
from broadside.delivery.identities import service as identities
from broadside.delivery.streams import fingerprint
from broadside.mail import dkim_keys
from tests.helpers import csrf_token_from
from webapp.extensions import db

PASSWORD = "smtp-password-e8d1b2"
BODY = {"name": "Signed", "from": "Acme News <news@acme.example>",
        "transport": f"smtp://news:{PASSWORD}@smtp.acme.example:587", "delay_ms": 0}


def pem(key, form=serialization.PrivateFormat.PKCS8) -> str:
    return key.private_bytes(serialization.Encoding.PEM, form,
                             serialization.NoEncryption()).decode()


def rsa_pem(bits: int = 2048) -> str:
    return pem(rsa.generate_private_key(public_exponent=65537, key_size=bits))


def secret_lines(key_pem: str) -> list[str]:
    """The lines of a key's private part (its first lines hold the modulus, which the public
    key shows too): none may appear in any answer."""
    return [line for line in key_pem.splitlines() if line and not line.startswith("-----")][8:]


def assert_no_key(text: str, key_pem: str) -> None:
    assert secret_lines(key_pem)
    for line in secret_lines(key_pem):
        assert line not in text
    assert PASSWORD not in text


def stored() -> Identity:
    return db.session.scalars(select(Identity)).one()


def identity_count() -> int:
    return db.session.scalar(select(func.count()).select_from(Identity)) or 0


def test_a_generated_key_signs_and_its_record_is_shown_never_the_key(client, api_headers):
    answer = client.post("/api/identities", headers=api_headers,
                         json={**BODY, "dkim": {"selector": "News2026", "private_key": "generate"}})
    assert answer.status_code == 201, answer.text
    row = stored()
    assert row.dkim_selector == "news2026" and "BEGIN RSA PRIVATE KEY" in row.dkim_private_key
    summary = dkim_keys.check_private_key(row.dkim_private_key)
    assert summary.bits == 2048
    shown = answer.json["dkim"]
    assert shown == {"selector": "news2026", "record_name": "news2026._domainkey.acme.example",
                     "txt_record": "v=DKIM1; k=rsa; p=" + dkim_keys.public_key_b64(row.dkim_private_key),
                     "key_bits": 2048, "key_fingerprint": summary.fingerprint, "problem": None}
    read = client.get(f"/api/identities/{row.id}", headers=api_headers)
    assert read.json["dkim"] == shown
    for text in (answer.text, read.text, client.get("/api/identities", headers=api_headers).text):
        assert_no_key(text, row.dkim_private_key)


def test_a_pasted_key_is_checked_and_kept_across_a_put_that_leaves_it_out(client, api_headers):
    key = rsa_pem()
    created = client.post("/api/identities", headers=api_headers,
                          json={**BODY, "dkim": {"selector": "", "private_key": key}})
    assert created.status_code == 201, created.text
    assert created.json["dkim"]["selector"] == dkim_keys.DEFAULT_SELECTOR
    assert_no_key(created.text, key)
    identity_id = created.json["id"]
    kept = stored().dkim_private_key
    assert dkim_keys.public_key_b64(kept) == dkim_keys.public_key_b64(key)  # the same key, PKCS#1

    # Left out: kept. The selector alone: the key kept. null: off.
    put = client.put(f"/api/identities/{identity_id}", headers=api_headers, json=BODY)
    assert put.status_code == 200 and put.json["dkim"] == created.json["dkim"]
    put = client.put(f"/api/identities/{identity_id}", headers=api_headers,
                     json={**BODY, "dkim": {"selector": "s2"}})
    assert put.status_code == 200 and put.json["dkim"]["record_name"] == "s2._domainkey.acme.example"
    db.session.expire_all()
    assert stored().dkim_private_key == kept
    put = client.put(f"/api/identities/{identity_id}", headers=api_headers, json={**BODY, "dkim": None})
    assert put.status_code == 200 and put.json["dkim"] is None
    db.session.expire_all()
    assert stored().dkim_selector == "" and stored().dkim_private_key == ""


def test_a_short_rsa_key_is_accepted_with_a_warning(client, api_headers):
    answer = client.post("/api/identities", headers=api_headers,
                         json={**BODY, "dkim": {"private_key": rsa_pem(1024)}})
    assert answer.status_code == 201, answer.text
    assert answer.json["dkim"]["key_bits"] == 1024
    assert "2048 bits is the recommended size" in answer.json["dkim"]["problem"]


@pytest.mark.parametrize(("dkim", "field", "words"), [
    ({"private_key": "not a key"}, "dkim.private_key", "not a PEM private key"),
    ({"private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"},
     "dkim.private_key", "could not be read"),
    ({"private_key": "ed25519"}, "dkim.private_key", "Only RSA keys"),
    ({"private_key": ""}, "dkim.private_key", "Paste the private key"),
    ({"private_key": 7}, "dkim.private_key", "PEM private key or \"generate\""),
    ({"selector": "news"}, "dkim.private_key", "Give the DKIM private key"),
    ({"selector": "bad selector!", "private_key": "generate"}, "dkim.selector", "DNS labels"),
    ({"selector": "x" * 64, "private_key": "generate"}, "dkim.selector", "63 characters"),
    ({"key": "generate"}, "dkim", "Unknown field: dkim.key"),
    ("generate", "dkim", "dkim must be null"),
])
def test_a_refused_dkim_names_its_field_and_writes_nothing(client, api_headers, dkim, field, words):
    if isinstance(dkim, dict) and dkim.get("private_key") == "ed25519":
        dkim = {"private_key": pem(ed25519.Ed25519PrivateKey.generate())}
    answer = client.post("/api/identities", headers=api_headers, json={**BODY, "dkim": dkim})
    assert answer.status_code == 422, answer.text
    assert answer.json["field"] == field and words in answer.json["error"]
    assert identity_count() == 0


def test_a_providers_transport_signs_its_own_mail(client, api_headers):
    provider = {**BODY, "transport": "postmark://pm-token-1234@"}
    answer = client.post("/api/identities", headers=api_headers,
                         json={**provider, "dkim": {"private_key": "generate"}})
    assert answer.status_code == 422 and answer.json["field"] == "dkim"
    assert "signs its own mail" in answer.json["error"] and identity_count() == 0
    # A signing SMTP identity moved to a provider, its DKIM kept by leaving it out: refused.
    created = client.post("/api/identities", headers=api_headers,
                          json={**BODY, "dkim": {"private_key": "generate"}})
    moved = client.put(f"/api/identities/{created.json['id']}", headers=api_headers, json=provider)
    assert moved.status_code == 422 and moved.json["field"] == "dkim"
    db.session.expire_all()
    assert stored().transport_url == BODY["transport"]


def test_its_dkim_settings_are_part_of_what_restarts_its_stream(app, client, api_headers):
    created = client.post("/api/identities", headers=api_headers,
                          json={**BODY, "dkim": {"private_key": "generate"}})
    before = identities.resolve(db.session, app.config, created.json["id"])
    assert before.dkim_signer is not None
    for change in ({"selector": "other"}, {"private_key": "generate"}, None):
        client.put(f"/api/identities/{created.json['id']}", headers=api_headers,
                   json={**BODY, "dkim": change})
        db.session.expire_all()
        after = identities.resolve(db.session, app.config, created.json["id"])
        assert after.stream_settings != before.stream_settings  # jobs.supervisor restarts on it
        assert fingerprint(after, "k") != fingerprint(before, "k")  # the System page sees it
        before = after
    assert before.dkim_signer is None


# ---------------------------------------------------------------- the owner's form


def post(client, path, data):
    token = csrf_token_from(client.get("/settings/identities/").text)
    return client.post(path, data={"csrf_token": token, **data})


FORM = {"name": "Signed", "from": "Acme News <news@acme.example>",
        "transport": f"smtp://news:{PASSWORD}@smtp.acme.example:587", "delay_ms": "0",
        "hourly_limit": "0", "postal_address": "", "webhook_secret": ""}


def test_the_form_generates_a_key_and_shows_the_record_to_publish(logged_in_client):
    saved = post(logged_in_client, "/settings/identities/",
                 {**FORM, "dkim_mode": "generate", "dkim_selector": "broadside"})
    assert saved.status_code == 303, saved.text
    key = stored().dkim_private_key
    page = logged_in_client.get("/settings/identities/").text
    record = "v=DKIM1; k=rsa; p=" + dkim_keys.public_key_b64(key)
    assert "broadside._domainkey.acme.example" in page and record in page
    assert dkim_keys.check_private_key(key).fingerprint in page
    assert_no_key(page, key)
    edit = logged_in_client.get(f"/settings/identities/{stored().id}/edit").text
    assert record in edit and 'value="keep" checked' in edit
    assert_no_key(edit, key)
    # Saved with "keep": the same key.
    kept = post(logged_in_client, f"/settings/identities/{stored().id}/edit",
                {**FORM, "transport": "", "dkim_mode": "keep", "dkim_selector": "broadside"})
    assert kept.status_code == 303
    db.session.expire_all()
    assert stored().dkim_private_key == key


def test_the_form_refuses_a_pasted_garbage_key_under_its_field_and_never_echoes_it(logged_in_client):
    garbage = "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWJ1dC1icm9rZW4=\n-----END RSA PRIVATE KEY-----"
    refused = post(logged_in_client, "/settings/identities/",
                   {**FORM, "dkim_mode": "paste", "dkim_selector": "broadside",
                    "dkim_private_key": garbage})
    assert refused.status_code == 422
    page = refused.text
    assert re.search(r'id="identity-dkim_private_key-error" role="alert">This private key could '
                     r"not be read", page)
    assert "c2VjcmV0LWJ1dC1icm9rZW4" not in page and PASSWORD not in page
    assert identity_count() == 0
    # A pasted working key is saved.
    key = rsa_pem()
    saved = post(logged_in_client, "/settings/identities/",
                 {**FORM, "dkim_mode": "paste", "dkim_selector": "mail",
                  "dkim_private_key": key.replace("\n", "\r\n")})
    assert saved.status_code == 303
    assert dkim_keys.public_key_b64(stored().dkim_private_key) == dkim_keys.public_key_b64(key)


# ---------------------------------------------------------------- the default identity


def test_the_default_identity_signs_with_the_key_file_of_the_environment(tmp_path: Path):
    key_file = tmp_path / "dkim.pem"
    key_file.write_text(dkim_keys.generate_private_key())
    config = load_config(tmp_path, {"DKIM_SELECTOR": "Mail", "DKIM_PRIVATE_KEY_FILE": str(key_file)}, {})
    assert config["DKIM_SELECTOR"] == "mail" and config["DKIM_PRIVATE_KEY"] == key_file.read_text()
    with pytest.raises(ConfigError, match="DKIM_PRIVATE_KEY_FILE must be set too"):
        load_config(tmp_path, {"DKIM_SELECTOR": "mail"}, {})
    with pytest.raises(ConfigError, match="DKIM_PRIVATE_KEY_FILE cannot be read"):
        load_config(tmp_path, {"DKIM_SELECTOR": "mail", "DKIM_PRIVATE_KEY_FILE": str(tmp_path / "no")}, {})


def test_the_default_identity_shows_its_record(app, client, api_headers, tmp_path: Path):
    key = dkim_keys.generate_private_key()
    app.config.update(DKIM_SELECTOR="mail", DKIM_PRIVATE_KEY=key, MAIL_FROM="News <news@acme.example>")
    [default] = client.get("/api/identities", headers=api_headers).json
    assert default["dkim"]["record_name"] == "mail._domainkey.acme.example"
    assert default["dkim"]["txt_record"] == dkim_keys.txt_record(key)
