"""Codes over the API on SQLite and PostgreSQL: the `codes` setting of broadcasts and steps
(validated, naming `codes.prefix`), `{{ code }}` refused at Send where codes are off, a code's
story, and redeem: once 200, then 409 with when; two redeems at the same moment over real HTTP
on PostgreSQL: exactly one 200."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from sqlalchemy import select

from broadside.core.models import Broadcast, Code, Delivery
from jobs.broadcasts import BroadcastRows
from tests.helpers import make_list
from webapp.extensions import db

pytestmark = pytest.mark.usefixtures("postal_address")


def a_draft(client, headers, list_id, **extra):
    return client.post("/api/broadcasts", headers=headers, json={
        "list_id": list_id, "subject": "Your code {{ code }}", "body": "Use {{ code }}", **extra})


def test_a_broadcast_takes_codes_on_create_and_edit_and_shows_them(client, api_headers):
    weekly = make_list(db.session, 1)
    created = a_draft(client, api_headers, weekly.id, codes={"prefix": "SAVE"})
    assert created.status_code == 201 and created.json["codes"] == {"prefix": "SAVE"}
    broadcast_id = created.json["id"]
    assert client.get(f"/api/broadcasts/{broadcast_id}", headers=api_headers).json["codes"] == {
        "prefix": "SAVE"}
    edited = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers,
                          json={"codes": {"prefix": "SPRING26"}})
    assert edited.status_code == 200 and edited.json["codes"] == {"prefix": "SPRING26"}
    off = client.patch(f"/api/broadcasts/{broadcast_id}", headers=api_headers, json={"codes": None})
    assert off.json["codes"] is None
    listed = client.get("/api/broadcasts", headers=api_headers).json["items"]
    assert listed[0]["codes"] is None


@pytest.mark.parametrize(("codes", "field"), [
    ({"prefix": "save"}, "codes.prefix"), ({"prefix": ""}, "codes.prefix"),
    ({"prefix": "ABCDEFGHIJKLM"}, "codes.prefix"), ({"prefix": 7}, "codes.prefix"),
    ({"prefix": "SAVE", "length": 4}, "codes"), ("SAVE", "codes"), ([], "codes"),
])
def test_a_bad_codes_setting_is_a_422_naming_the_field_and_writes_nothing(
        client, api_headers, codes, field):
    weekly = make_list(db.session, 1)
    refused = a_draft(client, api_headers, weekly.id, codes=codes)
    assert refused.status_code == 422 and refused.json["field"] == field, refused.json
    assert db.session.scalar(select(Broadcast.id)) is None
    draft = a_draft(client, api_headers, weekly.id, codes={"prefix": "OK"}).json["id"]
    patched = client.patch(f"/api/broadcasts/{draft}", headers=api_headers, json={"codes": codes})
    assert patched.status_code == 422 and patched.json["field"] == field
    db.session.expire_all()
    assert db.session.get(Broadcast, draft).codes_prefix == "OK"


def test_sending_code_fields_without_codes_is_refused_with_the_reason(client, api_headers):
    weekly = make_list(db.session, 1)
    draft = a_draft(client, api_headers, weekly.id).json["id"]
    refused = client.post(f"/api/broadcasts/{draft}/send", headers=api_headers)
    assert refused.status_code == 422
    assert "{{ code }} is filled in only when “Mint a code per recipient” is on" in refused.json["error"]
    db.session.expire_all()
    assert db.session.get(Broadcast, draft).status == "draft"


def test_an_automation_step_takes_codes_and_refuses_a_bad_prefix(client, api_headers):
    weekly = make_list(db.session, 0)
    step = {"delay": "PT0S", "subject": "Code {{ code }}", "body": "Hi"}
    body = {"name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id}}
    refused = client.post("/api/automations", headers=api_headers, json={
        **body, "steps": [{**step, "codes": {"prefix": "lower"}}]})
    assert refused.status_code == 422 and refused.json["field"] == "steps[0].codes.prefix"
    without = client.post("/api/automations", headers=api_headers, json={**body, "steps": [step]})
    assert without.status_code == 422 and "{{ code }} is filled in only when" in without.json["error"]
    created = client.post("/api/automations", headers=api_headers, json={
        **body, "steps": [{**step, "codes": {"prefix": "HELLO"}}]})
    assert created.status_code == 201, created.json
    assert created.json["steps"][0]["codes"] == {"prefix": "HELLO"}


def minted_codes(app, client, api_headers, size=1) -> list[str]:
    """A broadcast with codes sent (the claim mints them; nothing needs to go out)."""
    weekly = make_list(db.session, size)
    draft = a_draft(client, api_headers, weekly.id, codes={"prefix": "SAVE"}).json["id"]
    assert client.post(f"/api/broadcasts/{draft}/send", headers=api_headers).status_code == 202
    source = BroadcastRows(db.session, None, draft)  # type: ignore[arg-type]
    source.codes_prefix = "SAVE"
    rows = source.claim(size)
    db.session.commit()
    return [row.code for row in rows if row.code]


def test_a_code_tells_whose_it_is_and_redeems_once(app, client, api_headers):
    [code] = minted_codes(app, client, api_headers)
    story = client.get(f"/api/codes/{code}", headers=api_headers)
    assert story.status_code == 200
    delivery = db.session.scalars(select(Delivery)).one()
    assert story.json["code"] == code and story.json["prefix"] == "SAVE"
    assert story.json["subscriber"] == {"id": delivery.subscriber_id, "email": "reader00000@example.com"}
    assert story.json["message"]["kind"] == "broadcast"
    assert story.json["message"]["title"] == "Your code {{ code }}"
    assert story.json["message"]["status"] == "sending" and story.json["message"]["sent_at"] is None
    assert (story.json["redeemed"], story.json["redeemed_at"]) == (False, None)

    redeemed = client.post(f"/api/codes/{code.lower()}/redeem", headers=api_headers)
    assert redeemed.status_code == 200 and redeemed.json["code"] == code
    again = client.post(f"/api/codes/{code}/redeem", headers=api_headers)
    assert again.status_code == 409 and again.json["field"] == "code"
    assert again.json["redeemed_at"] == redeemed.json["redeemed_at"]
    assert client.get(f"/api/codes/{code}", headers=api_headers).json["redeemed"] is True


@pytest.mark.parametrize("code", ["SAVE-NOTACODE", "x" * 300, "%E2%9C%93"])
def test_an_unknown_code_is_a_404(client, api_headers, code):
    assert client.get(f"/api/codes/{code}", headers=api_headers).status_code == 404
    assert client.post(f"/api/codes/{code}/redeem", headers=api_headers).status_code == 404


# SQLite serialises writers: the race is PostgreSQL's.
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_two_redeems_at_the_same_moment_one_wins(app, backend, client, api_headers, live_server):
    codes = minted_codes(app, client, api_headers, size=5)
    for code in codes:
        statuses: list[int] = []
        start = threading.Barrier(4)

        def redeem(code=code, statuses=statuses, start=start) -> None:
            request = urllib.request.Request(f"{live_server.url}/api/codes/{code}/redeem",
                                             method="POST", headers=api_headers)
            start.wait()
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    statuses.append(answer.status)
            except urllib.error.HTTPError as refused:
                assert "redeemed_at" in json.loads(refused.read())
                statuses.append(refused.code)

        threads = [threading.Thread(target=redeem) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert sorted(statuses) == [200, 409, 409, 409]
    db.session.expire_all()
    assert all(c.redeemed_at is not None for c in db.session.scalars(select(Code)))

