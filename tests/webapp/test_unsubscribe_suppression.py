"""Bounces, complaints and suppression (domain functions), and the owner's pages for them."""

from __future__ import annotations

import pytest
from flask import render_template_string
from flask_login import login_user
from sqlalchemy import select

from broadside.audience.unsubscribe import service
from broadside.core.errors import Conflict, ValidationError
from broadside.core.models import Delivery, MailingList, Subscriber, TransactionalMessage
from broadside.mail.message_refs import delivery_message_id
from tests.helpers import csrf_token_from, make_token
from tests.webapp.test_unsubscribe import add_broadcast, add_list, add_subscriber, events
from webapp.extensions import db


def subscriber(subscriber_id: int) -> Subscriber:
    db.session.rollback()
    return db.session.scalars(select(Subscriber).where(Subscriber.id == subscriber_id)).one()


def add_delivery(broadcast_id: int, subscriber_id: int, status="sent") -> int:
    delivery = Delivery(broadcast_id=broadcast_id, subscriber_id=subscriber_id, status=status)
    db.session.add(delivery)
    db.session.commit()
    return delivery.id


def our_id(delivery_id: int, broadcast_id: int) -> str:
    """The Message-ID the worker sent it with (not stored: it names the row)."""
    return delivery_message_id(delivery_id, broadcast_id, "news@broadside.test")


# ------------------------------------------------------------------ bounces

def test_hard_bounce_suppresses_for_every_list_and_records_why(app):
    weekly, daily = add_list("Weekly"), add_list("Daily")
    alice = add_subscriber("alice@example.com", {weekly: "active", daily: "active"})

    outcome = service.record_bounce(db.session, "Alice@Example.com", "hard",
                                    detail="550 5.1.1 user unknown")

    assert outcome.suppressed and outcome.subscriber_id == alice
    row = subscriber(alice)
    assert row.suppression == "bounced"
    assert row.suppressed_at is not None
    assert row.suppression_detail == "hard bounce: 550 5.1.1 user unknown"
    assert [(e.kind, e.detail) for e in events(subscriber_id=alice)] == [
        ("bounce", "hard bounce: 550 5.1.1 user unknown"),
        ("suppressed", "bounced: hard bounce: 550 5.1.1 user unknown"),
    ]


def test_a_repeated_bounce_is_recorded_but_suppresses_once(app):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    first = service.record_bounce(db.session, "alice@example.com", "hard")
    second = service.record_bounce(db.session, "alice@example.com", "hard")
    assert (first.suppressed, second.suppressed) == (True, False)
    assert [e.kind for e in events(subscriber_id=alice)] == ["bounce", "suppressed", "bounce"]


def test_soft_bounces_suppress_after_three_in_a_row_and_a_delivery_resets_the_count(app):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    for _ in range(2):
        assert not service.record_bounce(db.session, "alice@example.com", "soft").suppressed
    # A successful delivery in between: the bounces are no longer "in a row".
    assert service.reset_soft_bounces(db.session, alice)
    db.session.commit()
    assert subscriber(alice).soft_bounce_count == 0

    counts = [service.record_bounce(db.session, "alice@example.com", "soft", detail="mailbox full")
              for _ in range(3)]
    assert [c.soft_bounce_count for c in counts] == [1, 2, 3]
    assert [c.suppressed for c in counts] == [False, False, True]
    row = subscriber(alice)
    assert row.suppression == "bounced"
    assert row.suppression_detail == "3 soft bounces in a row; the last: mailbox full"


def test_complaint_outranks_a_bounce_and_a_bounce_never_replaces_a_complaint(app):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    bob = add_subscriber("bob@example.com", {weekly: "active"})

    service.record_bounce(db.session, "alice@example.com", "hard")
    assert service.record_complaint(db.session, "alice@example.com", detail="abuse").suppressed
    assert subscriber(alice).suppression == "complained"

    service.record_complaint(db.session, "bob@example.com")
    assert not service.record_bounce(db.session, "bob@example.com", "hard").suppressed
    assert subscriber(bob).suppression == "complained"
    assert subscriber(bob).suppression_detail == "spam complaint"


@pytest.mark.parametrize("brackets", [True, False])
def test_an_event_links_to_the_delivery_by_message_id(app, brackets):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    bob = add_subscriber("bob@example.com", {weekly: "active"})
    broadcast = add_broadcast(weekly)
    delivery = add_delivery(broadcast, alice)
    bobs = add_delivery(broadcast, bob)
    reported = our_id(delivery, broadcast) if brackets else our_id(delivery, broadcast).strip("<>")

    outcome = service.record_complaint(db.session, "alice@example.com", message_ids=[reported])

    assert outcome.delivery_id == delivery
    events_ = events(subscriber_id=alice)
    assert {(e.kind, e.delivery_id, e.broadcast_id, e.list_id) for e in events_} == {
        ("complaint", delivery, broadcast, weekly), ("suppressed", delivery, broadcast, weekly),
    }
    # Bob's Message-ID reported for Alice links to nothing: a delivery is never someone else's.
    service.record_bounce(db.session, "alice@example.com", "soft",
                          message_ids=[our_id(bobs, broadcast)])
    assert events("bounce")[0].delivery_id is None


