"""A subscriber's own data from the link in their email: "Download my data" holds exactly their
data and nobody else's; "Erase me" is the owner's erase; GETs (mail scanners, previewers)
neither export nor erase; a tampered token gets nothing."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from sqlalchemy import func, or_, select

from broadside.audience.subscribers import personal_data
from broadside.audience.subscribers import service as subscribers
from broadside.audience.unsubscribe import departures
from broadside.campaigns.automations import service as automations
from broadside.core.models import (
    AutomationEntry,
    AutomationMessage,
    Delivery,
    Event,
    MailingList,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from broadside.core.timeutil import utcnow
from tests.helpers import make_token, read_token, start_broadcast
from webapp.extensions import db

PEOPLE = {
    "alice": {"email": "alice@example.com", "name": "Alice Archer",
              "attributes": {"city": "Lyon", "plan": "gold"}},
    "bob": {"email": "bob@example.org", "name": "Bob Brandt",
            "attributes": {"city": "Oslo", "plan": "free"}},
}


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """The export and the erase are plain queries: SQLite proves them (the erase itself is the
    owner's, proven on both engines in tests/webapp/test_subscribers.py)."""
    return request.param


@pytest.fixture
def readers(app, smtp_server, run_worker_burst, postal_address) -> dict[str, Any]:
    """Alice and Bob on the same two lists: a welcome automation each, the same broadcast
    (its subject greets them by name), a confirmation email each, all sent by the real worker;
    and a test send to the owner, which is neither's."""
    weekly, daily = MailingList(name="Weekly Notes"), MailingList(name="Daily Digest")
    db.session.add_all([weekly, daily])
    db.session.commit()
    welcome = automations.enable(db.session, automations.create_automation(
        db.session, automations.parse_input({
            "name": "Welcome series", "trigger": {"type": "joined_list", "list_id": weekly.id},
            "steps": [{"delay": "PT0S", "subject": "Welcome, {{ name }}", "body": "Hi"}]}),
        default_from=app.config["MAIL_FROM"]).id)
    ids = {}
    for key, person in PEOPLE.items():
        subscriber, _ = subscribers.save_subscriber(db.session, **person,
                                                    list_ids=[weekly.id, daily.id], welcome=True)
        ids[key] = subscriber.id
        db.session.add(TransactionalMessage(
            kind="confirmation", to_email=person["email"], subject=f"Confirm, {person['name']}",
            subscriber_id=subscriber.id, status="sent", sent_at=utcnow()))
    db.session.add(TransactionalMessage(kind="test", to_email="owner@example.net",
                                        subject="[Test] Hello Owner", status="sent"))
    db.session.commit()
    broadcast = start_broadcast(app, weekly, subject="Hello {{ name }} from {{ attributes.city }}")
    run_worker_burst()
    received = {m.rcpt_tos[0]: m.message["Subject"] for m in smtp_server.messages}
    return {"ids": ids, "weekly": weekly.id, "daily": daily.id, "broadcast": broadcast.id,
            "welcome": welcome.id, "received": received}


def token_of(readers, who: str) -> str:
    return make_token(readers["ids"][who], readers["weekly"], readers["broadcast"])


def strings(value: Any) -> list[str]:
    """Every key and value in a JSON document, as text."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [] if value is None else [str(value)]


def events_of(subscriber_id: int, kind: str) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Event).where(
        Event.subscriber_id == subscriber_id, Event.kind == kind))


def test_the_download_holds_exactly_that_persons_data_and_nothing_of_the_other(client, readers):
    for me, other in (("alice", "bob"), ("bob", "alice")):
        response = client.post(f"/u/{token_of(readers, me)}/data")
        assert response.status_code == 200
        assert response.mimetype == "application/json"
        assert re.fullmatch(r'attachment; filename="my-data-\d{4}-\d{2}-\d{2}\.json"',
                            response.headers["Content-Disposition"])
        assert response.headers["Cache-Control"] == "no-store"
        assert "Set-Cookie" not in response.headers
        data = json.loads(response.text)
        mine, theirs = PEOPLE[me], PEOPLE[other]

        assert data["person"]["email"] == mine["email"]
        assert data["person"]["name"] == mine["name"]
        assert data["person"]["attributes"] == mine["attributes"]
        assert data["mail_stopped"] is None
        db.session.rollback()
        joined = {row.list_id: row.created_at for row in db.session.execute(
            select(Subscription.list_id, Subscription.created_at)
            .where(Subscription.subscriber_id == readers["ids"][me]))}
        assert [(s["list"], s["status"], s["joined_at"]) for s in data["subscriptions"]] == [
            ("Daily Digest", "active", joined[readers["daily"]].replace(microsecond=0).isoformat() + "Z"),
            ("Weekly Notes", "active", joined[readers["weekly"]].replace(microsecond=0).isoformat() + "Z"),
        ]
        # Their three messages, each as they received it (the broadcast's subject filled in).
        by_type = {m["type"]: m for m in data["messages"]}
        assert sorted(by_type) == ["automation", "confirmation", "newsletter"]
        assert by_type["newsletter"]["subject"] == readers["received"][mine["email"]]
        assert by_type["newsletter"]["subject"] == f"Hello {mine['name']} from {mine['attributes']['city']}"
        assert by_type["newsletter"]["list"] == "Weekly Notes"
        assert by_type["automation"]["subject"] == f"Welcome, {mine['name']}"
        assert by_type["automation"]["automation"] == "Welcome series"
        assert by_type["confirmation"]["subject"] == f"Confirm, {mine['name']}"
        for message in data["messages"]:
            assert message["status"] == "sent" and message["sent_at"].endswith("Z")
        assert data["messages_total"] == data["messages_included"] == 3

        # Field by field: nothing of the other person anywhere, nor the owner's test send.
        theirs_values = [theirs["email"], theirs["name"], "Bob" if other == "bob" else "Alice",
                         *theirs["attributes"].values(), "Owner"]
        for text in strings(data):
            for value in theirs_values:
                assert value not in text, (me, value, text)
        assert events_of(readers["ids"][me], "exported") == 1


def test_a_long_history_is_cut_to_the_newest_messages_and_says_so(app, readers):
    alice = readers["ids"]["alice"]
    claim = read_token(token_of(readers, "alice"))
    assert claim is not None
    data = personal_data.personal_data(db.session, claim, limit=2)
    assert (data["messages_total"], data["messages_included"], len(data["messages"])) == (3, 2, 2)
    assert data["messages_note"].startswith("Only the newest 2 of your 3 messages are listed.")
    dates = [m["sent_at"] for m in data["messages"]]
    assert dates == sorted(dates, reverse=True)
    assert events_of(alice, "exported") == 1


def test_a_tampered_token_gets_no_data_and_erases_nobody(client, readers):
    token = token_of(readers, "alice")
    # Bob's id in Alice's signed payload; Bob's token signed with another key; cut; extended.
    payload, signature = token.split(".")
    claim = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claim[0] = readers["ids"]["bob"]
    forged = base64.urlsafe_b64encode(json.dumps(claim, separators=(",", ":")).encode()
                                      ).decode().rstrip("=") + "." + signature
    other_key = make_token(readers["ids"]["bob"], readers["weekly"], secret_key="not-the-key")
    for bad in (forged, other_key, token[:-3], token + "x"):
        for method, path in (("POST", "/data"), ("GET", "/erase"), ("POST", "/erase")):
            response = client.open(f"/u/{bad}{path}", method=method)
            assert response.status_code == 400, (bad, method, path)
            assert "This link does not work" in response.text
            for person in PEOPLE.values():
                assert person["email"] not in response.text
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Subscriber)) == 2
    assert db.session.scalar(select(func.count()).select_from(Event)
                             .where(Event.kind.in_(("exported", "erased")))) == 0


def test_scanners_following_links_neither_export_nor_erase(app, client, readers):
    token, alice = token_of(readers, "alice"), readers["ids"]["alice"]
    prefs = client.get(f"/u/{token}/preferences")
    assert prefs.status_code == 200
    assert f'action="/u/{token}/data"' in prefs.text and 'method="post"' in prefs.text
    assert f'href="/u/{token}/erase"' in prefs.text

    for _ in range(3):  # a scanner, a previewer, the reader: GETs only
        scanned = client.get(f"/u/{token}/data")
        assert scanned.status_code == 405 and "Set-Cookie" not in scanned.headers
        confirm = client.get(f"/u/{token}/erase")
        assert confirm.status_code == 200 and "cannot be undone" in confirm.text
        assert "Set-Cookie" not in confirm.headers
    assert events_of(alice, "exported") == 0
    db.session.rollback()
    assert db.session.get(Subscriber, alice) is not None

    app.config["PERSONAL_DATA_EXPORT_LIMIT"] = 1  # read per request
    assert client.post(f"/u/{token}/data").status_code == 200
    again = client.post(f"/u/{token}/data")
    assert again.status_code == 429 and "Wait a minute" in again.text
    assert events_of(alice, "exported") == 1


def traces(subscriber_id: int, email: str) -> dict[str, int]:
    """What is left that names this person, table by table."""
    db.session.rollback()
    count = lambda model, *where: db.session.scalar(  # noqa: E731
        select(func.count()).select_from(model).where(*where))
    return {
        "subscriber": count(Subscriber, or_(Subscriber.id == subscriber_id,
                                            Subscriber.email == email)),
        "subscriptions": count(Subscription, Subscription.subscriber_id == subscriber_id),
        "events": count(Event, Event.subscriber_id == subscriber_id),
        "deliveries": count(Delivery, Delivery.subscriber_id == subscriber_id),
        "automation messages": count(AutomationMessage,
                                     AutomationMessage.subscriber_id == subscriber_id),
        "automation entries": count(AutomationEntry,
                                    AutomationEntry.subscriber_id == subscriber_id),
        "transactional": count(TransactionalMessage, or_(
            TransactionalMessage.subscriber_id == subscriber_id,
            TransactionalMessage.to_email == email)),
    }


def kept_counts(readers) -> tuple[int, ...]:
    """What an erase keeps (the counts stay true)."""
    db.session.rollback()
    return (
        db.session.scalar(select(func.count()).select_from(Delivery)
                          .where(Delivery.broadcast_id == readers["broadcast"])),
        db.session.scalar(select(func.count()).select_from(AutomationMessage)
                          .where(AutomationMessage.automation_id == readers["welcome"])),
        db.session.scalar(select(func.count()).select_from(TransactionalMessage)
                          .where(TransactionalMessage.kind == "test")),
    )


def test_erase_me_is_the_owners_erase_and_the_link_then_says_the_address_is_gone(client, readers):
    ids, token = readers["ids"], token_of(readers, "alice")
    before = {who: traces(ids[who], PEOPLE[who]["email"]) for who in PEOPLE}
    assert all(before[who]["deliveries"] == 1 and before[who]["events"] > 0 for who in PEOPLE)
    kept = kept_counts(readers)
    # Bob, erased by the owner (first: the test client's requests share this app context,
    # whose cached settings row the owner's erase would detach).
    subscribers.erase(db.session, ids["bob"])

    confirm = client.get(f"/u/{token}/erase")
    assert PEOPLE["alice"]["email"] in confirm.text
    erased = client.post(f"/u/{token}/erase")
    assert erased.status_code == 200
    assert "This address is no longer on our lists" in erased.text
    assert PEOPLE["alice"]["email"] in erased.text
    assert "Set-Cookie" not in erased.headers

    # The same rows went for both, the same rows stayed.
    after = {who: traces(ids[who], PEOPLE[who]["email"]) for who in PEOPLE}
    assert after["alice"] == after["bob"] == dict.fromkeys(before["alice"], 0)
    assert kept_counts(readers) == kept
    db.session.rollback()
    # The one difference: a record that an erase was asked for, naming nobody.
    [record] = db.session.scalars(select(Event).where(Event.kind == "erased")).all()
    assert record.subscriber_id is None and record.list_id == readers["weekly"]
    assert "alice" not in json.dumps([record.detail, record.data]).lower()
    # The owner sees it among the list's departures, as someone erased.
    [shown] = [d for d in departures.recent_for_list(db.session, readers["weekly"])
               if d.kind == "erased"]
    assert shown.email is None and shown.subscriber_id is None

    # Every page of the link now says so, plainly, whatever is asked of it.
    for method, path in (("GET", ""), ("POST", ""), ("GET", "/preferences"),
                         ("POST", "/preferences"), ("GET", "/erase"), ("POST", "/data")):
        response = client.open(f"/u/{token}{path}", method=method)
        assert response.status_code == 404, (method, path)
        assert "This address is no longer on our lists" in response.text, (method, path)
        assert "This link does not work" not in response.text
    again = client.post(f"/u/{token}/erase")  # a second press, a reload
    assert again.status_code == 200 and "This address is no longer on our lists" in again.text
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Event)
                             .where(Event.kind == "erased")) == 1
