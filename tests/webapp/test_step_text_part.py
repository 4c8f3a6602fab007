"""An automation step's plain-text part: automatic (shown, made from its body) or the owner's
own, from the editor (without JavaScript) and the API; its merge fields checked and frozen."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from broadside.campaigns.automations import service as automations
from broadside.core.models import AutomationRevision, AutomationStep, MailingList
from tests.helpers import csrf_token_from
from webapp.extensions import db

pytestmark = pytest.mark.usefixtures("postal_address")


def a_list() -> int:
    mailing_list = MailingList(name="Weekly")
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list.id


def editor_post(client, path, list_id, **fields):
    token = csrf_token_from(client.get(path).get_data(as_text=True))
    return client.post(path, data={
        "csrf_token": token, "action": "save", "name": "Welcome", "trigger_type": "joined_list",
        "list_id": str(list_id), "priority": "0", "step-1-delay": "PT0S",
        "step-1-subject": "Hello {{ name }}", "step-1-body": "Glad **you** came.", **fields})


def step() -> AutomationStep:
    db.session.expire_all()
    return db.session.scalars(select(AutomationStep)).one()


def test_the_editor_shows_the_automatic_text_and_saves_the_owners(logged_in_client):
    list_id = a_list()
    assert editor_post(logged_in_client, "/automations/new", list_id,
                       **{"step-1-text-mode": "auto", "step-1-text": "ignored"}).status_code == 303
    assert step().text_body is None
    path = f"/automations/{step().automation_id}/edit"
    page = logged_in_client.get(path).get_data(as_text=True)
    assert re.search(r'<pre class="text-automatic"[^>]*>Glad you came.</pre>', page)
    assert re.search(r'name="step-1-text-mode" value="auto" checked', page)
    assert editor_post(logged_in_client, path, list_id, **{
        "step-1-text-mode": "own", "step-1-text": "Dear {{ name }},\r\nwelcome."}
    ).status_code == 303
    assert step().text_body == "Dear {{ name }},\nwelcome."
    revision = db.session.get(AutomationRevision, step().revision_id)
    assert "{% endif %}Dear {{ name }},\nwelcome.\n\n--\n" in revision.text_template
    page = logged_in_client.get(path).get_data(as_text=True)
    assert re.search(r'name="step-1-text-mode" value="own" checked', page)
    assert 'data-from-automatic="false">\nDear {{ name }},\nwelcome.</textarea>' in page
    # Saved again unchanged: no new revision (the text part is compared like the body).
    count = db.session.scalar(select(func.count()).select_from(AutomationRevision))
    editor_post(logged_in_client, path, list_id, **{
        "step-1-text-mode": "own", "step-1-text": "Dear {{ name }},\r\nwelcome."})
    assert db.session.scalar(select(func.count()).select_from(AutomationRevision)) == count


def test_a_broken_merge_field_in_a_steps_text_is_refused_naming_the_step(logged_in_client):
    list_id = a_list()
    response = editor_post(logged_in_client, "/automations/new", list_id, **{
        "step-1-text-mode": "own", "step-1-text": "Dear {{ name "})
    assert response.status_code == 422
    assert "Step 1: The plain-text part has a merge-field error" in response.get_data(as_text=True)
    assert db.session.scalar(select(func.count()).select_from(AutomationStep)) == 0


def test_the_api_takes_and_gives_a_steps_text(app, client, api_headers):
    list_id = a_list()
    body = {"name": "API", "trigger": {"type": "joined_list", "list_id": list_id},
            "steps": [{"subject": "Hi", "body": "Hello", "text": "Plain {{ email }}"}]}
    created = client.post("/api/automations", json=body, headers=api_headers)
    assert created.status_code == 201, created.json
    assert created.json["steps"][0]["text"] == "Plain {{ email }}"
    assert step().text_body == "Plain {{ email }}"
    body["steps"][0]["text"] = None
    replaced = client.put(f"/api/automations/{created.json['id']}", json=body, headers=api_headers)
    assert replaced.status_code == 200 and replaced.json["steps"][0]["text"] is None
    body["steps"][0]["text"] = 7
    refused = client.put(f"/api/automations/{created.json['id']}", json=body, headers=api_headers)
    assert refused.status_code == 422 and "plain-text part" in refused.json["error"]
    assert automations.as_input(db.session, automations.get_automation(
        db.session, created.json["id"]))["steps"][0]["text"] is None
