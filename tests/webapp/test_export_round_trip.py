"""An export says where each person stands (status on the list with when and why, suppression,
when they joined), and importing it back changes nothing: nobody who left is put back, nobody
is unsuppressed, no date, name or attribute moves, and nobody is emailed or welcomed."""

import csv
import io

import pytest
from sqlalchemy import func, select

from broadside.audience import lists as lists
from broadside.audience.subscribers import service
from broadside.audience.unsubscribe.suppression import suppress
from broadside.campaigns.automations import service as automations
from broadside.core.models import (
    AutomationEntry,
    AutomationMessage,
    Event,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from broadside.core.timeutil import utcnow
from tests.webapp.import_steps import last_import, statuses, upload
from webapp.extensions import db

LIST_HEADER = ["email", "name", "status", "joined_at", "confirmed_at", "unsubscribed_at",
               "unsubscribe_source", "suppression", "suppressed_at", "locale", "timezone"]


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def everything() -> dict:
    """Every subscriber and subscription as stored, and what was sent or queued."""
    db.session.expire_all()
    people = {s.email: (s.name, s.attributes, s.created_at, s.suppression, s.suppressed_at,
                        s.suppression_detail) for s in db.session.scalars(select(Subscriber))}
    subscriptions = {
        (email, row.list_id): (row.status, row.created_at, row.confirmed_at,
                               row.confirmation_sent_at, row.unsubscribed_at,
                               row.unsubscribe_source)
        for email, row in db.session.execute(
            select(Subscriber.email, Subscription)
            .join(Subscription, Subscription.subscriber_id == Subscriber.id))
    }
    sent = {model.__name__: db.session.scalar(select(func.count()).select_from(model))
            for model in (TransactionalMessage, AutomationEntry, AutomationMessage)}
    return {"people": people, "subscriptions": subscriptions, "sent": sent}


@pytest.fixture
def audience(app, postal_address):
    """A list with one person in each state an owner meets, and attributes that need care."""
    weekly = lists.create_list(db.session, "Weekly")
    other = lists.create_list(db.session, "Other")
    # An enabled welcome series: nobody may enter it again.
    series = automations.parse_input({
        "name": "Hello", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Hello", "body": "Glad you are here."}]})
    automations.enable(db.session, automations.create_automation(
        db.session, series, default_from=app.config["MAIL_FROM"]).id)

    def person(email, name="", attributes=None, list_ids=(weekly.id,)):
        return service.save_subscriber(db.session, email=email, name=name,
                                       attributes=attributes, list_ids=list(list_ids))[0].id

    # Values the API may store that a CSV can only spell as text: they stay as they are.
    person("ann@example.com", "Ann Archer", {"city": "Paris", "plan": "gold", "age": 42,
                                             "vip": True, "tags": ["a", "b"], "score": 1.5})
    # Attributes named like the export's own columns, and cells that look like formulas,
    # one of them already starting with an apostrophe.
    person("cy@example.com", "'=not a formula", {"status": "vip", "joined_at": "2019",
                                                  "city": "=HYPERLINK(\"x\")", "plan": "-"})
    left = person("left@example.com", "Left Early", {"city": "Rome"})
    service.unsubscribe(db.session, left, weekly.id, source="one-click")
    bounced = person("bounced@example.com", "Bounce", {"plan": "free"})
    suppress(db.session, bounced, "bounced", "550 no such user")
    blocked = person("blocked@example.com", list_ids=(weekly.id, other.id))
    suppress(db.session, blocked, "blocked")
    pending = Subscriber(email="pending@example.com", name="Pending", attributes={})
    db.session.add(pending)
    db.session.flush()
    # As the sign-up form leaves them: asked, not yet confirmed.
    db.session.add(Subscription(subscriber_id=pending.id, list_id=weekly.id, status="unconfirmed",
                                confirmation_sent_at=utcnow()))
    db.session.commit()
    return weekly.id, other.id


def test_a_list_export_says_where_each_person_stands(logged_in_client, audience):
    weekly, _ = audience
    text = logged_in_client.get(f"/subscribers/export.csv?list={weekly}").get_data(as_text=True)
    rows = {r["email"]: r for r in read_csv(text)}
    header = next(csv.reader(io.StringIO(text)))
    assert header[:len(LIST_HEADER)] == LIST_HEADER
    assert set(header[len(LIST_HEADER):]) == {"city", "plan", "age", "vip", "tags", "score",
                                              "attributes.status", "attributes.joined_at"}
    ann = rows["ann@example.com"]
    assert (ann["age"], ann["vip"], ann["tags"], ann["score"]) == ("42", "true", '["a", "b"]',
                                                                   "1.5")
    assert {e: r["status"] for e, r in rows.items()} == {
        "ann@example.com": "active", "cy@example.com": "active", "left@example.com":
        "unsubscribed", "bounced@example.com": "active", "blocked@example.com": "active",
        "pending@example.com": "unconfirmed"}
    left = rows["left@example.com"]
    assert left["unsubscribe_source"] == "one-click" and left["unsubscribed_at"].endswith("Z")
    assert left["joined_at"] <= left["unsubscribed_at"]
    assert (rows["bounced@example.com"]["suppression"], rows["blocked@example.com"]["suppression"],
            rows["ann@example.com"]["suppression"]) == ("bounced", "blocked", "")
    assert rows["bounced@example.com"]["suppressed_at"].endswith("Z")
    assert rows["ann@example.com"]["unsubscribed_at"] == rows["ann@example.com"]["suppressed_at"] == ""
    cy = rows["cy@example.com"]
    assert (cy["name"], cy["city"], cy["plan"]) == ("''=not a formula", "'=HYPERLINK(\"x\")", "'-")
    assert (cy["attributes.status"], cy["attributes.joined_at"]) == ("vip", "2019")


def test_a_view_export_lists_each_persons_lists(logged_in_client, audience):
    text = logged_in_client.get("/subscribers/export.csv?q=blocked").get_data(as_text=True)
    [row] = read_csv(text)
    assert row["lists"] == "Other: active; Weekly: active"
    assert row["suppression"] == "blocked" and row["joined_at"].endswith("Z")


@pytest.mark.parametrize("consent", ["opted_in", "confirm"])
def test_importing_a_list_export_back_changes_nothing(logged_in_client, audience, consent,
                                                      run_worker_burst):
    weekly, _ = audience
    exported = logged_in_client.get(f"/subscribers/export.csv?list={weekly}").get_data()
    before = everything()
    events = db.session.scalar(select(func.count()).select_from(Event))
    # The page's defaults: the welcome box unticked; the consent is the owner's to choose.
    response = upload(logged_in_client, weekly, exported, "subscribers-weekly.csv", consent)
    assert response.status_code == 303
    run_worker_burst()  # whatever the import left for the worker (its confirmation step)
    record = last_import()
    assert (record.status, record.rejected, record.imported) == ("done", 0, 0)
    assert (record.skipped_unsubscribed, record.skipped_suppressed) == (1, 2)
    assert everything() == before
    assert db.session.scalar(select(func.count()).select_from(Event)) == events


def test_an_export_imported_into_another_list_puts_back_nobody_who_left(logged_in_client,
                                                                        audience):
    weekly, _ = audience
    exported = logged_in_client.get(f"/subscribers/export.csv?list={weekly}").get_data()
    fresh = lists.create_list(db.session, "Fresh").id
    upload(logged_in_client, fresh, exported, "subscribers-weekly.csv")
    record = last_import()
    assert (record.imported, record.skipped_unsubscribed, record.skipped_suppressed,
            record.rejected) == (3, 1, 2, 0)
    assert statuses(fresh) == {"ann@example.com": "active", "cy@example.com": "active",
                               "pending@example.com": "active"}
    # The export's own columns are read, never kept as attributes.
    cy = service.find_by_email(db.session, "cy@example.com")
    assert cy.attributes == {"status": "vip", "joined_at": "2019", "city": "=HYPERLINK(\"x\")",
                             "plan": "-"}
    assert cy.name == "'=not a formula"


def test_a_status_the_import_does_not_know_rejects_the_row_with_the_reason(logged_in_client,
                                                                           audience):
    weekly, _ = audience
    upload(logged_in_client, weekly,
           b"email,status,suppression\nnew@example.com,subscribed,\nnew2@example.com,,spam\n"
           b"new3@example.com,Active,\n")
    record = last_import()
    assert (record.imported, record.rejected) == (1, 2)
    page = logged_in_client.get(f"/subscribers/imports/{record.id}").text
    assert "the status column says &#39;subscribed&#39;" in page
    assert "call the column &#39;attributes.status&#39;" in page
    assert "the suppression column says &#39;spam&#39;" in page
