"""What a draft's merge fields will do to its recipients: counted over the audience in one
query (JSON attribute presence differs between SQLite and PostgreSQL, so the counting tests
run on both), with unknown fields and their closest known one, and broken syntax that blocks
sending. The rest runs on SQLite."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from broadside.campaigns.broadcasts import drafts, launch
from broadside.campaigns.broadcasts.merge_report import merge_report
from broadside.core.errors import ValidationError
from broadside.core.models import MailingList, Subscriber, Subscription
from broadside.core.site_settings import update_settings
from broadside.segments import service as segments
from webapp.extensions import db


def people(news: MailingList, rows: list[tuple[str, str, dict, str, str | None]]) -> None:
    for email, name, attributes, status, suppression in rows:
        person = Subscriber(email=email, name=name, attributes=attributes, suppression=suppression)
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=news.id, status=status))
    db.session.commit()


@pytest.fixture
def news(app) -> MailingList:
    """Five recipients; three more on the list who would not receive it (and all have a city)."""
    news = MailingList(name="News")
    db.session.add(news)
    db.session.flush()
    people(news, [
        ("a@example.com", "Ann", {"city": "Lisbon", "plan": "pro"}, "active", None),
        ("b@example.com", "", {"city": "", "plan": "free"}, "active", None),
        ("c@example.com", "Cy", {"city": None}, "active", None),
        ("d@example.com", "", {"plan": 3}, "active", None),
        ("e@example.com", "Eve", {"city": "Porto", "first name": "Eve"}, "active", None),
        ("f@example.com", "", {"city": "x", "ctiy": "y"}, "unsubscribed", None),
        ("g@example.com", "", {"city": "x"}, "active", "bounced"),
        ("h@example.com", "", {"city": "x"}, "unconfirmed", None),
    ])
    return news


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_recipients_lacking_a_printed_field_are_counted_in_one_query(app, news, backend):
    draft = drafts.create_draft(
        db.session, list_id=news.id, subject="Hi {{ name }}",
        body='{{ attributes.city }} {{ attributes["first name"] }} {{ attributes.plan }}\n\n'
             "{{ attributes.ctiy }} {% if attributes.city %}{{ attributes.city }}{% endif %}")
    statements: list[str] = []
    engine = db.engine

    def record(conn, cursor, statement, *args):
        statements.append(statement)
    event.listen(engine, "before_cursor_execute", record)
    try:
        report = merge_report(db.session, draft)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert report.problems == []
    missing = {m.written: (m.missing, m.recipients, m.wheres) for m in report.missing}
    # Missing, JSON null and "" all print nothing; 3 (a number) prints; the others are not
    # recipients (unsubscribed, bounced, unconfirmed) and are not counted.
    assert missing == {"name": (2, 5, ("subject",)),
                       "attributes.city": (3, 5, ("body",)),
                       'attributes["first name"]': (4, 5, ("body",)),
                       "attributes.plan": (2, 5, ("body",))}
    assert report.missing[1].message == (
        "3 of 5 recipients have no city; they will see it empty in the body. Add a fallback: "
        '{{ attributes.city or "there" }}')
    # ctiy: only someone unsubscribed has it, so it is empty for everyone; "city" is close.
    [unknown] = report.unknown
    assert (unknown.written, unknown.recipients, unknown.suggestion, unknown.line,
            unknown.column) == ("attributes.ctiy", 5, "attributes.city", 3, 15)
    counts = [s for s in statements if "count(" in s.lower()]
    assert len(counts) == 1, counts
    # The editor looks at a bounded number of recipients, and says so when it reached it.
    bounded = merge_report(db.session, draft, limit=5)
    assert {m.written: (m.missing, m.recipients) for m in bounded.missing} == {
        key: value[:2] for key, value in missing.items()}
    assert bounded.missing[1].message.startswith(
        "3 of the first 5 recipients checked have no city;")
    assert bounded.unknown[0].message.startswith(
        "In the body, line 3, column 15: none of the first 5 recipients checked has ctiy")
    assert merge_report(db.session, draft, limit=6).missing[1].message.startswith(
        "3 of 5 recipients have no city;")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_segment_audience_is_counted_by_its_rules(app, news, backend):
    segment = segments.create_segment(db.session, "Pro", {"all": [
        {"field": "attributes.plan", "op": "equals", "value": "pro"}]})
    draft = drafts.create_draft(db.session, segment_id=segment.id, subject="s",
                                body="{{ attributes.city }} and {{ attributes.plan }}")
    report = merge_report(db.session, draft)
    assert report.missing == [] and report.unknown == []  # Ann has both


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_name_nobody_has_is_named_with_the_closest_field_and_placed(app, news, backend):
    draft = drafts.create_draft(db.session, list_id=news.id, subject="Hello {{ Nmae }}",
                                body="Dear {{ nmae or 'friend' }},\n\nFrom {{ cty }} {{ emial }}")
    report = merge_report(db.session, draft)
    found = [(u.written, u.where, u.line, u.column, u.suggestion) for u in report.unknown]
    assert found == [("Nmae", "subject", 1, 10, "name"), ("nmae", "body", 1, 9, "name"),
                     ("cty", "body", 3, 9, "attributes.city"),
                     ("emial", "body", 3, 19, "email")]
    assert report.unknown[0].message == ("In the subject, column 10: {{ Nmae }} is not a merge "
                                         "field, so it will be empty for everyone. Did you mean "
                                         "{{ name }}?")
    assert report.missing == []


@pytest.mark.parametrize("backend", ["sqlite"])
def test_broken_syntax_blocks_sending_and_scheduling_before_send_is_pressed(app, news, backend):
    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    draft = drafts.create_draft(db.session, list_id=news.id, subject="Hi {{ name",
                                body="Hi {{ name,\n\n{% if attributes.vip %}VIP{% endif %}")
    plan = launch.send_plan(db.session, draft.id)
    assert plan.problems == [
        "The subject has a merge-field error on line 1, column 4: This {{ is never closed: add "
        "}} after the field. Fields look like {{ name }}.",
        "The body has a merge-field error on line 1, column 4: This {{ is never closed: add }} "
        "before the blank line (line 2). Fields look like {{ name }}."]
    with pytest.raises(ValidationError, match="subject has a merge-field error"):
        launch.send_now(db.session, draft.id, default_from="a@b.c", not_ready=[],
                        queue_anyway=False, jobs=None)
    with pytest.raises(ValidationError, match="subject has a merge-field error"):
        launch.schedule_at(db.session, draft.id, "2999-01-01T09:00")
    # What only freezing refuses is said before Send too: a field as a link's address.
    drafts.update_draft(db.session, draft.id, list_id=news.id, subject="Hi", preheader="",
                        body="[site]({{ attributes.url }})")
    assert launch.send_plan(db.session, draft.id).problems == [
        "The body has a merge field where it is not allowed: {{ attributes.url }}. A link or "
        "image address must start with https:// (or http://, mailto:) before any merge field."]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_message_without_fields_reads_nobody_and_a_stray_closer_is_a_warning(app, news,
                                                                              backend):
    draft = drafts.create_draft(db.session, list_id=news.id, subject="Plain", body="No fields.")
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        report = merge_report(db.session, draft)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert report.warning_count == 0
    assert [s for s in statements if "subscribers" in s] == []
    stray = drafts.create_draft(db.session, list_id=news.id, subject="s",
                                body="Hello name }}")
    assert [s.message for s in merge_report(db.session, stray).strays] == [
        "In the body, line 1, column 12: this }} closes nothing and will be sent as it is. "
        "Is its {{ missing?"]
