"""A transactional template's plain-text part: automatic (shown) or the owner's own, from its
form and the API ("text"), frozen into its revision; a mistake in it is said under it."""

from __future__ import annotations

import re

from sqlalchemy import select

from broadside.core.models import TransactionalTemplate, TransactionalTemplateRevision
from tests.helpers import csrf_token_from
from webapp.extensions import db

RESET = {"name": "Password reset", "subject": "Reset your password",
         "body": "Hello **{{ name }}**, your link: {{ data.link }}"}


def post(client, path, **fields):
    page = client.get(path)
    return client.post(path, data={"csrf_token": csrf_token_from(page.text), **RESET, **fields})


def newest_revision() -> TransactionalTemplateRevision:
    db.session.expire_all()
    return db.session.scalars(select(TransactionalTemplateRevision)
                              .order_by(TransactionalTemplateRevision.id.desc())).first()


def test_the_form_shows_the_automatic_text_and_saves_the_owners(logged_in_client):
    answer = post(logged_in_client, "/settings/transactional/new", text_mode="auto",
                  text_body="ignored")
    assert answer.status_code == 303, answer.text
    template_id = int(answer.headers["Location"].rsplit("/", 1)[1])
    assert db.session.get(TransactionalTemplate, template_id).text_body is None
    edit = f"/settings/transactional/{template_id}"
    page = logged_in_client.get(edit).text
    assert re.search(r'<pre class="text-automatic"[^>]*>Hello \{\{ name \}\}, your link: '
                     r"\{\{ data.link \}\}</pre>", page)
    answer = post(logged_in_client, edit, text_mode="own",
                  text_body="Reset it here: {{ data.link }}\r\n")
    assert answer.status_code == 303, answer.text
    db.session.expire_all()
    assert db.session.get(TransactionalTemplate, template_id).text_body == (
        "Reset it here: {{ data.link }}\n")
    assert newest_revision().text_template.startswith("Reset it here: {{ data.link }}")
    page = logged_in_client.get(edit).text
    assert re.search(r'<input[^>]* checked[^>]*value="own"', page)


def test_a_mistake_in_the_text_part_is_said_under_it_and_kept(logged_in_client):
    answer = post(logged_in_client, "/settings/transactional/new", text_mode="own",
                  text_body="Reset: {{ data.link ")
    assert answer.status_code == 422
    error = re.search(r'<p class="error" id="text-body-error">(.*?)</p>', answer.text, re.S)
    assert error and "plain-text part" in error.group(1)
    assert "Reset: {{ data.link </textarea>" in answer.text


def test_the_api_takes_and_gives_the_text_part(client, api_headers):
    body = {**RESET, "text": "Plain: {{ data.link }}"}
    created = client.post("/api/transactional/templates", json=body, headers=api_headers)
    assert created.status_code == 201, created.json
    assert created.json["text"] == "Plain: {{ data.link }}"
    replaced = client.put(f"/api/transactional/templates/{created.json['id']}",
                          json={**RESET, "text": None}, headers=api_headers)
    assert replaced.status_code == 200 and replaced.json["text"] is None
    refused = client.put(f"/api/transactional/templates/{created.json['id']}",
                         json={**RESET, "text": 3}, headers=api_headers)
    assert refused.status_code == 422 and refused.json["field"] == "text"
