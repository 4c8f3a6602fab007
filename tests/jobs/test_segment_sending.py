"""Broadcasts to a segment and the frequency cap, through the real worker, Redis and SMTP, on
SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from broadside.audience.subscribers import service as subscribers_service
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.evidence import delivery_timeline
from broadside.campaigns.broadcasts.launch import send_plan
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, Delivery, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.segments import service as segments
from tests.helpers import counters, read_token, statuses
from webapp.extensions import db, get_jobs


def person(email: str, lists: dict[int, str], **attributes) -> Subscriber:
    subscriber = Subscriber(email=email, name=email.split("@")[0].title(), attributes=attributes)
    db.session.add(subscriber)
    db.session.flush()
    for list_id, status in lists.items():
        db.session.add(Subscription(subscriber_id=subscriber.id, list_id=list_id, status=status))
    return subscriber


def two_lists() -> tuple[int, int]:
    weekly, news = MailingList(name="Weekly"), MailingList(name="News")
    db.session.add_all([weekly, news])
    db.session.flush()
    return weekly.id, news.id


def send_to(app, *, segment_id=None, list_id=None, subject="Issue", cap=None) -> Broadcast:
    draft = create_draft(db.session, segment_id=segment_id, list_id=list_id, subject=subject,
                         body="Hello {{ name }}", skip_if_received_within_hours=cap)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs())


def test_a_segment_over_two_lists_sends_each_person_one_copy_with_a_link_of_their_list(
        app, smtp_server, run_worker_burst):
    weekly, news = two_lists()
    both = person("both@example.com", {weekly: "active", news: "active"}, city="Berlin")
    news_only = person("news@example.com", {news: "active"}, city="Berlin")
    left_weekly = person("left@example.com", {weekly: "unsubscribed", news: "active"}, city="Berlin")
    person("paris@example.com", {weekly: "active"}, city="Paris")
    person("bounced@example.com", {weekly: "active"}, city="Berlin").suppression = "bounced"
    db.session.commit()
    segment = segments.create_segment(db.session, "Berlin readers", {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"},
        {"any": [{"field": "list", "op": "is_on", "value": weekly},
                 {"field": "list", "op": "is_on", "value": news}]},
    ]})

    # The confirmation: who matches now, and who the rules match but a send would skip.
    plan = send_plan(db.session, create_draft(db.session, segment_id=segment.id, subject="Plan",
                                              body="x").id)
    assert plan.active == 3 and plan.skipped == {"bounced": 1}

    broadcast = send_to(app, segment_id=segment.id)
    assert broadcast.total == 3
    rows = {d.subscriber_id: d.list_id for d in db.session.scalars(
        select(Delivery).where(Delivery.broadcast_id == broadcast.id))}
    # One row each; the copy belongs to a list they are active on (the lowest the rules name).
    assert rows == {both.id: weekly, news_only.id: news, left_weekly.id: news}

    run_worker_burst()
    assert sorted(smtp_server.recipients()) == ["both@example.com", "left@example.com",
                                                "news@example.com"]
    for received in smtp_server.messages:
        link = received.message["List-Unsubscribe"].strip("<>")
        claim = read_token(link.rsplit("/u/", 1)[1])
        assert claim is not None and claim.broadcast_id == broadcast.id
        who = db.session.scalar(select(Subscriber).where(Subscriber.email == received.rcpt_tos[0]))
        assert claim.subscriber_id == who.id and claim.list_id == rows[who.id]
    assert statuses(broadcast.id) == {"sent": 3}


def test_the_re_check_reads_the_list_of_each_copy(app, smtp_server, run_worker_burst):
    """Someone who leaves the list their copy belongs to after the snapshot is skipped; the
    segment's rules are not asked again (the snapshot was the segment at send time)."""
    weekly, news = two_lists()
    stays = person("stays@example.com", {weekly: "active"}, plan="paid")
    leaves = person("leaves@example.com", {news: "active"}, plan="paid")
    changes_plan = person("changes@example.com", {news: "active"}, plan="paid")
    db.session.commit()
    segment = segments.create_segment(db.session, "Paying", {"all": [
        {"field": "attributes.plan", "op": "equals", "value": "paid"}]})
    broadcast = send_to(app, segment_id=segment.id)
    subscribers_service.unsubscribe(db.session, leaves.id, news, source="owner")
    db.session.execute(update(Subscriber).where(Subscriber.id == changes_plan.id)
                       .values(attributes={"plan": "free"}))
    db.session.commit()

    run_worker_burst()
    assert sorted(smtp_server.recipients()) == ["changes@example.com", "stays@example.com"]
    skipped = db.session.scalars(select(Delivery).where(Delivery.status == "skipped")).one()
    assert skipped.subscriber_id == leaves.id and skipped.reason == "unsubscribed"
    assert stays.id is not None
    # The skipped row's timeline shows why: they left the list of their copy meanwhile.
    timeline = delivery_timeline(db.session, broadcast.id, skipped.id)
    assert any(m.kind == "unsubscribed" for m in timeline.moments), timeline.moments


