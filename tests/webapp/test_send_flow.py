"""The owner's send flow: send a test, confirm the audience, send or schedule, and a frozen draft."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import func, select

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.launch import local_to_utc
from broadside.core.errors import ValidationError
from broadside.core.models import (
    Broadcast,
    Delivery,
    MailingList,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from broadside.core.site_settings import update_settings
from tests.helpers import OWNER_EMAIL, csrf_token_from
from webapp.extensions import db

HTMX = {"HX-Request": "true"}


def settings(time_zone: str = "UTC", postal_address: str = "Acme Ltd, 1 Main Street, Springfield") -> None:
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address=postal_address, time_zone=time_zone)


@pytest.fixture
def audience(app) -> MailingList:
    """Three who would receive it, and one each unsubscribed, bounced and unconfirmed."""
    news = MailingList(name="Monthly news")
    db.session.add(news)
    db.session.flush()
    people = [("ann@example.com", "active", None), ("bob@example.com", "active", None),
              ("cy@example.com", "active", None), ("dee@example.com", "unsubscribed", None),
              ("eve@example.com", "active", "bounced"), ("fay@example.com", "unconfirmed", None)]
    for email, status, suppression in people:
        person = Subscriber(email=email, name=email.split("@")[0].title(), attributes={},
                            suppression=suppression)
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status=status))
    db.session.commit()
    return news


@pytest.fixture
def draft(audience) -> Broadcast:
    return drafts.create_draft(db.session, list_id=audience.id, subject="Hello {{ name }}",
                               body="Hi **{{ name or 'friend' }}**, the news.")


def csrf(client, path: str) -> str:
    return csrf_token_from(client.get(path).text)


def test_editor_offers_send_test_send_and_schedule_with_labels(logged_in_client, draft):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert page.status_code == 200
    assert '<label for="to_email">Send a test to</label>' in page.text
    assert f'value="{OWNER_EMAIL}"' in page.text
    assert f'action="/broadcasts/{draft.id}/test"' in page.text
    assert f'hx-post="/broadcasts/{draft.id}/test"' in page.text
    assert f'href="/broadcasts/{draft.id}/send"' in page.text
    assert f'href="/broadcasts/{draft.id}/send#schedule"' in page.text


def test_send_test_queues_one_transactional_copy_and_answers_htmx_in_place(logged_in_client, draft):
    token = csrf(logged_in_client, f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(f"/broadcasts/{draft.id}/test", headers=HTMX,
                                     data={"csrf_token": token, "to_email": " Tester@Example.org "})
    assert response.status_code == 200
    assert 'id="test-status"' in response.text
    assert "Test queued for tester@example.org" in response.text
    message = db.session.scalars(select(TransactionalMessage)).one()
    assert (message.kind, message.to_email, message.broadcast_id) == ("test", "tester@example.org", draft.id)
    assert message.subject == "[Test] Hello Cy"  # filled in with the newest active person
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).status == "draft"  # a test sends nothing else


def test_send_test_with_a_bad_address_says_why_and_queues_nothing(logged_in_client, draft):
    token = csrf(logged_in_client, f"/broadcasts/{draft.id}/edit")
    response = logged_in_client.post(f"/broadcasts/{draft.id}/test", headers=HTMX,
                                     data={"csrf_token": token, "to_email": "not an address"})
    assert response.status_code == 200
    assert "Test not sent:" in response.text and "not a valid email address" in response.text
    # Without JavaScript: back to the editor with the same message.
    response = logged_in_client.post(f"/broadcasts/{draft.id}/test", data={
        "csrf_token": token, "to_email": ""}, headers={"Referer": f"http://localhost/broadcasts/{draft.id}/edit"})
    assert response.status_code == 302
    assert response.headers["Location"].endswith(f"/broadcasts/{draft.id}/edit")
    page = logged_in_client.get(response.headers["Location"])
    assert "Test not sent: An email address is required." in page.text
    assert db.session.scalar(select(func.count()).select_from(TransactionalMessage)) == 0


def test_confirmation_shows_who_receives_it_and_who_is_skipped_and_why(logged_in_client, draft):
    settings()
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert page.status_code == 200
    assert "<strong class=\"big-number\">3</strong> active subscribers will receive it." in page.text
    assert "3 others on the list will be skipped:" in page.text
    for words in ("1 unsubscribed", "1 their address bounced before",
                  "1 have not confirmed their subscription"):
        assert f"<li>{words}</li>" in page.text
    assert "Acme &lt;news@acme.example&gt;" in page.text
    assert "Send now to 3 subscribers" in page.text
    assert '<label for="send_at">Date and time (UTC)</label>' in page.text
    assert 'type="datetime-local"' in page.text


def test_send_refuses_without_a_postal_address_and_writes_nothing(logged_in_client, draft):
    settings(postal_address="")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert "Add your postal address in Settings first" in page.text
    assert "Send now to" not in page.text  # no button while a problem stands
    response = logged_in_client.post(f"/broadcasts/{draft.id}/send", data={
        "csrf_token": csrf_token_from(page.text), "queue_anyway": "y"})
    assert response.status_code == 422
    assert "Add your postal address in Settings first" in response.text
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).status == "draft"
    assert db.session.scalar(select(func.count()).select_from(Delivery)) == 0


def test_the_press_refuses_what_the_page_shows_without_counting_the_audience(logged_in_client, draft):
    """Pressing Send (or Schedule) checks what blocks a send without counting the audience
    (`blocking_problems`: at a million people the page's counts take a second); it must
    refuse exactly what the confirmation page lists, in each way a draft can be blocked."""
    from broadside.campaigns.broadcasts.launch import blocking_problems, send_plan
    from broadside.segments.service import create_segment

    settings()
    nobody = create_segment(db.session, "Nobody", {"all": [
        {"field": "email", "op": "contains", "value": "@nowhere.example"}]}).id
    everyone = MailingList(name="Left")
    db.session.add(everyone)
    db.session.commit()
    left = everyone.id

    def problems_both_ways() -> tuple[list[str], list[str]]:
        db.session.expire_all()
        broadcast = db.session.get(Broadcast, draft.id)
        counted = send_plan(db.session, draft.id).problems
        return blocking_problems(db.session, broadcast), counted

    changes = [
        ({}, []),
        ({"subject": "  "}, ["Give the broadcast a subject before sending it."]),
        ({"body": "Hi {{ name "}, None),  # a broken merge field: its message, whatever it says
        ({"list_id": left}, ["Nobody on this list would receive it: it has no active subscribers."]),
        ({"list_id": None, "segment_id": nobody},
         ["Nobody in this segment would receive it: no active subscriber matches its rules now."]),
        ({"list_id": None}, ["Choose a list or a segment to send to."]),
    ]
    original = {"subject": draft.subject, "body": draft.body, "list_id": draft.list_id,
                "segment_id": None}
    for change, expected in changes:
        db.session.execute(Broadcast.__table__.update().where(Broadcast.id == draft.id)
                           .values(**{**original, **change}))
        db.session.commit()
        pressed, shown = problems_both_ways()
        assert pressed == shown, change
        if expected is not None:
            assert pressed == expected, change
        else:
            assert len(pressed) == 1 and "line 1" in pressed[0], pressed
        if pressed:
            page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
            response = logged_in_client.post(f"/broadcasts/{draft.id}/send", data={
                "csrf_token": csrf_token_from(page.text), "queue_anyway": "y"})
            assert response.status_code == 422 and pressed[0] in response.text.replace("&#34;", '"')
    settings(postal_address="")
    pressed, shown = problems_both_ways()
    assert pressed == shown and len(pressed) == 2  # no postal address; no list chosen
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).status == "draft"
    assert db.session.scalar(select(func.count()).select_from(Delivery)) == 0


def test_send_without_a_worker_needs_queue_anyway_then_freezes_and_snapshots(logged_in_client, draft):
    settings()
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    # No worker holds the lease in this test: the page says so and links to the System page.
    assert "No worker is running" in page.text
    assert 'href="/system/"' in page.text
    assert "Queue it anyway" in page.text
    token = csrf_token_from(page.text)
    refused = logged_in_client.post(f"/broadcasts/{draft.id}/send", data={"csrf_token": token})
    assert refused.status_code == 422
    assert "Sending is not ready right now" in refused.text
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).status == "draft"

    sent = logged_in_client.post(f"/broadcasts/{draft.id}/send",
                                 data={"csrf_token": token, "queue_anyway": "y"})
    assert sent.status_code == 302 and sent.headers["Location"].endswith(f"/broadcasts/{draft.id}")
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, draft.id)
    assert (broadcast.status, broadcast.total, broadcast.pending_count) == ("queued", 3, 3)
    shown = logged_in_client.get(sent.headers["Location"])
    assert "Sending to 3 subscribers." in shown.text
    # Sending twice (a double click, a second tab) is refused, not doubled.
    again = logged_in_client.post(f"/broadcasts/{draft.id}/send",
                                  data={"csrf_token": token, "queue_anyway": "y"})
    assert again.status_code == 302
    assert db.session.scalar(select(func.count()).select_from(Delivery)) == 3


def test_after_sending_the_editor_refuses_edits_and_points_to_the_broadcast(logged_in_client, draft):
    settings()
    token = csrf(logged_in_client, f"/broadcasts/{draft.id}/send")
    logged_in_client.post(f"/broadcasts/{draft.id}/send", data={"csrf_token": token, "queue_anyway": "y"})
    edit = logged_in_client.get(f"/broadcasts/{draft.id}/edit")
    assert edit.status_code == 302 and edit.headers["Location"].endswith(f"/broadcasts/{draft.id}")
    save = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data={
        "csrf_token": token, "audience": f"list:{draft.list_id}", "subject": "Changed", "preheader": "",
        "body": "changed"})
    assert save.status_code == 302
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).subject == "Hello {{ name }}"
    # The confirmation page of a sent broadcast just leads to the broadcast.
    assert logged_in_client.get(f"/broadcasts/{draft.id}/send").status_code == 302


def test_schedule_reads_the_owners_time_zone_and_shows_it_back(logged_in_client, draft):
    settings(time_zone="Europe/Berlin")
    token = csrf(logged_in_client, f"/broadcasts/{draft.id}/send")
    response = logged_in_client.post(f"/broadcasts/{draft.id}/schedule",
                                     data={"csrf_token": token, "send_at": "2030-07-01T09:30"})
    assert response.status_code == 302
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, draft.id)
    assert broadcast.status == "scheduled"
    assert broadcast.scheduled_at == datetime(2030, 7, 1, 7, 30)  # 09:30 CEST is 07:30 UTC
    assert db.session.scalar(select(func.count()).select_from(Delivery)) == 0
    page = logged_in_client.get(f"/broadcasts/{draft.id}")
    assert "Scheduled for <strong>Monday 01 July 2030, 09:30 CEST</strong>" in page.text
    assert 'hx-trigger="every 10s"' in page.text
    # Editing a scheduled broadcast is refused with the way out.
    edit = logged_in_client.get(f"/broadcasts/{draft.id}/edit", follow_redirects=True)
    assert "This broadcast is scheduled. Cancel the schedule to edit it again." in edit.text


def test_cancelling_a_schedule_makes_it_a_draft_again(logged_in_client, draft):
    settings(time_zone="America/New_York")
    token = csrf(logged_in_client, f"/broadcasts/{draft.id}/send")
    logged_in_client.post(f"/broadcasts/{draft.id}/schedule",
                          data={"csrf_token": token, "send_at": "2030-01-15T09:30"})
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).scheduled_at == datetime(2030, 1, 15, 14, 30)
    response = logged_in_client.post(f"/broadcasts/{draft.id}/unschedule", data={"csrf_token": token})
    assert response.status_code == 302
    assert response.headers["Location"].endswith(f"/broadcasts/{draft.id}/edit")
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, draft.id)
    assert (broadcast.status, broadcast.scheduled_at) == ("draft", None)
    assert "The schedule is cancelled" in logged_in_client.get(response.headers["Location"]).text
    # A page still polling the scheduled broadcast learns it is a draft again, and stops.
    poll = logged_in_client.get(f"/broadcasts/{draft.id}/progress", headers=HTMX)
    assert poll.status_code == 286 and "This is a draft again" in poll.text


def test_bad_schedule_times_are_refused_with_a_message_and_change_nothing(logged_in_client, draft):
    settings(time_zone="Europe/Berlin")
    token = csrf(logged_in_client, f"/broadcasts/{draft.id}/send")
    for value, message in (("", "Choose the date and time to send at."),
                           ("2020-01-01T09:00", "Choose a time in the future."),
                           ("tomorrow at nine", "Give the date and time as on the form"),
                           ("2030-03-31T02:30", "does not exist in Europe/Berlin")):
        response = logged_in_client.post(f"/broadcasts/{draft.id}/schedule",
                                         data={"csrf_token": token, "send_at": value})
        assert response.status_code == 422, value
        assert message in response.text, value
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).status == "draft"


def test_local_to_utc_takes_the_first_of_a_repeated_hour():
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    # 2030-10-27 02:30 happens twice in Berlin; the first is still summer time (UTC+2).
    assert local_to_utc("2030-10-27T02:30", berlin) == datetime(2030, 10, 27, 0, 30)
    assert local_to_utc("2030-12-24T18:00:00", berlin) == datetime(2030, 12, 24, 17, 0)
    with pytest.raises(ValidationError):
        local_to_utc("2030-12-24T18:00+01:00", berlin)


def test_actions_on_someone_elses_id_are_a_clean_404(logged_in_client, draft):
    token = csrf(logged_in_client, f"/broadcasts/{draft.id}/edit")
    for path in ("/broadcasts/999/send", "/broadcasts/999/progress", "/broadcasts/999/deliveries"):
        response = logged_in_client.get(path)
        assert response.status_code == 404 and "Traceback" not in response.text
    response = logged_in_client.post("/broadcasts/999/test",
                                     data={"csrf_token": token, "to_email": "a@b.example"})
    assert response.status_code == 404


def test_the_audience_counts_match_each_person_counted_one_by_one(app):
    """`audience_summary` reads the list's statuses from its index and corrects them by its
    suppressed people; it must give what deciding person by person gives: active and not
    suppressed receives it, else the suppression is the reason, else the status. Lists One
    and Two have more members than the database has suppressed people (read from the
    suppressed side), Few fewer (read from its members)."""
    import random

    from broadside.campaigns.broadcasts.audience import audience_summary

    chance = random.Random(14)
    lists = [MailingList(name="One"), MailingList(name="Two"), MailingList(name="Few")]
    db.session.add_all(lists)
    db.session.flush()
    expected: list[dict] = [{"active": 0, "skipped": {}} for _ in lists]
    for number in range(120):
        suppression = chance.choice([None, None, None, "bounced", "complained", "blocked"])
        person = Subscriber(email=f"p{number}@example.com", name="", attributes={},
                            suppression=suppression)
        db.session.add(person)
        db.session.flush()
        for index, mailing_list in enumerate(lists):
            status = chance.choice([None, "active", "active", "unsubscribed", "unconfirmed"])
            if status is None or (mailing_list.name == "Few" and number >= 12):
                continue
            db.session.add(Subscription(subscriber_id=person.id, list_id=mailing_list.id,
                                        status=status))
            if status == "active" and suppression is None:
                expected[index]["active"] += 1
            else:
                reason = suppression or status
                expected[index]["skipped"][reason] = expected[index]["skipped"].get(reason, 0) + 1
    db.session.commit()
    assert [audience_summary(db.session, m.id) for m in lists] == expected
    assert all(len(e["skipped"]) == 5 for e in expected[:2])  # every reason on both lists
    suppressed = db.session.scalar(select(func.count()).where(Subscriber.suppression.is_not(None)))
    members = [m["active"] + sum(m["skipped"].values()) for m in expected]
    assert members[0] > suppressed and members[1] > suppressed and members[2] < suppressed
    assert expected[2]["active"] and {"bounced", "complained", "blocked"} & set(expected[2]["skipped"])
