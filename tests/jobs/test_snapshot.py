"""The audience snapshot in chunks (broadside.campaigns.broadcasts.snapshot), on SQLite and PostgreSQL,
through the real worker, Redis and SMTP.

The press writes no rows when the database is large; these tests make "large" 5 people and a
chunk 7 subscriber ids, so a list of a few dozen is prepared by the worker over many chunks.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import lifecycle
from broadside.campaigns.broadcasts import snapshot as audience
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import (
    cancel_broadcast,
    pause_broadcast,
    resume_broadcast,
    schedule_broadcast,
    send_broadcast,
)
from broadside.core.errors import Conflict
from broadside.core.models import Broadcast, Delivery, Event, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from broadside.segments import service as segments
from tests.helpers import assert_ledger_consistent, assert_nobody_twice, broadcast_row, make_list, wait_until
from webapp.extensions import db, get_jobs

CHUNK = 7


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(audience, "INLINE_LIMIT", 5)
    monkeypatch.setattr(audience, "MIN_CHUNK", CHUNK)
    monkeypatch.setattr(audience, "MAX_CHUNK", CHUNK)
    monkeypatch.setattr(audience, "_rate", {})


def press(app, *, list_id=None, segment_id=None, enqueue=True) -> Broadcast:
    draft = create_draft(db.session, list_id=list_id, segment_id=segment_id, subject="Issue",
                         body="Hello {{ name }}")
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs() if enqueue else None)


def one_chunk(broadcast_id: int) -> None:
    """One chunk, committed (`seconds=0`: the job's budget is spent after its first)."""
    audience.prepare(db.session, broadcast_id, seconds=0)


def snapshotted(broadcast_id: int) -> list[int]:
    db.session.expire_all()
    rows = db.session.scalars(select(Delivery.subscriber_id)
                              .where(Delivery.broadcast_id == broadcast_id)).all()
    db.session.commit()
    return list(rows)


def active_ids(list_id: int) -> set[int]:
    return set(db.session.scalars(select(Subscription.subscriber_id).where(
        Subscription.list_id == list_id, Subscription.status == "active")))


def test_the_press_writes_no_rows_and_the_worker_prepares_and_sends_everyone_once(
        app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 60)
    broadcast = press(app, list_id=weekly.id)
    row = broadcast_row(broadcast.id)
    assert (row.status, row.total, row.pending_count, row.snapshot_cursor) == ("queued", 0, 0, 0)
    assert row.snapshot_until == db.session.scalar(select(func.max(Subscriber.id)))
    assert row.audience_estimate is None  # counted by the worker, not in the request
    assert snapshotted(broadcast.id) == []

    # One chunk: the counters grow with it, and the cursor is where its rows end.
    one_chunk(broadcast.id)
    row = broadcast_row(broadcast.id)
    assert row.total == row.pending_count == len(snapshotted(broadcast.id)) == CHUNK
    assert row.snapshot_cursor == max(snapshotted(broadcast.id))
    assert row.audience_estimate == 60

    run_worker_burst()
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert len(received) == 60
    assert assert_ledger_consistent(broadcast.id, received) == {"sent": 60}
    row = broadcast_row(broadcast.id)
    assert (row.status, row.total, row.snapshot_cursor) == ("sent", 60, row.snapshot_until)
    assert db.session.scalar(select(Event.detail).where(
        Event.broadcast_id == broadcast.id, Event.kind == "prepared")) == "60 recipients"


def test_a_person_joining_after_the_press_is_not_included_and_one_leaving_before_their_chunk_is_not(
        app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 30)
    broadcast = press(app, list_id=weekly.id)
    late = Subscriber(email="late@example.com", name="Late", attributes={})
    db.session.add(late)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=late.id, list_id=weekly.id, status="active"))
    last = db.session.scalar(select(func.max(Subscription.subscriber_id)).where(
        Subscription.list_id == weekly.id, Subscription.subscriber_id < late.id))
    db.session.execute(update(Subscription).where(Subscription.subscriber_id == last)
                       .values(status="unsubscribed"))
    db.session.commit()

    run_worker_burst()
    received = smtp_server.recipients()
    assert "late@example.com" not in received
    assert len(received) == 29 and len(set(received)) == 29
    assert late.id not in snapshotted(broadcast.id) and last not in snapshotted(broadcast.id)
    assert broadcast_row(broadcast.id).total == 29


