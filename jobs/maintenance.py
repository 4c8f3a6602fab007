"""Orphan repair and the periodic checks each stream's worker runs while it holds its lease,
over its own identity's rows.

Invariant 5: a delivery, an automation message or a transactional message found in `sending`
with no live sender is moved to `unknown` (through its own ledger, guarded by
`status = 'sending'`), shown to the owner, and never resent automatically. Invariant 7:
every broadcast in `queued`/`sending` without a job gets one, a bounded number of times in
a row without progress (the lifecycle's `auto_resume` and `stalled`); past the bound it is
paused with the reason (the lifecycle's one `pause`).
A cancelled broadcast with rows still pending gets a job that skips them (a large cancel is
finished by the worker, and a skip cut short by a crash resumes: `_ensure_skipping`).
The reputation guard judges the stream's own identity here (`guard_reputation`), never per
message sent.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.automations import ledger as automation_ledger
from broadside.campaigns.broadcasts import cancelling, ledger, lifecycle
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.transactional.sending import clear_expired_keys
from broadside.core.models import (
    Automation,
    AutomationMessage,
    Broadcast,
    Delivery,
    ReputationMark,
)
from broadside.core.timeutil import utcnow
from broadside.delivery import transactional_ledger
from broadside.feedback.reputation import guard
from broadside.feedback.reputation.lines import lines
from jobs import transactional
from jobs.automations import anything_due, evaluation_due, follow_settings
from jobs.compaction import ensure_compaction
from jobs.content_retention import ensure_content_removed
from jobs.engine import paused_notice
from jobs.feeds import ensure_feed_polls
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")

STALE_CLAIM = timedelta(seconds=60)
# The reputation guard looks again at once when a bounce or complaint was marked or the lines
# changed since its last look, and at least this often otherwise (sends alone can bring a
# window up to the minimum it judges).
REPUTATION_EVERY_S = 60.0


ORPHANED = {
    "error_class": "ambiguous",
    "reason": "The worker stopped while sending this message; it may or may not have "
    "been delivered, so it is not sent again automatically.",
}


def _of(column, identity_id: int | None):
    return column.is_(None) if identity_id is None else column == identity_id


def mark_orphans_unknown(
    session: Session, *, exclude_broadcast: int | None, older_than: timedelta | None,
    exclude_automations: bool = False, identity_id: int | None = None,
) -> int:
    """Rows of one identity's stream left in `sending` by a sender that is gone become
    `unknown` (another identity's rows belong to its own worker, alive or not)."""
    query = select(Delivery.broadcast_id, Delivery.id, Delivery.subscriber_id).where(
        Delivery.status == "sending",
        Delivery.broadcast_id.in_(select(Broadcast.id).where(_of(Broadcast.identity_id, identity_id))),
    )
    if exclude_broadcast is not None:
        query = query.where(Delivery.broadcast_id != exclude_broadcast)
    if older_than is not None:
        query = query.where(Delivery.claimed_at < utcnow() - older_than)
    by_broadcast: dict[int, list[ledger.Change]] = {}
    for broadcast_id, delivery_id, subscriber_id in session.execute(query).all():
        by_broadcast.setdefault(broadcast_id, []).append(
            ledger.Change(
                delivery_id,
                subscriber_id,
                dict(ORPHANED),
                detail="worker stopped mid-send",
            )
        )
    moved = 0
    for broadcast_id, changes in by_broadcast.items():
        moved += len(ledger.transition(session, broadcast_id, changes, source="sending", target="unknown"))
    if not exclude_automations:
        # Automation messages: the same repair, through their own ledger.
        auto_query = select(AutomationMessage.id, AutomationMessage.subscriber_id).where(
            AutomationMessage.status == "sending",
            AutomationMessage.automation_id.in_(
                select(Automation.id).where(_of(Automation.identity_id, identity_id))))
        if older_than is not None:
            auto_query = auto_query.where(AutomationMessage.claimed_at < utcnow() - older_than)
        moved += len(automation_ledger.transition(session, [
            ledger.Change(message_id, subscriber_id, dict(ORPHANED), detail="worker stopped mid-send")
            for message_id, subscriber_id in session.execute(auto_query).all()
        ], source="sending", target="unknown"))
    if not transactional.running(identity_id):
        # Through their own ledger too; their rows keep no claim time, so only while no
        # transactional slice of this identity runs here (jobs.transactional).
        moved += transactional_ledger.repair_orphans(session, identity_id, ORPHANED["reason"])
    session.commit()
    if moved:
        log.warning("repaired %d deliveries left in flight: now unknown", moved)
    return moved


def ensure_jobs(session: Session, rt: Runtime) -> None:
    """Give every active broadcast, due schedule and pending transactional message a job."""

    _ensure_skipping(session, rt)
    # The API's Idempotency-Keys older than a day are cleared, so each may name a new request.
    if clear_expired_keys(session):
        log.info("expired Idempotency-Keys cleared")
    now = utcnow()
    for broadcast_id in session.scalars(
        select(Broadcast.id).where(Broadcast.status == "scheduled", Broadcast.scheduled_at <= now)
    ):
        try:
            send_broadcast(
                session,
                broadcast_id,
                default_from=rt.config["MAIL_FROM"],
                jobs=None,
                scheduled=True,
            )
            log.info("scheduled broadcast %s started", broadcast_id)
        except Exception as exc:  # one bad schedule must not stop the others
            session.rollback()
            log.warning("scheduled broadcast %s could not start: %s", broadcast_id, exc)

    active = session.execute(
        select(Broadcast.id, Broadcast.status, Broadcast.notice, Broadcast.waiting_until).where(
            Broadcast.status.in_([s.value for s in lifecycle.ACTIVE]),
            _of(Broadcast.identity_id, rt.identity_id),
        )
    ).all()
    guard_reputation(session, rt)
    paused = rt.pause_reason(session)
    session.commit()
    if paused is not None:
        # The identity is paused: nothing of its stream gets a job until it is resumed; its
        # active broadcasts say why they wait.
        notice = paused_notice(rt.identity_name, paused)
        for broadcast_id, status, current, _waiting in active:
            if status == "queued" and not rt.jobs.has_marker("slice", broadcast_id):
                rt.jobs.enqueue_slice(broadcast_id, rt.identity_id)  # it starts, then holds
            elif current != notice:
                lifecycle.set_notice(session, broadcast_id, notice)
        session.commit()
        _ensure_evaluation(session, rt)  # entering people sends nothing: it goes on
        return
    for broadcast_id, status, shown, waiting in active:
        if shown and shown.startswith("Waiting: the sending identity"):
            lifecycle.set_notice(session, broadcast_id, None)  # resumed meanwhile
            session.commit()
        if broadcast_id == rt.running_broadcast or rt.jobs.has_marker("slice", broadcast_id):
            continue
        if waiting is not None and status == "sending":
            # Its last slice found nothing due before `waiting_until` (readers' own hours, an
            # A/B test's wait): a job once that has come, which is no stall.
            if waiting > now:
                continue
            session.execute(update(Broadcast).where(Broadcast.id == broadcast_id,
                                                    Broadcast.waiting_until == waiting)
                            .values(waiting_until=None))
            session.commit()
        elif status == "sending":
            # It was sending and lost its job (a crash, a Redis flush): resume, boundedly.
            runs = lifecycle.stalled(session, broadcast_id)
            if runs is not None:
                reason = (
                    f"Sending stopped {runs} times in a row without progress, so "
                    "Broadside paused it. Check the System page and the worker log, then press Resume."
                )
                if lifecycle.pause(session, broadcast_id, reason):
                    log.warning("broadcast paused: %s", reason)
                session.commit()
                continue
            # Guarded by `status = 'sending'`: an owner's pause since the read above wins.
            if lifecycle.move(session, broadcast_id, "auto_resume"):
                log.info("broadcast %s had no job: resuming it", broadcast_id)
            session.commit()
        rt.jobs.enqueue_slice(broadcast_id, rt.identity_id)

    for message_id in transactional.due_transactional(session, rt.identity_id):
        rt.jobs.enqueue_transactional(message_id, rt.identity_id)
    # Automations: revisions frozen with a sender or postal address no longer in force are
    # refrozen (their held messages then become due); due messages get a slice, a due
    # lifecycle evaluation a job (each at most one queued at a time; a running one queues its
    # own continuation).
    follow_settings(session, rt)
    if not rt.running_automations and anything_due(session, identity_id=rt.identity_id) and \
            not rt.jobs.has_marker("automations", rt.identity_id or 0):
        rt.jobs.enqueue_automations(rt.identity_id)
    _ensure_evaluation(session, rt)
    ensure_feed_polls(session, rt)


def guard_reputation(session: Session, rt: Runtime) -> str | None:
    """The reputation guard over this stream's identity (broadside.feedback.reputation.guard),
    when something it judges changed; the reason when it paused the identity."""
    seen = (session.scalar(select(func.max(ReputationMark.id))), lines(session))
    session.commit()
    if seen == rt.reputation_seen and time.monotonic() - rt.reputation_checked_at < REPUTATION_EVERY_S:
        return None
    rt.reputation_seen, rt.reputation_checked_at = seen, time.monotonic()
    reason = guard.check(session, rt.identity_id, label=rt.identity_name)
    session.commit()
    if reason:
        log.warning("identity %s paused: %s", rt.identity_name, reason)
    return reason


def _ensure_skipping(session: Session, rt: Runtime) -> None:
    """A cancelled broadcast of this stream with rows still pending gets a job that skips
    them (broadside.campaigns.broadcasts.cancelling): after a large cancel, and after a worker died
    mid-skip. It sends nothing, so it goes on while the identity is paused."""
    for broadcast_id, identity_id in cancelling.unfinished(session):
        if identity_id != rt.identity_id or broadcast_id == rt.running_broadcast:
            continue
        if rt.jobs.enqueue_slice(broadcast_id, rt.identity_id):
            log.info("cancelled broadcast %s has rows to skip: queued", broadcast_id)
    session.commit()


def _ensure_evaluation(session: Session, rt: Runtime) -> None:
    if evaluation_due(session) and not rt.jobs.has_marker("evaluation", 0):
        rt.jobs.enqueue_evaluation()
    session.commit()
    # Outgoing webhooks are not a stream's: the worker's webhook runner (jobs.webhooks_out)
    # keeps them, paused identity or not.
    ensure_compaction(session, rt.jobs)
    ensure_content_removed(session, rt.jobs)
