"""Subjects with merge fields, shown in lists and titles as a reader reads them: filled in for
the newest person a send could reach (else the sample reader Alex), never as template source;
a broken field falls back to the source and never fails the page; one person read per page,
however many subjects; the editor keeps the source. On SQLite and PostgreSQL."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from sqlalchemy import event, update

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.segments import service as segments
from webapp.extensions import db

SUBJECT = "Hello {{ name }}, news for {{ attributes.city or 'everyone' }}"
FOR_ANA = "Hello Ana, news for Berlin"
FOR_ALEX = "Hello Alex, news for everyone"


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", page))


def person(email: str, name: str, city: str, mailing_list: MailingList, status: str = "active",
           suppression: str | None = None) -> None:
    subscriber = Subscriber(email=email, name=name, attributes={"city": city}, suppression=suppression)
    db.session.add(subscriber)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=subscriber.id, list_id=mailing_list.id, status=status,
                                created_at=utcnow() - timedelta(days=1)))


@pytest.fixture
def weekly(app) -> MailingList:
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.commit()
    return weekly


@pytest.fixture
def readers(weekly) -> None:
    person("old@example.com", "Olga", "Oslo", weekly)
    person("ana@example.com", "Ana", "Berlin", weekly)  # the newest a send could reach
    person("gone@example.com", "Gus", "Rome", weekly, status="unsubscribed")
    person("bounced@example.com", "Bea", "Lima", weekly, suppression="bounced")
    db.session.commit()


def a_draft(weekly: MailingList, subject: str = SUBJECT, **audience) -> Broadcast:
    audience = audience or {"list_id": weekly.id}
    return drafts.create_draft(db.session, subject=subject, body="Hi", **audience)


def test_subjects_read_as_for_the_newest_reachable_person_in_lists_and_titles(
        app, logged_in_client, weekly, readers):
    everyone = segments.create_segment(db.session, "Everyone", {"all": [
        {"field": "email", "op": "contains", "value": "@"}]})
    broadcast = a_draft(weekly, segment_id=everyone.id)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id).values(status="sent"))
    data = automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Welcome, {{ name }}", "body": "x"}]})
    automations.create_automation(db.session, data, default_from=app.config["MAIL_FROM"])
    db.session.commit()

    dashboard = text_of(logged_in_client.get("/").text)
    assert f">{FOR_ANA}</a>" in dashboard and f'aria-label="Progress of {FOR_ANA}"' in dashboard
    index = text_of(logged_in_client.get("/broadcasts/").text)
    assert f">{FOR_ANA}</a></td>" in index and f"Duplicate<span class=\"sr-only\"> “{FOR_ANA}”" in index
    show = text_of(logged_in_client.get(f"/broadcasts/{broadcast.id}").text)
    assert f"<title>{FOR_ANA} · Broadside</title>" in show and f"<h1>{FOR_ANA}</h1>" in show
    assert ">Welcome, Ana</span>" in text_of(logged_in_client.get("/automations/").text)
    assert f">{FOR_ANA}</a>" in text_of(logged_in_client.get(f"/segments/{everyone.id}/edit").text)
    for page in (dashboard, index, show):
        assert "{{" not in page


def test_the_editor_keeps_the_source(logged_in_client, weekly, readers):
    draft = a_draft(weekly)
    page = text_of(logged_in_client.get(f"/broadcasts/{draft.id}/edit").text)
    assert f'value="{SUBJECT}"' in page


def test_with_nobody_to_reach_the_sample_reader_alex_reads_it(logged_in_client, weekly):
    person("left@example.com", "Lee", "Kyiv", weekly, status="unsubscribed")
    db.session.commit()
    a_draft(weekly)
    assert f">{FOR_ALEX}</a></td>" in text_of(logged_in_client.get("/broadcasts/").text)


def test_a_field_that_cannot_be_filled_in_shows_its_source_and_never_fails_the_page(
        logged_in_client, weekly, readers):
    a_draft(weekly, subject="Hi {{ name }}")
    broken = {"Sum {{ name + 1 }}": a_draft(weekly, subject="Sum").id,      # fails for Ana
              "Odd {{ name | nosuch }}": a_draft(weekly, subject="Odd").id,  # never compiles
              "Empty {{ }": a_draft(weekly, subject="Empty").id}
    for source, broadcast_id in broken.items():  # written before today's checks, say
        db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(subject=source))
    db.session.commit()
    response = logged_in_client.get("/broadcasts/")
    assert response.status_code == 200
    index = text_of(response.text)
    assert ">Hi Ana</a></td>" in index
    for source in broken:
        assert f">{source}</a></td>" in index


def test_one_person_is_read_per_page_however_many_subjects(logged_in_client, weekly, readers):
    for n in range(6):
        a_draft(weekly, subject=f"Issue {n} for {{{{ name }}}}")
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(" ".join(statement.lower().split()))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        index = text_of(logged_in_client.get("/broadcasts/").text)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert all(f">Issue {n} for Ana</a></td>" in index for n in range(6))
    reads_of_people = [s for s in seen if re.search(r"\bfrom subscribers\b", s)]
    assert len(reads_of_people) == 1, reads_of_people