def test_a_kill_mid_chunk_loses_nothing_and_doubles_nothing(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 50)
    broadcast = press(app, list_id=weekly.id, enqueue=False)
    one_chunk(broadcast.id)
    one_chunk(broadcast.id)
    # A worker killed in the middle of the third chunk: its transaction moved the cursor and
    # wrote the rows on its own connection, and the process died before COMMIT (a closed
    # connection is rolled back, as the database does for a dead client).
    doomed = Session(bind=db.engine)
    until = broadcast_row(broadcast.id).snapshot_until
    cursor = broadcast_row(broadcast.id).snapshot_cursor
    hi = audience._next_bound(doomed, cursor, until, CHUNK)
    assert audience._chunk(doomed, broadcast.id, cursor, hi, until) == CHUNK
    doomed.close()
    assert broadcast_row(broadcast.id).snapshot_cursor == cursor
    assert len(snapshotted(broadcast.id)) == 2 * CHUNK

    # A runner that read the cursor before another moved it writes nothing.
    assert audience._chunk(db.session, broadcast.id, 0, hi, until) is None
    db.session.rollback()

    # No job survived either: the restarted worker's orphan repair gives it one (invariant 7),
    # and it carries on from the committed cursor.
    run_worker_burst()
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert sorted(snapshotted(broadcast.id)) == sorted(active_ids(weekly.id))
    assert assert_ledger_consistent(broadcast.id, received) == {"sent": 50}
    assert broadcast_row(broadcast.id).status == "sent"


def test_finish_is_refused_while_the_snapshot_is_incomplete(app):
    weekly = make_list(db.session, 20)
    broadcast = press(app, list_id=weekly.id, enqueue=False)
    assert lifecycle.move(db.session, broadcast.id, "start")
    # Nothing is pending or in flight: only the incomplete snapshot stops it.
    assert not lifecycle.move(db.session, broadcast.id, "finish")
    db.session.commit()
    assert broadcast_row(broadcast.id).status == "sending"
    while not audience.prepare(db.session, broadcast.id, seconds=0):
        pass
    db.session.execute(update(Delivery).where(Delivery.broadcast_id == broadcast.id)
                       .values(status="skipped"))  # as if every row were dealt with
    assert lifecycle.move(db.session, broadcast.id, "finish")
    db.session.commit()


def test_cancel_while_preparing_stops_the_snapshot_and_skips_what_exists(
        app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 40)
    broadcast = press(app, list_id=weekly.id)
    one_chunk(broadcast.id)
    cancel_broadcast(db.session, broadcast.id)
    row = broadcast_row(broadcast.id)
    assert (row.status, row.total, row.skipped_count, row.pending_count) == ("cancelled", CHUNK, CHUNK, 0)
    cursor = row.snapshot_cursor
    assert audience.prepare(db.session, broadcast.id) is False  # a cancelled one writes nothing
    run_worker_burst()
    assert smtp_server.recipients() == []
    row = broadcast_row(broadcast.id)
    assert (row.snapshot_cursor, row.total, len(snapshotted(broadcast.id))) == (cursor, CHUNK, CHUNK)


def test_pause_while_preparing_keeps_it_resumable(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 40)
    broadcast = press(app, list_id=weekly.id)
    one_chunk(broadcast.id)
    pause_broadcast(db.session, broadcast.id)
    cursor = broadcast_row(broadcast.id).snapshot_cursor
    assert audience.prepare(db.session, broadcast.id) is False
    run_worker_burst()  # the queued job finds it paused: nothing written, nothing sent
    assert smtp_server.recipients() == []
    assert broadcast_row(broadcast.id).snapshot_cursor == cursor

    resume_broadcast(db.session, broadcast.id, jobs=get_jobs())
    db.session.rollback()  # as a request's teardown does (resume leaves a read open)
    run_worker_burst()
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert assert_ledger_consistent(broadcast.id, received) == {"sent": 40}
    assert broadcast_row(broadcast.id).status == "sent"


def test_a_segment_is_prepared_in_chunks_by_the_rules_frozen_at_the_press(
        app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 30, name="Weekly")
    news = make_list(db.session, 30, name="News", domain="news.example")
    berlin = set(db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()[::3])
    for subscriber in db.session.scalars(select(Subscriber)):
        subscriber.attributes = {"city": "Berlin" if subscriber.id in berlin else "Paris"}
    db.session.commit()
    segment = segments.create_segment(db.session, "Berlin", {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"},
        {"field": "list", "op": "is_on", "value": news.id}]})
    broadcast = press(app, segment_id=segment.id)
    assert broadcast_row(broadcast.id).audience_estimate is None
    # Editing the segment after the press changes nothing for this broadcast.
    segments.update_segment(db.session, segment.id, "Paris",
                            {"all": [{"field": "attributes.city", "op": "equals", "value": "Paris"}]})

    run_worker_burst()
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    expected = berlin & active_ids(news.id)
    assert expected and set(snapshotted(broadcast.id)) == expected
    assert assert_ledger_consistent(broadcast.id, received) == {"sent": len(expected)}
    assert all(r.endswith("@news.example") for r in received)
    assert set(db.session.scalars(select(Delivery.list_id).where(
        Delivery.broadcast_id == broadcast.id))) == {news.id}
    assert weekly.id != news.id


