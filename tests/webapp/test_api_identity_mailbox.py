"""An identity's bounce mailbox over the API: stored, shown masked (the password never), kept
on a PUT that leaves it out, removed by ""; a bad URL or VERP domain is 422 naming its field,
writing nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from broadside.core.models import Identity
from webapp.extensions import db

PASSWORD = "mailbox-pw-5e1c9a7d"
URL = f"imaps://bounces%40acme.example:{PASSWORD}@imap.acme.example:993/INBOX"
BODY = {"name": "Product", "from": "Acme <product@acme.example>",
        "transport": "smtp://mailer:pw@smtp.acme.example:587", "bounce_mailbox": URL}


def _stored(identity_id: int) -> tuple[str, str]:
    db.session.expire_all()
    row = db.session.get(Identity, identity_id)
    return row.bounce_mailbox_url, row.verp_domain


def test_the_mailbox_is_stored_shown_masked_and_kept_or_removed(client, api_headers):
    created = client.post("/api/identities", headers=api_headers,
                          json={**BODY, "verp_domain": "Bounces.Acme.example"})
    assert created.status_code == 201, created.text
    assert PASSWORD not in created.text
    body = created.json
    assert body["bounce_mailbox"] == "imaps://boun…:•••@imap.acme.example:993/INBOX"
    assert body["verp_domain"] == "bounces.acme.example"
    assert _stored(body["id"]) == (URL, "bounces.acme.example")
    one = f"/api/identities/{body['id']}"
    listed = client.get("/api/identities", headers=api_headers)
    assert PASSWORD not in listed.text and PASSWORD not in client.get(one, headers=api_headers).text
    kept = client.put(one, headers=api_headers, json={k: v for k, v in BODY.items()
                                                      if k not in ("transport", "bounce_mailbox")})
    assert kept.status_code == 200 and kept.json["bounce_mailbox"] == body["bounce_mailbox"]
    assert _stored(body["id"]) == (URL, "")
    removed = client.put(one, headers=api_headers, json={**BODY, "bounce_mailbox": ""})
    assert removed.status_code == 200 and removed.json["bounce_mailbox"] is None
    assert _stored(body["id"]) == ("", "")


@pytest.mark.parametrize(("field", "value", "words"), [
    ("bounce_mailbox", "pop3://u:p@mail.acme.example", "imaps:// or imap://"),
    ("bounce_mailbox", "imaps://imap.acme.example/INBOX", "login and its password"),
    ("bounce_mailbox", "imaps://u:p@/INBOX", "IMAP server's name"),
    ("bounce_mailbox", "imaps://u:p@imap.acme.example:99999/INBOX", "port"),
    ("bounce_mailbox", "imap://u:p@imap.acme.example/INBOX?tls=none", "only for a server on this machine"),
    ("bounce_mailbox", "imaps://u:p@imap.acme.example/INBOX?folder=x", "Unknown option"),
    ("bounce_mailbox", "imaps://u:p@imap.acme.example/IN\"BOX", "folder"),
    ("bounce_mailbox", 42, "must be text"),
    ("verp_domain", "not a domain", "not a domain name"),
    ("verp_domain", "localhost", "not a domain name"),
])
def test_a_bad_mailbox_or_domain_is_422_naming_its_field(client, api_headers, field, value, words):
    answer = client.post("/api/identities", headers=api_headers, json={**BODY, field: value})
    assert answer.status_code == 422, answer.text
    assert answer.json["field"] == field
    assert words in answer.json["error"]
    assert db.session.scalar(select(Identity.id)) is None


def test_the_default_identity_shows_bounce_mailbox_url_masked(app, client, api_headers):
    app.config["BOUNCE_MAILBOX_URL"] = URL
    [default] = client.get("/api/identities", headers=api_headers).json
    assert default["bounce_mailbox"] == "imaps://boun…:•••@imap.acme.example:993/INBOX"