def test_the_frequency_cap_skips_at_send_time_with_the_reason_and_no_pace(
        app, smtp_server, run_worker_burst):
    weekly, _ = two_lists()
    readers = [person(f"r{i}@example.com", {weekly: "active"}) for i in range(4)]
    db.session.commit()
    first = send_to(app, list_id=weekly, subject="Issue #4")
    run_worker_burst()
    assert statuses(first.id) == {"sent": 4}
    # Someone whose last copy is older than the cap is sent again.
    db.session.execute(update(Delivery).where(Delivery.subscriber_id == readers[0].id)
                       .values(sent_at=utcnow() - timedelta(hours=30)))
    db.session.commit()
    smtp_server.reset()

    app.config["SEND_DELAY_MS"] = 2000  # a skip costs no pace: this burst would take 6 s if it did
    second = send_to(app, list_id=weekly, subject="Issue #5", cap=24)
    started = utcnow()
    run_worker_burst()
    assert smtp_server.recipients() == ["r0@example.com"]
    assert statuses(second.id) == {"sent": 1, "skipped": 3}
    assert counters(second.id) == {"sent": 1, "skipped": 3}
    reasons = set(db.session.scalars(select(Delivery.reason).where(
        Delivery.broadcast_id == second.id, Delivery.status == "skipped")))
    assert reasons == {"received 'Issue #4' just now"}
    assert utcnow() - started < timedelta(seconds=4)

    # Without a cap, everyone is sent to.
    smtp_server.reset()
    app.config["SEND_DELAY_MS"] = 0
    third = send_to(app, list_id=weekly, subject="Issue #6", cap=None)
    run_worker_burst()
    assert statuses(third.id) == {"sent": 4}


def test_two_capped_broadcasts_sent_side_by_side_reach_each_person_once(
        app, smtp_server, run_worker_burst):
    """Two broadcasts queued the same afternoon, each with a one-day cap: the worker alternates
    their slices, and a broadcast that reaches someone first makes the other skip them, even
    when it finished while the other was still sending."""
    weekly, news = two_lists()
    for i in range(2):  # only on News: the evening broadcast starts with them
        person(f"n{i}@example.com", {news: "active"})
    for i in range(5):
        person(f"p{i}@example.com", {weekly: "active", news: "active"})
    db.session.commit()
    app.config.update(SLICE_SECONDS=0.01, SEND_DELAY_MS=250)  # one send per slice: they alternate
    morning = send_to(app, list_id=weekly, subject="Morning", cap=24)
    segment = segments.create_segment(db.session, "News readers", {"all": [
        {"field": "list", "op": "is_on", "value": news}]})
    evening = send_to(app, segment_id=segment.id, subject="Evening", cap=24)
    run_worker_burst()

    received = smtp_server.recipients()
    everyone = [f"n{i}@example.com" for i in range(2)] + [f"p{i}@example.com" for i in range(5)]
    assert sorted(received) == sorted(everyone)  # once each
    subjects = {m.message["Subject"] for m in smtp_server.messages}
    assert subjects == {"Morning", "Evening"}  # both sent: their slices really alternated
    for broadcast, own, other in ((morning, "Morning", "Evening"), (evening, "Evening", "Morning")):
        reasons = set(db.session.scalars(select(Delivery.reason).where(
            Delivery.broadcast_id == broadcast.id, Delivery.status == "skipped")))
        assert all(r.startswith(f"received '{other}' ") and own not in r for r in reasons)
    assert statuses(evening.id).get("skipped", 0) >= 1  # the cap did decide someone's copy
    assert statuses(morning.id).get("sent", 0) + statuses(evening.id).get("sent", 0) == 7
