"""Compaction of settled broadcasts' step-by-step history, on SQLite and
PostgreSQL: what goes, what stays (each delivery's final state, reason, code and times),
never an active or paused broadcast, resumable after an interruption, the Settings form and
the broadcast page's sentence."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from broadside.audience.unsubscribe.service import record_complaint
from broadside.campaigns.broadcasts import compaction, ledger, lifecycle
from broadside.campaigns.broadcasts.evidence import delivery_timeline
from broadside.core.models import Broadcast, Delivery, Event, SiteSettings, Subscriber
from broadside.core.site_settings import SettingsError, get_settings, update_history_retention
from broadside.core.timeutil import utcnow
from broadside.mail.message_refs import delivery_message_id
from jobs.compaction import ensure_compaction
from tests.helpers import csrf_token_from, make_list, start_broadcast
from webapp.extensions import db, get_jobs

LATER = timedelta(days=31)  # "now" for the compaction: a month after the send


def sent_broadcast(app, size: int = 6, *, finish: bool = True) -> int:
    """A broadcast sent through the ledger: two refused once then accepted (a retry, a
    re-claim), one refused for good, the rest accepted; finished (`sent`) when `finish`."""
    mailing_list = make_list(db.session, size, name=f"List {utcnow().timestamp()}")
    broadcast_id = start_broadcast(app, mailing_list, enqueue=False).id
    assert lifecycle.move(db.session, broadcast_id, "start")
    db.session.commit()
    rows = db.session.execute(select(Delivery.id, Delivery.subscriber_id)
                              .where(Delivery.broadcast_id == broadcast_id)
                              .order_by(Delivery.id)).all()
    pairs = [(r.id, r.subscriber_id) for r in rows]
    ledger.claim(db.session, broadcast_id, pairs)
    db.session.commit()
    change = ledger.Change
    retried, refused, accepted = pairs[:2], pairs[2], pairs[3:]
    ledger.transition(db.session, broadcast_id, [
        change(d, s, {"reason": "451 4.7.1 later", "smtp_code": 451, "error_class": "transient"},
               detail="will retry: 451 4.7.1 later") for d, s in retried],
        source="sending", target="pending")
    ledger.transition(db.session, broadcast_id, [
        change(refused[0], refused[1], {"reason": "550 5.1.1 no such user", "smtp_code": 550,
                                        "error_class": "recipient"}, detail="550 no such user")],
        source="sending", target="failed")
    db.session.commit()
    ledger.claim(db.session, broadcast_id, retried)
    db.session.commit()
    ledger.transition(db.session, broadcast_id, [
        change(d, s, {"sent_at": utcnow(), "smtp_code": 250, "reason": "2.0.0 Ok: queued",
                      "error_class": None}, detail="250 2.0.0 Ok: queued")
        for d, s in retried + accepted], source="sending", target="sent")
    db.session.commit()
    if finish:
        assert lifecycle.move(db.session, broadcast_id, "finish")
        db.session.commit()
    return broadcast_id


def delivery_events(broadcast_id: int) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Event).where(
        Event.broadcast_id == broadcast_id, Event.delivery_id.is_not(None))) or 0


def rows_of(broadcast_id: int) -> list[tuple]:
    db.session.rollback()
    return [tuple(r) for r in db.session.execute(
        select(Delivery.id, Delivery.status, Delivery.reason, Delivery.smtp_code,
               Delivery.error_class, Delivery.attempts, Delivery.claimed_at, Delivery.sent_at,
               Delivery.updated_at)
        .where(Delivery.broadcast_id == broadcast_id).order_by(Delivery.id))]


def set_retention(days: int | None) -> None:
    update_history_retention(db.session, days=days if days is not None else "forever")


def test_forever_by_default_removes_nothing(app):
    broadcast_id = sent_broadcast(app)
    before = delivery_events(broadcast_id)
    assert before > 0 and get_settings(db.session).history_retention_days is None
    assert compaction.compact_due(db.session, now=utcnow() + timedelta(days=3650)) == []
    assert delivery_events(broadcast_id) == before


def test_a_settled_broadcast_loses_its_steps_and_keeps_every_final_state(app):
    broadcast_id = sent_broadcast(app)
    set_retention(30)
    rows = rows_of(broadcast_id)
    # A complaint names the delivery it came from: the person's evidence, never compacted.
    first = rows[0][0]
    email = db.session.scalar(select(Subscriber.email).join(
        Delivery, Delivery.subscriber_id == Subscriber.id).where(Delivery.id == first))
    complaint = record_complaint(db.session, email, message_ids=[
        delivery_message_id(first, broadcast_id, "news@example.com")])
    assert complaint.delivery_id == first
    person = db.session.scalars(select(Event.kind).where(
        Event.delivery_id == first, Event.kind.in_(("complaint", "suppressed")))).all()
    assert sorted(person) == ["complaint", "suppressed"]
    kept = db.session.scalars(select(Event.kind).where(Event.broadcast_id == broadcast_id,
                                                       Event.delivery_id.is_(None))).all()
    # Not yet: finished moments ago.
    assert compaction.compact_due(db.session) == []
    [done] = compaction.compact_due(db.session, now=utcnow() + LATER)
    # 2 first claims (kept when they were retried), 2 retries, 2 re-claims, 1 failure.
    assert done.finished and done.removed == 7
    assert delivery_events(broadcast_id) == 2  # the complaint and the suppression
    assert sorted(db.session.scalars(select(Event.kind).where(
        Event.delivery_id == first)).all()) == ["complaint", "suppressed"]
    assert rows_of(broadcast_id) == rows  # final state, reason, code and times untouched
    after = db.session.scalars(select(Event.kind).where(Event.broadcast_id == broadcast_id,
                                                        Event.delivery_id.is_(None))
                               .order_by(Event.id)).all()
    assert after == [*kept, "compacted"]
    last = compaction.last_compaction(db.session, broadcast_id)
    assert last is not None and (last.days, last.removed) == (30, 7)
    # The timeline still answers "did this person get it, and why not?" from the row.
    refused = rows[2][0]
    moments = delivery_timeline(db.session, broadcast_id, refused).moments
    assert [m.kind for m in moments] == ["claimed"]
    assert "550" in delivery_timeline(db.session, broadcast_id, refused).row.explanation
    accepted = delivery_timeline(db.session, broadcast_id, rows[3][0]).moments
    assert [m.kind for m in accepted] == ["claimed", "sent"] and "250" in accepted[-1].detail
    # Nothing more to do: a second pass finds nothing and records nothing.
    assert compaction.compact_due(db.session, now=utcnow() + LATER) == []


def test_an_interrupted_compaction_resumes_where_it_stopped(app):
    broadcast_id = sent_broadcast(app, size=10)
    set_retention(30)
    total = delivery_events(broadcast_id)
    rows = rows_of(broadcast_id)
    now = utcnow() + LATER
    # Stopped after one batch of two (a deadline, a SIGTERM between batches): committed.
    first = compaction.compact_broadcast(db.session, broadcast_id, days=30, now=now, batch=2,
                                         max_batches=1)
    assert (first.removed, first.finished) == (2, False)
    assert delivery_events(broadcast_id) == total - 2
    assert compaction.last_compaction(db.session, broadcast_id) is None  # not done yet
    # A batch whose transaction dies leaves everything as it was.
    ids = db.session.scalars(select(Event.id).where(Event.broadcast_id == broadcast_id,
                                                    Event.delivery_id.is_not(None))).all()
    db.session.execute(Event.__table__.delete().where(Event.id.in_(ids[:2])))
    db.session.rollback()
    assert delivery_events(broadcast_id) == total - 2
    # The next pass (the worker's tick) goes on from what is left.
    [rest] = compaction.compact_due(db.session, now=now, batch=2)
    assert rest.finished and rest.removed == total - 2
    assert delivery_events(broadcast_id) == 0 and rows_of(broadcast_id) == rows
    kinds = db.session.scalars(select(Event.kind).where(Event.broadcast_id == broadcast_id,
                                                        Event.kind == "compacted")).all()
    assert kinds == ["compacted"]


@pytest.mark.parametrize("state", ["sending", "paused", "resent"])
def test_an_active_or_paused_broadcast_is_never_touched(app, state):
    broadcast_id = sent_broadcast(app, finish=state == "resent")
    if state == "paused":
        assert lifecycle.pause(db.session, broadcast_id, "the owner paused it")
    elif state == "resent":
        # Finished long ago, then sent again by the owner: active again.
        db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                           .values(finished_at=utcnow() - timedelta(days=90)))
        assert lifecycle.move(db.session, broadcast_id, "send_again")
    db.session.commit()
    # A finished_at long past would make it due if the guard read only the date.
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                       .values(finished_at=utcnow() - timedelta(days=90)))
    db.session.commit()
    set_retention(1)
    before = delivery_events(broadcast_id)
    assert before > 0
    assert compaction.compact_due(db.session, now=utcnow() + LATER) == []
    # Called on it directly, the DELETE's own guard refuses too.
    done = compaction.compact_broadcast(db.session, broadcast_id, days=1, now=utcnow() + LATER)
    assert (done.removed, done.finished) == (0, False)
    assert delivery_events(broadcast_id) == before


def test_the_worker_tick_compacts_once_per_period_and_continues_when_stopped_early(app):
    broadcast_id = sent_broadcast(app)
    set_retention(30)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                       .values(finished_at=utcnow() - timedelta(days=40)))
    db.session.execute(update(Event).where(Event.broadcast_id == broadcast_id)
                       .values(created_at=utcnow() - timedelta(days=40)))
    db.session.commit()
    jobs = get_jobs()
    key = f"{jobs.namespace}:compaction:ran"
    # A budget of zero stops before the first batch: the key is dropped, the next tick goes on.
    ensure_compaction(db.session, jobs, budget_seconds=0)
    assert delivery_events(broadcast_id) > 0 and not jobs.redis.exists(key)
    ensure_compaction(db.session, jobs)
    assert delivery_events(broadcast_id) == 0 and jobs.redis.exists(key)
    assert compaction.last_compaction(db.session, broadcast_id) is not None


def test_retention_is_validated_and_saved_in_one_step(app):
    with pytest.raises(SettingsError) as refused:
        update_history_retention(db.session, days="ninety")
    assert "whole number" in refused.value.message
    for bad in ("0", "-3", "3651", True):
        with pytest.raises(SettingsError):
            update_history_retention(db.session, days=bad)
    db.session.rollback()
    assert db.session.get(SiteSettings, 1) is None or \
        db.session.get(SiteSettings, 1).history_retention_days is None
    assert update_history_retention(db.session, days="90").history_retention_days == 90
    assert update_history_retention(db.session, days="forever").history_retention_days is None


def test_the_settings_form_and_the_broadcast_page(app, logged_in_client):
    client = logged_in_client
    page = client.get("/settings/")
    assert page.status_code == 200 and "Keep the step-by-step history of sent broadcasts for" in page.text
    token = csrf_token_from(page.text)
    bad = client.post("/settings/history", data={"csrf_token": token, "keep": "days",
                                                 "retention_days": "soon"})
    assert bad.status_code == 422 and "whole number from 1 to 3650" in bad.text
    missing = client.post("/settings/history", data={"csrf_token": token, "keep": "days"})
    assert missing.status_code == 422
    db.session.rollback()
    assert get_settings(db.session).history_retention_days is None  # nothing half-written
    saved = client.post("/settings/history", data={"csrf_token": token, "keep": "days",
                                                   "retention_days": "30"})
    assert saved.status_code == 303
    db.session.rollback()
    assert get_settings(db.session).history_retention_days == 30
    broadcast_id = sent_broadcast(app)
    assert "Step-by-step history removed" not in client.get(f"/broadcasts/{broadcast_id}").text
    compaction.compact_due(db.session, now=utcnow() + LATER)
    shown = client.get(f"/broadcasts/{broadcast_id}").text
    assert "Step-by-step history removed" in shown and "after 30 days" in shown
    assert "each recipient&#39;s final state is kept" in shown or \
        "each recipient's final state is kept" in shown
    forever = client.post("/settings/history", data={"csrf_token": token, "keep": "forever",
                                                     "retention_days": "30"})
    assert forever.status_code == 303
    db.session.rollback()
    assert get_settings(db.session).history_retention_days is None