def test_an_event_links_to_a_transactional_message_by_message_id(app):
    weekly = add_list()
    add_subscriber("alice@example.com", {weekly: "unconfirmed"})
    message = TransactionalMessage(kind="confirmation", to_email="alice@example.com",
                                   subject="Confirm", status="sent", message_id="<t1@b.test>")
    db.session.add(message)
    db.session.commit()
    service.record_bounce(db.session, "alice@example.com", "hard", message_ids=["t1@b.test"])
    [bounce] = events("bounce")
    assert bounce.data["transactional_message_id"] == message.id
    assert bounce.data["message_id"] == "<t1@b.test>"


def test_an_unknown_address_changes_nothing(app):
    add_subscriber("alice@example.com")
    assert service.record_bounce(db.session, "nobody@example.com", "hard") is None
    assert service.record_complaint(db.session, "nobody@example.com") is None
    assert events() == []


# ------------------------------------------------------------------ lifting

def test_lifting_a_suppression_records_who_and_why_and_resets_the_count(app):
    alice = add_subscriber("alice@example.com", soft_bounce_count=2)
    service.record_bounce(db.session, "alice@example.com", "soft")
    assert service.lift_suppression(db.session, alice, "They fixed their mailbox") == "bounced"
    row = subscriber(alice)
    assert (row.suppression, row.suppressed_at, row.suppression_detail, row.soft_bounce_count) == (
        None, None, None, 0)
    lifted = events("unsuppressed")[0]
    assert lifted.detail == "They fixed their mailbox"
    assert lifted.data["was"] == "bounced"
    with pytest.raises(Conflict):
        service.lift_suppression(db.session, alice, "again")
    with pytest.raises(ValidationError):
        service.suppress(db.session, alice, "grumpy", "")
    assert len(events("unsuppressed")) == 1


def test_lift_page_needs_the_owner(client):
    alice = add_subscriber("alice@example.com", suppression="bounced")
    assert client.get(f"/subscribers/{alice}/suppression/lift").status_code == 302
    # Refused either by the CSRF check (it runs first) or by the login redirect.
    assert client.post(f"/subscribers/{alice}/suppression/lift").status_code in (302, 400)
    assert subscriber(alice).suppression == "bounced"


def test_owner_lifts_with_a_confirmation_step_and_csrf(logged_in_client):
    alice = add_subscriber("alice@example.com")
    service.record_complaint(db.session, "alice@example.com", detail="abuse report")
    url = f"/subscribers/{alice}/suppression/lift"

    page = logged_in_client.get(url)
    assert page.status_code == 200
    assert "Lift the suppression of alice@example.com?" in page.text
    assert "spam complaint: abuse report" in page.text
    assert subscriber(alice).suppression == "complained"  # asking changes nothing

    assert logged_in_client.post(url, data={"note": "x"}).status_code == 400  # no CSRF token
    assert subscriber(alice).suppression == "complained"

    response = logged_in_client.post(
        url, data={"note": "They wrote to ask", "csrf_token": csrf_token_from(page.text)})
    assert response.status_code == 302
    assert subscriber(alice).suppression is None
    assert events("unsuppressed")[0].detail == "They wrote to ask"

    again = logged_in_client.post(url, data={"csrf_token": csrf_token_from(page.text)})
    assert again.status_code == 409 and "not suppressed" in again.text


def test_suppression_panel_shows_when_and_why_and_the_history(app, owner):
    weekly = add_list("Weekly")
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    service.unsubscribe(db.session, _claim(alice, weekly), "one-click")
    service.record_bounce(db.session, "alice@example.com", "hard", detail="550 no such user")
    with app.test_request_context("/subscribers/1"):
        login_user(owner)  # the panel's "Lift suppression…" is shown to those who may lift
        html = render_template_string(
            '{% include "unsubscribe/_suppression_panel.html" ignore missing %}',
            subscriber=subscriber(alice))
    assert "badge-bounced" in html
    assert "hard bounce: 550 no such user" in html
    assert f"/subscribers/{alice}/suppression/lift" in html
    assert "Unsubscribed" in html and "one-click" in html and "Weekly" in html


def _claim(subscriber_id: int, list_id: int):
    from tests.helpers import read_token

    return read_token(make_token(subscriber_id, list_id))


# ------------------------------------------------------------------ departures of a list

def test_departures_page_shows_this_lists_unsubscribes_bounces_and_complaints(logged_in_client):
    weekly, daily = add_list("Weekly"), add_list("Daily")
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    add_subscriber("bob@example.com", {weekly: "active"})
    carol = add_subscriber("carol@example.com", {daily: "active"})
    service.unsubscribe(db.session, _claim(alice, weekly), "one-click")
    service.record_complaint(db.session, "bob@example.com", detail="abuse")
    service.unsubscribe(db.session, _claim(carol, daily), "link")
    service.record_bounce(db.session, "carol@example.com", "hard")

    page = logged_in_client.get(f"/lists/{weekly}/departures")

    assert page.status_code == 200
    assert "alice@example.com" in page.text and "one-click" in page.text
    assert "bob@example.com" in page.text and "complaint: abuse" in page.text
    assert "carol@example.com" not in page.text  # she was never on Weekly
    assert logged_in_client.get("/lists/999/departures").status_code == 404

    with logged_in_client.application.test_request_context("/lists/1"):
        panel = render_template_string(
            '{% include "unsubscribe/_departures_panel.html" %}',
            mailing_list=db.session.get(MailingList, daily))
    assert "carol@example.com" in panel and "alice@example.com" not in panel


def test_departures_page_needs_the_owner(client):
    weekly = add_list()
    assert client.get(f"/lists/{weekly}/departures").status_code == 302
