"""Automations follow Settings, through the real worker, Redis and SMTP server, on SQLite and
PostgreSQL: a message that becomes due after the sender, postal address or logo changed carries
the new ones, the one sent before keeps its revision; without a postal address an automation's
messages are held (pending, not sent), and adding the address releases them."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from broadside.core.models import (
    Automation,
    AutomationMessage,
    AutomationRevision,
    AutomationStep,
)
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from tests.design_images import png
from tests.helpers import make_list
from tests.webapp.test_automations_follow_settings import save_sender
from tests.webapp.test_design import upload
from webapp.extensions import db


def a_list() -> int:
    return make_list(db.session, 0).id


def messages(automation_id):
    db.session.expire_all()
    return db.session.execute(
        select(AutomationMessage.position, AutomationMessage.status, AutomationMessage.revision_id,
               AutomationMessage.reason)
        .where(AutomationMessage.automation_id == automation_id)
        .order_by(AutomationMessage.position)).all()


def two_steps(app, list_id, *, enable=True):
    data = automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": list_id},
        "steps": [{"delay": "PT0S", "subject": "One", "body": "First."},
                  {"delay": "PT1H", "subject": "Two", "body": "Second."}]})
    automation = automations.create_automation(db.session, data,
                                               default_from=app.config["MAIL_FROM"])
    return automations.enable(db.session, automation.id) if enable else automation


def make_due(automation_id, position):
    db.session.execute(update(AutomationMessage).where(
        AutomationMessage.automation_id == automation_id, AutomationMessage.position == position)
        .values(due_at=utcnow() - timedelta(seconds=1)))
    db.session.commit()


def test_the_next_message_carries_the_new_sender_address_and_logo_and_the_sent_one_keeps_its_own(
        app, logged_in_client, smtp_server, run_worker_burst):
    client = logged_in_client
    assert save_sender(client, sender_name="Old Name", sender_email="old@example.com",
                       postal_address="1 Old Road").status_code == 303
    list_id = a_list()
    automation = two_steps(app, list_id)
    subscribers.save_subscriber(db.session, email="ada@example.com", name="Ada",
                                list_ids=[list_id], welcome=True)
    run_worker_burst()
    [first] = smtp_server.wait_for(1)
    assert first.message["From"] == "Old Name <old@example.com>"
    assert "1 Old Road" in first.message.as_string()
    sent_revision = messages(automation.id)[0].revision_id

    # The owner changes the sender, the postal address and the logo after the automation was saved.
    saved = save_sender(client, sender_name="New Name", sender_email="new@example.com",
                        postal_address="2 New Street")
    assert saved.status_code == 303
    page = client.get("/settings/")
    assert "The next messages of the automation “Welcome” carry it now." in page.text
    assert upload(client, png(40, 20)).status_code == 303
    logo_file = get_settings(db.session).logo_file
    assert logo_file

    make_due(automation.id, 2)
    run_worker_burst()
    smtp_server.wait_for(2)
    second = smtp_server.messages[1].message
    assert second["Subject"] == "Two"
    assert second["From"] == "New Name <new@example.com>"
    wire = second.as_string()
    assert "2 New Street" in wire and "1 Old Road" not in wire
    assert logo_file in wire  # the logo's image, now in the layout

    # What the first person received stays reconstructible: its revision is the one it was sent with.
    rows = messages(automation.id)
    assert [(r.position, r.status) for r in rows] == [(1, "sent"), (2, "sent")]
    assert rows[0].revision_id == sent_revision
    kept = db.session.get(AutomationRevision, sent_revision)
    assert (kept.from_name, kept.from_email, kept.postal_address) == (
        "Old Name", "old@example.com", "1 Old Road")
    assert logo_file not in kept.html_template
    second_revision = db.session.get(AutomationRevision, rows[1].revision_id)
    assert second_revision.postal_address == "2 New Street"
    assert logo_file in second_revision.html_template
    # Each step's current revision is the newest; step 1's next messages carry the new values too.
    step_one = db.session.scalar(select(AutomationStep).where(
        AutomationStep.automation_id == automation.id, AutomationStep.position == 1))
    current = db.session.get(AutomationRevision, step_one.revision_id)
    assert current.id != sent_revision and current.from_email == "new@example.com"


def test_messages_without_a_postal_address_are_held_until_it_is_added(
        app, logged_in_client, smtp_server, run_worker_burst):
    """An installation upgrading: an automation enabled before the rule, its steps frozen with
    no postal address. Its messages wait, pending, with the reason on the page; adding the
    address in Settings sends them, with it."""
    client = logged_in_client
    list_id = a_list()
    automation = two_steps(app, list_id, enable=False)
    # Enabled as an older Broadside did, with no address to print.
    db.session.execute(update(Automation).where(Automation.id == automation.id)
                       .values(status="enabled"))
    db.session.commit()
    subscribers.save_subscriber(db.session, email="ada@example.com", name="Ada",
                                list_ids=[list_id], welcome=True)
    run_worker_burst()
    assert smtp_server.messages == []
    assert [(r.position, r.status, r.reason) for r in messages(automation.id)] == [
        (1, "pending", None), (2, "pending", None)]
    page = client.get("/automations/")
    assert f'id="held-{automation.id}"' in page.text
    assert "Held: add your postal address in Settings." in page.text

    assert save_sender(client, postal_address="Acme Ltd\n1 Main Street").status_code == 303
    assert "Held:" not in client.get("/automations/").text
    run_worker_burst()
    [welcome] = smtp_server.wait_for(1)
    assert welcome.message["Subject"] == "One"
    assert "1 Main Street" in welcome.message.as_string()
    assert [(r.position, r.status) for r in messages(automation.id)] == [(1, "sent"), (2, "pending")]


def test_the_worker_gives_revisions_frozen_before_the_address_was_added_the_one_in_force(
        app, smtp_server, run_worker_burst, postal_address):
    """Upgrading with the address already in Settings but the steps frozen without it (saved
    before it was added): the worker's maintenance refreezes them and the held welcome goes
    out with the address, no owner action needed."""
    list_id = a_list()
    automation = two_steps(app, list_id)
    # As an older Broadside froze them: no postal address on any revision.
    db.session.execute(update(AutomationRevision).values(postal_address=""))
    db.session.commit()
    subscribers.save_subscriber(db.session, email="ada@example.com", name="Ada",
                                list_ids=[list_id], welcome=True)
    held = messages(automation.id)[0].revision_id
    run_worker_burst()
    [welcome] = smtp_server.wait_for(1)
    assert "1 Main Street" in welcome.message.as_string()
    rows = messages(automation.id)
    assert rows[0].status == "sent" and rows[0].revision_id != held
    assert db.session.get(AutomationRevision, rows[0].revision_id).postal_address == postal_address
