"""What the owner and the subscriber see of a message whose content was removed, on SQLite and
PostgreSQL: the subscriber's data export and the person's page say "content removed after N
days" with its SHA-256 and revision; the Settings field and its refusals; the revisions in
flight on the System page (with the warning for an outdated one) and on /metrics."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import update

from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.automations import service as automations
from broadside.core.models import (
    AutomationMessage,
    AutomationRevision,
    AutomationStep,
    MailingList,
    SiteSettings,
    TransactionalMessage,
)
from broadside.core.models.transactional import TransactionalTemplate, TransactionalTemplateRevision
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.delivery.content_retention import canonical_sha256, remove_due
from tests.helpers import csrf_token_from, make_token
from tests.webapp.test_metrics import scrape, value
from webapp.extensions import db


def a_template(name: str, *, revisions: int, old_days: float = 0) -> list[int]:
    """A template with `revisions` frozen revisions, the first `old_days` older than the rest."""
    template = TransactionalTemplate(name=name, subject=name, body="Paid")
    db.session.add(template)
    db.session.flush()
    ids = []
    for n in range(revisions):
        revision = TransactionalTemplateRevision(
            template_id=template.id, subject=f"{name} {n}", body_markdown="Paid",
            html_template="<p>Paid</p>", text_template="Paid", from_email="shop@example.com",
            created_at=utcnow() - timedelta(days=old_days if n == 0 else 0))
        db.session.add(revision)
        db.session.flush()
        ids.append(revision.id)
    db.session.commit()
    return ids


def a_person() -> tuple[int, int]:
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.commit()
    person, _ = subscribers.save_subscriber(db.session, email="ana@example.com", name="Ana",
                                            list_ids=[weekly.id])
    return person.id, weekly.id


def removed_messages(person_id: int, days: int) -> dict[str, int]:
    """A confirmation and a template message to Ana, `days` old, their content then removed;
    and a test send to her sent a moment ago, kept."""
    [revision] = a_template("Receipt", revisions=1)
    created = utcnow() - timedelta(days=days, minutes=5)
    confirmation = TransactionalMessage(
        kind="confirmation", to_email="ana@example.com", subscriber_id=person_id,
        subject="Confirm, Ana", html="<p>Confirm</p>", text="Confirm", status="sent",
        created_at=created, sent_at=created)
    receipt = TransactionalMessage(
        kind="template", to_email="ana@example.com", subject="Your receipt, Ana",
        html="<p>12 €</p>", text="12 €", status="sent", created_at=created, sent_at=created,
        template_revision_id=revision)
    kept = TransactionalMessage(kind="test", to_email="ana@example.com", subject="[Test] Kept",
                                status="sent", sent_at=utcnow())
    db.session.add_all([confirmation, receipt, kept])
    db.session.commit()
    assert remove_due(db.session).removed == 2
    return {"confirmation": confirmation.id, "receipt": receipt.id, "revision": revision}


def test_the_export_says_the_content_was_removed_with_its_hash_and_revision(app, client):
    person_id, list_id = a_person()
    get_settings(db.session).content_retention_days = 45
    db.session.commit()
    ids = removed_messages(person_id, days=45)

    response = client.post(f"/u/{make_token(person_id, list_id)}/data")

    assert response.status_code == 200
    messages = json.loads(response.text)["messages"]
    by_subject = {m["subject"]: m for m in messages if m["subject"]}
    assert "[Test] Kept" in by_subject and "content" not in by_subject["[Test] Kept"]
    gone = [m for m in messages if m["subject"] is None]
    assert len(gone) == 2
    for message in gone:
        assert message["content"] == "content removed after 45 days"
        assert message["status"] == "sent" and message["sent_at"]
        assert message["content_removed_at"] and "netstring" in message["content_hash_form"]
    receipt = next(m for m in gone if "template_revision_id" in m)
    assert receipt["template_revision_id"] == ids["revision"]
    assert receipt["content_sha256"] == canonical_sha256("Your receipt, Ana", "<p>12 €</p>", "12 €")
    assert "Your receipt" not in response.text and "12 €" not in response.text


def test_the_persons_page_says_the_content_was_removed(app, logged_in_client):
    person_id, _ = a_person()
    ids = removed_messages(person_id, days=30)

    page = logged_in_client.get(f"/subscribers/{person_id}")

    assert page.status_code == 200
    text = page.text
    assert text.count("content removed after 30 days") == 2
    assert canonical_sha256("Confirm, Ana", "<p>Confirm</p>", "Confirm") in text
    assert f"template revision {ids['revision']}" in text
    assert "[Test] Kept" in text and "Your receipt" not in text
    assert "Their content is kept for 30 days" in text


def test_the_settings_field_refuses_what_is_not_1_to_3650_days_and_saves_the_rest(
        app, logged_in_client):
    client = logged_in_client
    page = client.get("/settings/")
    assert "Keep the content of transactional and test messages for" in page.text
    assert '<strong id="content-days">30 days</strong>' in page.text
    token = csrf_token_from(page.text)
    for bad in ("0", "3651", "soon", "", "-3", "1.5", "99999999999"):
        refused = client.post("/settings/content", data={"csrf_token": token, "content_days": bad})
        assert refused.status_code == 422, bad
        assert "Give a whole number from 1 to 3650" in refused.text
    db.session.rollback()
    assert get_settings(db.session).content_retention_days == 30  # nothing half-written
    saved = client.post("/settings/content", data={"csrf_token": token, "content_days": " 7 "})
    assert saved.status_code == 303
    db.session.rollback()
    assert db.session.get(SiteSettings, 1).content_retention_days == 7
    shown = client.get("/settings/").text
    assert '<strong id="content-days">7 days</strong>' in shown and 'value="7"' in shown


def a_step_with_two_revisions(app, list_id: int) -> tuple[int, int, int]:
    """An automation whose one step was saved twice (two revisions through the service), the
    first frozen two days before the second. Returns (step, old revision, new revision)."""
    data = {"name": "Welcome", "trigger": {"type": "joined_list", "list_id": list_id},
            "steps": [{"delay": "PT0S", "subject": "Hello", "body": "Hi"}]}
    automation = automations.create_automation(db.session, automations.parse_input(data),
                                               default_from=app.config["MAIL_FROM"])
    step = automations.steps_of(db.session, automation.id)[0]
    old = step.revision_id
    data["steps"][0]["subject"] = "Hello again"
    automations.update_automation(db.session, automation.id, automations.parse_input(data),
                                  default_from=app.config["MAIL_FROM"])
    db.session.expire_all()
    new = db.session.get(AutomationStep, step.id).revision_id
    assert old is not None and new is not None and new != old
    db.session.execute(update(AutomationRevision).where(AutomationRevision.id == old)
                       .values(created_at=utcnow() - timedelta(days=2)))
    db.session.commit()
    return step.id, old, new


def sent_from(step_id: int, revision_id: int, people: list[int], automation_id: int) -> None:
    now = utcnow()
    db.session.add_all([AutomationMessage(
        automation_id=automation_id, step_id=step_id, position=1, revision_id=revision_id,
        subscriber_id=person, status="sent", due_at=now - timedelta(minutes=20),
        sent_at=now - timedelta(minutes=10)) for person in people])
    db.session.commit()


def test_the_system_page_and_metrics_show_revisions_in_flight_and_warn_of_an_old_one(
        app, logged_in_client):
    person_id, list_id = a_person()
    step_id, old, new = a_step_with_two_revisions(app, list_id)
    automation_id = db.session.get(AutomationStep, step_id).automation_id
    # Three people got the old revision in the last hour, one the new; one got the old two
    # hours ago (not in flight).
    people = [person_id] + [subscribers.save_subscriber(
        db.session, email=f"p{n}@example.com", list_ids=[list_id])[0].id for n in range(4)]
    sent_from(step_id, old, people[:3], automation_id)
    sent_from(step_id, new, people[3:4], automation_id)
    db.session.add(AutomationMessage(
        automation_id=automation_id, step_id=step_id, position=1, revision_id=old,
        subscriber_id=people[4], status="sent", due_at=utcnow() - timedelta(hours=3),
        sent_at=utcnow() - timedelta(hours=2)))
    # A template: its current revision sends (no warning), and an older one only hours older.
    fresh, newest = a_template("Receipt", revisions=2, old_days=0.5)
    for revision in (fresh, newest, newest):
        db.session.add(TransactionalMessage(
            kind="template", to_email="ana@example.com", subject="Receipt", status="sent",
            sent_at=utcnow() - timedelta(minutes=5), template_revision_id=revision))
    db.session.commit()

    page = logged_in_client.get("/system/")
    assert page.status_code == 200
    text = page.text
    assert 'id="outdated-revisions"' in text
    warning = text.split('id="outdated-revisions"')[1].split("</div>")[0]
    assert "Welcome, step 1" in warning and f"revision {old}" in warning
    assert "2 days before the newest" in warning and f"revision {new}" in warning
    assert "Receipt" not in warning  # only hours older: no warning
    table = text.split('id="revisions-table"')[1].split("</table>")[0]
    assert "Welcome, step 1" in table and "Receipt" in table

    samples = scrape(logged_in_client)
    name = "broadside_revision_messages_sent_last_hour"
    assert value(samples, name, kind="automation_step", revision_id=str(old),
                 source_id=str(step_id)) == 3
    assert value(samples, name, kind="automation_step", revision_id=str(new),
                 source_id=str(step_id)) == 1
    template_id = db.session.get(TransactionalTemplateRevision, fresh).template_id
    assert value(samples, name, kind="template", revision_id=str(newest),
                 source_id=str(template_id)) == 2
    assert value(samples, name, kind="template", revision_id=str(fresh),
                 source_id=str(template_id)) == 1
    assert value(samples, "broadside_revisions_outdated_in_flight") == 1


def test_the_system_page_without_any_revision_in_flight(app, logged_in_client):
    text = logged_in_client.get("/system/").text
    assert "Nothing was sent from an automation step or a transactional template in the last hour" in text
    assert 'id="outdated-revisions"' not in text
    assert value(scrape(logged_in_client), "broadside_revisions_outdated_in_flight") == 0


def test_recent_errors_say_a_failed_messages_content_was_removed(app, logged_in_client):
    created = utcnow() - timedelta(days=40)
    failed = TransactionalMessage(
        kind="test", to_email="ana@example.com", subject="[Test] For Ana only", html="<p>x</p>",
        text="x", status="failed", attempts=1, reason="550 5.1.1 no such user",
        created_at=created)
    db.session.add(failed)
    db.session.commit()
    assert remove_due(db.session).removed == 1
    errors = logged_in_client.get("/system/").text.split('id="error-table"')[1].split("</table>")[0]
    assert "content removed after 40 days" in errors and "550 5.1.1 no such user" in errors
    assert "For Ana only" not in errors
