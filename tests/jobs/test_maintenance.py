"""Orphan repair, schedules and the hourly cap: what the one worker does besides sending."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from broadside.campaigns.broadcasts import ledger
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.lifecycle import MAX_AUTO_RESUMES
from broadside.core.models import Broadcast, Delivery, TransactionalMessage
from broadside.core.timeutil import utcnow
from broadside.delivery import queues
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.smtp import SmtpTransport
from jobs.broadcasts import broadcast_slice
from jobs.maintenance import ensure_jobs, mark_orphans_unknown
from tests.helpers import counters, make_list, start_broadcast, worker_runtime
from webapp.extensions import db, get_jobs


@pytest.fixture
def runtime(app, smtp_server):
    rt = worker_runtime(app, SmtpTransport(smtp_server.url), identity="test")
    assert rt.lease.try_acquire()
    yield rt
    rt.transport.close()


def queued_broadcast_ids(app) -> list[int]:
    return [job.args[0] for job in get_jobs().queue(queues.BROADCASTS).get_jobs()]


def test_a_due_schedule_starts_even_if_the_worker_was_down_at_that_moment(app, runtime):
    weekly = make_list(db.session, 3)
    draft = create_draft(db.session, list_id=weekly.id, subject="Later", body="x")
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id)
                       .values(status="scheduled", scheduled_at=utcnow() - timedelta(hours=2)))
    future = create_draft(db.session, list_id=weekly.id, subject="Not yet", body="x")
    db.session.execute(update(Broadcast).where(Broadcast.id == future.id)
                       .values(status="scheduled", scheduled_at=utcnow() + timedelta(hours=2)))
    db.session.commit()
    ensure_jobs(db.session, runtime)
    db.session.expire_all()
    assert db.session.get(Broadcast, draft.id).status == "queued"
    assert db.session.get(Broadcast, draft.id).total == 3
    assert db.session.get(Broadcast, future.id).status == "scheduled"
    assert queued_broadcast_ids(app) == [draft.id]


def test_active_broadcast_without_a_job_gets_exactly_one(app, runtime):
    weekly = make_list(db.session, 2)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    ensure_jobs(db.session, runtime)
    ensure_jobs(db.session, runtime)  # the marker stops a second job
    assert queued_broadcast_ids(app) == [broadcast.id]
    db.session.refresh(broadcast)
    assert broadcast.auto_resumes == 0  # queued, never started: not a resumption


def test_automatic_resumption_is_bounded_then_paused_with_reason(app, runtime):
    weekly = make_list(db.session, 2)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id).values(status="sending"))
    db.session.commit()
    for attempt in range(1, MAX_AUTO_RESUMES + 1):
        ensure_jobs(db.session, runtime)
        get_jobs().clear_marker("slice", broadcast.id)  # as if the job died again
        db.session.expire_all()
        assert db.session.get(Broadcast, broadcast.id).auto_resumes == attempt
    ensure_jobs(db.session, runtime)
    db.session.expire_all()
    stopped = db.session.get(Broadcast, broadcast.id)
    assert stopped.status == "paused"
    assert "without progress" in stopped.pause_reason


def test_pending_transactional_mail_without_a_job_gets_one(app, runtime):
    message = TransactionalMessage(kind="confirmation", to_email="a@example.com", subject="s",
                                   html="<p>x</p>", text="x", status="pending")
    db.session.add(message)
    db.session.commit()
    ensure_jobs(db.session, runtime)
    jobs = get_jobs().queue(queues.TRANSACTIONAL).get_jobs()
    assert [job.args[0] for job in jobs] == [message.id]


def test_hourly_cap_holds_sending_and_says_so_until_reset(app, runtime, smtp_server):
    runtime.hourly = HourlyCap(runtime.hourly.redis, app.config["BROADSIDE_NAMESPACE"], 3)
    runtime.config["SLICE_SECONDS"] = 0.3
    weekly = make_list(db.session, 5)
    broadcast = start_broadcast(app, weekly, enqueue=False)

    assert broadcast_slice(db.session, runtime, broadcast.id).run().outcome == "continue"
    assert len(smtp_server.recipients()) == 3
    db.session.expire_all()
    assert "hourly limit (3 per hour)" in db.session.get(Broadcast, broadcast.id).notice

    runtime.hourly.reset()  # the owner's reset moves the window; nothing is deleted
    runtime.config["SLICE_SECONDS"] = 5
    assert broadcast_slice(db.session, runtime, broadcast.id).run().outcome == "finished"
    assert len(smtp_server.recipients()) == 5
    assert counters(broadcast.id) == {"sent": 5}
    assert db.session.scalar(select(Broadcast.notice).where(Broadcast.id == broadcast.id)) is None


def orphaned_sending(app, size: int) -> tuple[Broadcast, list]:
    """A broadcast to `size` people left `sending` without a job, and its (delivery, subscriber)
    rows in order."""
    broadcast = start_broadcast(app, make_list(db.session, size), enqueue=False)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id).values(status="sending"))
    db.session.commit()
    rows = db.session.execute(
        select(Delivery.id, Delivery.subscriber_id).where(Delivery.broadcast_id == broadcast.id)
        .order_by(Delivery.id)).all()
    return broadcast, list(rows)


def test_resumptions_with_deliveries_settled_between_them_are_never_paused(app, runtime):
    """A worker killed again and again that still delivers between its deaths keeps going:
    the bound counts runs of resumptions without progress, not resumptions."""
    broadcast, pending = orphaned_sending(app, MAX_AUTO_RESUMES * 3)
    for life in range(MAX_AUTO_RESUMES * 2):
        ensure_jobs(db.session, runtime)
        get_jobs().clear_marker("slice", broadcast.id)  # the job died again...
        # ...after this life had delivered one message and recorded it.
        delivery_id, subscriber_id = pending[life]
        assert ledger.claim(db.session, broadcast.id, [(delivery_id, subscriber_id)]) == [delivery_id]
        ledger.transition(db.session, broadcast.id, [ledger.Change(delivery_id, subscriber_id)],
                          source="sending", target="sent")
        db.session.commit()
        db.session.expire_all()
        assert db.session.get(Broadcast, broadcast.id).status == "sending", f"life {life}"
    assert db.session.get(Broadcast, broadcast.id).auto_resumes == 1


def test_crashes_that_only_leave_unknown_rows_are_no_progress(app, runtime):
    """A worker that dies mid-send every time leaves its claimed row `unknown`: a final state,
    but not progress, so the bound still pauses the broadcast with the reason."""
    broadcast, rows = orphaned_sending(app, MAX_AUTO_RESUMES + 2)
    for life in range(MAX_AUTO_RESUMES + 1):
        ensure_jobs(db.session, runtime)
        get_jobs().clear_marker("slice", broadcast.id)
        delivery_id, subscriber_id = rows[life]
        ledger.claim(db.session, broadcast.id, [(delivery_id, subscriber_id)])
        db.session.commit()
        mark_orphans_unknown(db.session, exclude_broadcast=None, older_than=None)
    db.session.expire_all()
    stopped = db.session.get(Broadcast, broadcast.id)
    assert stopped.status == "paused", stopped.auto_resumes
    assert f"{MAX_AUTO_RESUMES} times in a row without progress" in stopped.pause_reason
    assert stopped.unknown_count == MAX_AUTO_RESUMES + 1 and stopped.sent_count == 0