def test_two_presses_one_wins_and_the_audience_is_decided_once(app):
    weekly = make_list(db.session, 20)
    broadcast = press(app, list_id=weekly.id, enqueue=False)
    until = broadcast_row(broadcast.id).snapshot_until
    one_chunk(broadcast.id)
    cursor = broadcast_row(broadcast.id).snapshot_cursor
    with pytest.raises(Conflict):
        send_broadcast(db.session, broadcast.id, default_from=app.config["MAIL_FROM"], jobs=None)
    row = broadcast_row(broadcast.id)
    assert (row.snapshot_until, row.snapshot_cursor, row.total) == (until, cursor, CHUNK)
    assert db.session.scalar(select(func.count()).select_from(Event).where(
        Event.broadcast_id == broadcast.id, Event.kind == "queued")) == 1


def test_a_small_database_is_still_snapshotted_whole_at_the_press(app, monkeypatch):
    monkeypatch.setattr(audience, "INLINE_LIMIT", 10_000)
    weekly = make_list(db.session, 25)
    broadcast = press(app, list_id=weekly.id, enqueue=False)
    row = broadcast_row(broadcast.id)
    assert (row.total, row.pending_count, row.snapshot_cursor) == (25, 25, row.snapshot_until)
    assert db.session.scalar(select(MailingList.name).where(MailingList.id == weekly.id)) == "Weekly"


def test_a_scheduled_send_is_prepared_by_the_worker_when_its_time_comes(
        app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 30)
    draft = create_draft(db.session, list_id=weekly.id, subject="Later", body="Hello {{ name }}")
    schedule_broadcast(db.session, draft.id, utcnow() + timedelta(hours=1))
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id)
                       .values(scheduled_at=utcnow() - timedelta(minutes=1)))
    db.session.commit()
    run_worker_burst()  # the maintenance tick starts it (no rows at the press), then sends it
    received = smtp_server.recipients()
    assert_nobody_twice(received)
    assert assert_ledger_consistent(draft.id, received) == {"sent": 30}
    row = broadcast_row(draft.id)
    assert (row.status, row.audience_estimate, row.snapshot_cursor) == ("sent", 30, row.snapshot_until)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_chunk_takes_the_broadcast_row_before_any_delivery(app, database_url):
    """The lock order, held deterministically (as tests/reliability/test_steering.py does for
    the other writers): while another transaction holds the broadcast row, a chunk waits for
    it before it has written any delivery; then it writes its rows."""
    weekly = make_list(db.session, 20)
    broadcast = press(app, list_id=weekly.id, enqueue=False)
    errors: list[BaseException] = []
    engine = db.engine  # read here: the thread has no app context

    def run() -> None:
        try:
            with Session(engine) as session:
                audience.prepare(session, broadcast.id, seconds=0)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT id FROM broadcasts WHERE id = %s FOR UPDATE", (broadcast.id,))
        writer = threading.Thread(target=run)
        writer.start()
        wait_until(lambda: _waiting_on_a_lock(database_url), timeout=10,
                   message="the chunk did not wait for the broadcast row")
        with psycopg.connect(database_url, autocommit=True) as probe:
            writing = probe.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "WHERE c.relname = 'deliveries' AND l.mode = 'RowExclusiveLock'").fetchone()[0]
        assert writing == 0, "the chunk wrote deliveries before it held the broadcast row"
        holder.rollback()
    writer.join(10)
    assert not writer.is_alive() and errors == []
    assert len(snapshotted(broadcast.id)) == CHUNK


def _waiting_on_a_lock(database_url: str) -> bool:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'").fetchone()[0] > 0


def test_a_job_prepares_past_its_budget_only_while_fewer_rows_are_pending_than_it_needs(app):
    weekly = make_list(db.session, 40)
    broadcast = press(app, list_id=weekly.id, enqueue=False)
    # Budget spent after the first chunk; 10 rows wanted ahead: a second chunk is written.
    assert not audience.prepare(db.session, broadcast.id, seconds=0, ahead=10)
    assert broadcast_row(broadcast.id).pending_count == 14
    # Enough rows pending already: one chunk, then the budget ends it.
    assert not audience.prepare(db.session, broadcast.id, seconds=0, ahead=10)
    assert broadcast_row(broadcast.id).pending_count == 21
    # `longest` bounds it however few are pending.
    assert not audience.prepare(db.session, broadcast.id, seconds=0, ahead=10_000, longest=0)
    assert broadcast_row(broadcast.id).pending_count == 28
    assert audience.prepare(db.session, broadcast.id, seconds=0, ahead=10_000)
    assert broadcast_row(broadcast.id).pending_count == 40
    assert sorted(snapshotted(broadcast.id)) == sorted(active_ids(weekly.id))
