"""The sending identities API, held to its contract on SQLite and PostgreSQL: list (the
default first, from the environment), create, read, replace (missing secrets kept), delete
(refused while used); every refusal is a JSON error naming the problem and writes nothing; a
read-only token only reads; no answer ever carries a secret. And `identity_id` on the
broadcasts and automations APIs."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from broadside.core import accounts
from broadside.core.models import Broadcast, Identity
from broadside.delivery.identities import lifecycle
from tests.helpers import make_list
from webapp.extensions import db

TOKEN = "pm-server-token-7f3a9c1e5b"
KEY = "re_resend-api-key-91d0c3"
PASSWORD = "smtp-password-e8d1b2"
HOOK_SECRET = "whsec-signing-4c2e9a77"
SECRETS = (TOKEN, KEY, PASSWORD, HOOK_SECRET)
BODY = {"name": "Product updates", "from": "Acme Product <product@acme.example>",
        "transport": f"postmark://{TOKEN}@", "delay_ms": 500, "hourly_limit": 10000,
        "postal_address": "", "webhook_secret": HOOK_SECRET}


def no_secret(response) -> dict | list | None:
    text = response.get_data(as_text=True)
    for secret in SECRETS:
        assert secret not in text
    return response.json if text else None


def identity_count() -> int:
    return db.session.scalar(select(func.count()).select_from(Identity)) or 0


def test_the_default_is_listed_first_from_the_environment(app, client, api_headers):
    app.config["SMTP_URL"] = f"smtp+starttls://mailer:{PASSWORD}@smtp.example.com:587"
    [default] = no_secret(client.get("/api/identities", headers=api_headers))
    assert default == {"id": None, "name": "default", "default": True,
                       "from": "Broadside <newsletter@localhost>",
                       "transport": "smtp+starttls://•••:•••@smtp.example.com:587",
                       "delay_ms": 0, "hourly_limit": 0, "account_rate": None, "postal_address": "",
                       "status": "active", "pause_reason": None, "webhook_secret_set": False,
                       "dkim": None, "bounce_mailbox": None, "verp_domain": None}


def test_create_read_replace_and_delete(client, api_headers):
    created = client.post("/api/identities", headers=api_headers, json=BODY)
    assert created.status_code == 201
    body = no_secret(created)
    assert body == {"id": body["id"], "name": "Product updates", "default": False,
                    "from": "Acme Product <product@acme.example>", "transport": "postmark://pm-s…@",
                    "delay_ms": 500, "hourly_limit": 10000, "account_rate": None, "postal_address": "",
                    "status": "active", "pause_reason": None, "webhook_secret_set": True,
                    "dkim": None, "bounce_mailbox": None, "verp_domain": None}
    one = f"/api/identities/{body['id']}"
    assert no_secret(client.get(one, headers=api_headers)) == body
    listed = no_secret(client.get("/api/identities", headers=api_headers))
    assert [i["id"] for i in listed] == [None, body["id"]]

    # PUT without the secrets keeps them; the rest is replaced (left out: the defaults).
    replaced = client.put(one, headers=api_headers, json={"name": "Product news", "from": "news@acme.example",
                                                          "transport": None})
    assert replaced.status_code == 200
    assert no_secret(replaced) == {**body, "name": "Product news", "from": "news@acme.example",
                                   "delay_ms": 200, "hourly_limit": 0}
    row = db.session.get(Identity, body["id"])
    assert (row.transport_url, row.webhook_secret) == (f"postmark://{TOKEN}@", HOOK_SECRET)

    # A new transport URL replaces the old one and resumes a paused identity; "" removes the secret.
    lifecycle.pause(db.session, body["id"], "Postmark refused the token (401).")
    db.session.commit()
    assert client.get(one, headers=api_headers).json["pause_reason"] == "Postmark refused the token (401)."
    again = client.put(one, headers=api_headers, json={**BODY, "transport": f"resend://{KEY}@",
                                                        "webhook_secret": ""})
    assert no_secret(again)["status"] == "active" and again.json["pause_reason"] is None
    assert again.json["transport"] == "resend://re_r…@" and again.json["webhook_secret_set"] is False

    assert client.delete(one, headers=api_headers).status_code == 204
    assert client.get(one, headers=api_headers).status_code == 404
    assert client.put(one, headers=api_headers, json=BODY).status_code == 404
    assert client.delete(one, headers=api_headers).status_code == 404
    assert [i["id"] for i in client.get("/api/identities", headers=api_headers).json] == [None]
    # Its name is free again.
    assert client.post("/api/identities", headers=api_headers, json=BODY).status_code == 201


def test_every_refusal_names_the_problem_and_writes_nothing(client, api_headers):
    refusals = [
        ({**BODY, "secret": "x"}, 422, "Unknown field: secret"),
        ({**BODY, "transport": "ftp://x.example.com"}, 422, "Unknown transport"),
        ({**BODY, "transport": "mailgun://KEY@not a domain"}, 422, "must not contain spaces"),
        ({**BODY, "transport": "postmark://T@?endpoint=ftp://x"}, 422, "?endpoint= must be"),
        ({**BODY, "from": "no address"}, 422, "has no email address"),
        ({**BODY, "name": "default"}, 422, "“default” is the identity the environment defines"),
        ({**BODY, "delay_ms": -5}, 422, "delay_ms must be a whole number"),
        ({**BODY, "hourly_limit": True}, 422, "hourly_limit must be a whole number"),
        ({**BODY, "webhook_secret": 42}, 422, "webhook secret must be text"),
        *(({**BODY, "account_rate": rate}, 422, "account_rate must be a number")
          for rate in (0, -1, "ten", "10", 10_001, 1e308, True, [10])),
        ({"from": "a@example.com"}, 422, "The name is required"),
        ([BODY], 422, "must be a JSON object"),
    ]
    for body, status, said in refusals:
        response = client.post("/api/identities", headers=api_headers, json=body)
        assert response.status_code == status and said in response.json["error"], (body, response.json)
        no_secret(response)
    assert identity_count() == 0
    client.post("/api/identities", headers=api_headers, json=BODY)
    taken = client.post("/api/identities", headers=api_headers, json={**BODY, "name": "PRODUCT UPDATES"})
    assert taken.status_code == 409 and "already an identity called" in taken.json["error"]
    not_json = client.post("/api/identities", headers=api_headers, data="name=x")
    assert not_json.status_code == 422
    assert client.get("/api/identities/99999999999", headers=api_headers).status_code == 404
    assert identity_count() == 1


def test_a_used_identity_is_not_deleted_and_the_answer_says_what_uses_it(client, api_headers):
    identity_id = client.post("/api/identities", headers=api_headers, json=BODY).json["id"]
    weekly = make_list(db.session, 1)
    draft = client.post("/api/broadcasts", headers=api_headers,
                        json={"list_id": weekly.id, "subject": "Hi", "body": "x", "identity_id": identity_id})
    assert draft.status_code == 201 and draft.json == {"id": draft.json["id"], "status": "draft",
                                                       "identity_id": identity_id, "codes": None,
                                                       "format": "markdown", "attachments": [],
                                                       "versions": [], "send_at_local": None}
    automation = client.post("/api/automations", headers=api_headers, json={
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "identity_id": identity_id, "steps": [{"subject": "Hi", "body": "x"}]})
    assert automation.status_code == 201 and automation.json["identity_id"] == identity_id
    refused = client.delete(f"/api/identities/{identity_id}", headers=api_headers)
    assert refused.status_code == 409
    assert refused.json["error"] == ("“Product updates” is still used by 1 broadcast not yet sent and "
                                     "1 automation. Choose another identity for them first.")
    assert client.get(f"/api/identities/{identity_id}", headers=api_headers).status_code == 200


def test_broadcasts_choose_their_identity_on_create_and_patch(client, api_headers):
    identity_id = client.post("/api/identities", headers=api_headers, json=BODY).json["id"]
    weekly = make_list(db.session, 1)
    draft = client.post("/api/broadcasts", headers=api_headers,
                        json={"list_id": weekly.id, "subject": "Hi", "body": "x"}).json
    assert draft["identity_id"] is None
    one = f"/api/broadcasts/{draft['id']}"
    patched = client.patch(one, headers=api_headers, json={"identity_id": identity_id})
    assert patched.status_code == 200 and patched.json["identity_id"] == identity_id
    assert client.get(one, headers=api_headers).json["identity_id"] == identity_id
    assert client.get("/api/broadcasts", headers=api_headers).json["items"][0]["identity_id"] == identity_id
    for bad, said in ((4242, "There is no sending identity 4242"), ("2", "'identity_id' must be an id"),
                      (2**40, "'identity_id' must be an id")):
        refused = client.patch(one, headers=api_headers, json={"identity_id": bad})
        assert refused.status_code == 422 and said in refused.json["error"], bad
        created = client.post("/api/broadcasts", headers=api_headers,
                              json={"list_id": weekly.id, "subject": "Hi", "body": "x", "identity_id": bad})
        assert created.status_code == 422 and said in created.json["error"], bad
    back = client.patch(one, headers=api_headers, json={"identity_id": None})
    assert back.status_code == 200 and back.json["identity_id"] is None
    assert db.session.scalar(select(func.count()).select_from(Broadcast)) == 1
    # A deleted identity can no longer be chosen.
    client.delete(f"/api/identities/{identity_id}", headers=api_headers)
    gone = client.patch(one, headers=api_headers, json={"identity_id": identity_id})
    assert gone.status_code == 422


def test_a_read_only_token_reads_identities_but_changes_none(client, owner, api_headers):
    identity_id = client.post("/api/identities", headers=api_headers, json=BODY).json["id"]
    _, token = accounts.create_token(db.session, owner.id, "reports", read_only=True)
    read_only = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/identities", headers=read_only).status_code == 200
    one = no_secret(client.get(f"/api/identities/{identity_id}", headers=read_only))
    assert one["name"] == "Product updates"
    for method, path in (("post", "/api/identities"), ("put", f"/api/identities/{identity_id}"),
                         ("delete", f"/api/identities/{identity_id}")):
        response = getattr(client, method)(path, headers=read_only, data=json.dumps(BODY),
                                           content_type="application/json")
        assert response.status_code == 403 and "read-only" in response.json["error"], (method, path)
    assert db.session.get(Identity, identity_id).name == "Product updates"
    assert client.get("/api/identities").status_code == 401


@pytest.mark.parametrize("path", ["/api/identities/0", "/api/identities/99999999999999999999"])
def test_an_id_out_of_range_is_not_found_not_an_error(client, api_headers, path):
    for method in ("GET", "PUT", "DELETE"):
        response = client.open(path, method=method, headers=api_headers,
                               json={"name": "X", "from": "x@example.com"} if method == "PUT" else None)
        # (An id past the routes' integer range matches no identity route: 404 or 405, as
        # elsewhere in the API; never a 500.)
        assert response.status_code in (404, 405), (method, response.text)


def test_account_rate_set_on_one_identity_is_shown_for_its_whole_account(client, api_headers):
    """The smallest value set on any identity of an account is the account's, shown for all;
    an identity of another account keeps its own."""
    one = client.post("/api/identities", headers=api_headers, json={**BODY, "account_rate": 12.5})
    assert one.status_code == 201 and one.json["account_rate"] == 12.5
    two = client.post("/api/identities", headers=api_headers,
                      json={**BODY, "name": "Receipts", "account_rate": None}).json
    assert two["account_rate"] == 12.5  # the same Postmark token: the same account
    other = client.post("/api/identities", headers=api_headers,
                        json={**BODY, "name": "Elsewhere", "transport": "postmark://other-token@"}).json
    assert other["account_rate"] is None
    lower = client.put(f"/api/identities/{two['id']}", headers=api_headers,
                       json={**BODY, "name": "Receipts", "account_rate": 4, "transport": None})
    assert lower.status_code == 200 and lower.json["account_rate"] == 4
    shown = {i["name"]: i["account_rate"] for i in client.get("/api/identities", headers=api_headers).json}
    assert shown == {"default": None, "Product updates": 4, "Receipts": 4, "Elsewhere": None}
    refused = client.put(f"/api/identities/{other['id']}", headers=api_headers,
                         json={**BODY, "name": "Elsewhere", "account_rate": 0, "transport": None})
    assert refused.status_code == 422 and refused.json["field"] == "account_rate"
    assert db.session.get(Identity, other["id"]).account_rate is None
