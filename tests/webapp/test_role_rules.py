"""The role rules finer than a route (issue 41), on SQLite and PostgreSQL:

- a writer's test sends go only to their own address (the broadcast editor, an automation
  step's editor, the API's test send: webapp/permissions.own_address_only); another address is
  refused with the sentence under the field and nothing is queued; a sender sends anywhere;
- a writer saves and deletes only an automation that is off: one that is on is refused (403,
  the sentence, their input kept) and nothing changes; turning it on or off is a sender's.
"""

from __future__ import annotations

from sqlalchemy import func, select

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core import accounts, roles
from broadside.core.models import Automation, AutomationStep, TransactionalMessage
from tests.helpers import csrf_token_from, make_list
from tests.webapp.role_clients import Fresh, csrf_of, signed_in
from webapp.extensions import db

HX = {"HX-Request": "true"}
OWN_ONLY = "You may send a test only to your own address"
IS_ON = "This automation is on: a sender, admin or owner can turn it off so you can edit it."


def queued() -> list[str]:
    db.session.rollback()
    return list(db.session.scalars(select(TransactionalMessage.to_email)
                                   .order_by(TransactionalMessage.id)))


def bearer(person) -> dict[str, str]:
    _, plain = accounts.create_token(db.session, person.id, "tests")
    return {"Authorization": f"Bearer {plain}"}


def test_a_writers_test_sends_go_only_to_their_own_address(app, make_person, postal_address):
    weekly = make_list(db.session, 2)
    draft = create_draft(db.session, list_id=weekly.id, subject="Hello", body="Hi")
    automation = automations.create_automation(db.session, automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": "Welcome."}]}),
        default_from=app.config["MAIL_FROM"])
    step = db.session.scalars(select(AutomationStep)).one()
    writer_person = make_person(roles.WRITER, "wendy@example.com")
    writer = signed_in(app, writer_person)
    token = csrf_of(writer)
    editor = writer.get(f"/broadcasts/{draft.id}/edit")
    assert editor.status_code == 200 and 'value="wendy@example.com"' in editor.text

    other = {"csrf_token": token, "to_email": "someone@else.example"}
    refused = writer.post(f"/broadcasts/{draft.id}/test", data=other, headers=HX)
    assert OWN_ONLY in refused.text and "(wendy@example.com)" in refused.text
    plain = writer.post(f"/broadcasts/{draft.id}/test", data=other,
                        headers={"Referer": f"http://localhost/broadcasts/{draft.id}/edit"})
    assert plain.status_code == 302
    assert OWN_ONLY in writer.get(plain.location).text  # the note on the page it returns to
    step_test = f"/automations/{automation.id}/steps/{step.id}/test"
    assert OWN_ONLY in writer.post(step_test, data=other, headers=HX).text
    api = Fresh(app)
    writer_token = bearer(writer_person)
    answer = api.post(f"/api/broadcasts/{draft.id}/test", headers=writer_token,
                      json={"email": "someone@else.example"})
    assert answer.status_code == 422 and answer.get_json()["field"] == "email"
    assert OWN_ONLY in answer.get_json()["error"]
    assert queued() == []  # nothing queued by any of them

    # Their own address, as typed in any case: queued, each way.
    own = {"csrf_token": token, "to_email": "Wendy@Example.com"}
    assert "Test queued" in writer.post(f"/broadcasts/{draft.id}/test", data=own, headers=HX).text
    assert OWN_ONLY not in writer.post(step_test, data=own, headers=HX).text
    assert api.post(f"/api/broadcasts/{draft.id}/test", headers=writer_token,
                    json={"email": "wendy@example.com"}).status_code == 202
    assert queued() == ["wendy@example.com"] * 3

    # A sender tests any address, as every owner did before roles.
    sender = signed_in(app, make_person(roles.SENDER))
    other["csrf_token"] = csrf_of(sender)
    assert "Test queued" in sender.post(f"/broadcasts/{draft.id}/test", data=other,
                                        headers=HX).text
    assert queued()[-1] == "someone@else.example"


def editor_form(client, automation_id: int, **changes) -> dict[str, str]:
    """The editor's fields as its page fills them, with `changes`."""
    page = client.get(f"/automations/{automation_id}/edit").text
    data = {"csrf_token": csrf_token_from(page), "action": "save", "name": "Welcome",
            "trigger_type": "joined_list", "priority": "0", "step-1-subject": "Hi",
            "step-1-body": "Welcome."}
    for name in ("list_id", "step-1-id", "step-1-delay-amount"):
        marker = f'name="{name}" value="'
        if marker in page:
            data[name] = page.split(marker)[1].split('"')[0]
    if "list_id" not in data:
        data["list_id"] = page.split('name="list_id"')[1].split('selected')[0].rsplit(
            'value="', 1)[1].split('"')[0]
    unit = page.split('name="step-1-delay-unit"')[1].split("</select>")[0]
    data["step-1-delay-unit"] = unit.split("selected")[0].rsplit('value="', 1)[1].split('"')[0]
    return {**data, **changes}


def row(automation_id: int) -> tuple:
    db.session.rollback()
    found = db.session.get(Automation, automation_id)
    assert found is not None
    return found.name, found.status, found.updated_at


def test_a_writer_changes_only_an_automation_that_is_off(app, make_person, postal_address):
    weekly = make_list(db.session, 2)
    automation = automations.create_automation(db.session, automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": "Welcome."}]}),
        default_from=app.config["MAIL_FROM"])
    writer_person = make_person(roles.WRITER)
    writer = signed_in(app, writer_person)

    # Off: the writer edits it, and it stays off.
    saved = writer.post(f"/automations/{automation.id}/edit",
                        data=editor_form(writer, automation.id, name="Welcome aboard"))
    assert saved.status_code == 303, saved.text
    assert row(automation.id)[:2] == ("Welcome aboard", "disabled")
    token = csrf_of(writer)
    assert writer.post(f"/automations/{automation.id}/enable",
                       data={"csrf_token": token}).status_code == 403
    assert row(automation.id)[1] == "disabled"

    automations.enable(db.session, automation.id)  # a sender turned it on
    before = row(automation.id)
    refused = writer.post(f"/automations/{automation.id}/edit",
                          data=editor_form(writer, automation.id, name="Changed while on"))
    assert refused.status_code == 403 and IS_ON in refused.text
    assert 'value="Changed while on"' in refused.text  # what they typed is kept
    deleted = writer.post(f"/automations/{automation.id}/delete", data={"csrf_token": token})
    assert deleted.status_code == 403 and "so you can delete it" in deleted.text
    assert writer.post(f"/automations/{automation.id}/disable",
                       data={"csrf_token": token}).status_code == 403
    api, writer_token = Fresh(app), bearer(writer_person)
    body = {"name": "Changed by a token", "trigger": {"type": "joined_list", "list_id": weekly.id},
            "steps": [{"delay": "PT0S", "subject": "Hi", "body": "Changed."}]}
    put = api.open(f"/api/automations/{automation.id}", method="PUT", headers=writer_token,
                   json=body)
    assert put.status_code == 403 and put.get_json()["error"] == IS_ON
    assert api.open(f"/api/automations/{automation.id}", method="DELETE",
                    headers=writer_token).status_code == 403
    assert row(automation.id) == before
    assert db.session.scalar(select(func.count()).select_from(AutomationStep)
                             .where(AutomationStep.body == "Changed.")) == 0

    # A sender may change it while it is on, as every owner could before roles.
    sender = signed_in(app, make_person(roles.SENDER))
    again = sender.post(f"/automations/{automation.id}/edit",
                        data=editor_form(sender, automation.id, name="Changed while on"))
    assert again.status_code == 303, again.text
    assert row(automation.id)[:2] == ("Changed while on", "enabled")
