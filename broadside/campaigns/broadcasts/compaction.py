"""Compaction: a settled broadcast's step-by-step history, removed after the owner's retention.

Settings -> "Keep the step-by-step history of sent broadcasts for" (forever by default,
`SiteSettings.history_retention_days`). Once a broadcast has been settled (`sent` or
`cancelled`, with its `finished_at`) for longer than that, its per-delivery events older than
the retention (the ledger's claims, retries and outcomes: `STEP_KINDS` with a `delivery_id`)
are deleted; what stays:

- every delivery row, untouched: its final status, reason, SMTP code, error class, attempts and
  times (claimed, sent, updated), which is what the deliveries table and each recipient's
  timeline show (`broadside.campaigns.broadcasts.evidence` reads the row's moments);
- the broadcast's own events (queued, started, finished...) and the people's own (unsubscribed,
  a bounce, a complaint, a suppression), even those that name the delivery they came from;
- one `compacted` event on the broadcast saying when, after how many days, and how many
  events went, which the broadcast page reads (`last_compaction`).

Guarantees:

- Never an active broadcast: every DELETE carries the guard in its own WHERE (the broadcast is
  `sent` or `cancelled` and finished before the cutoff), so a broadcast that the owner sends
  again between two batches loses nothing more; on PostgreSQL the broadcast row is also held
  FOR SHARE for the batch (the lock order: broadcast first), so a "send again" waits for it.
- Resumable by construction: small batches (`BATCH` rows), each committed, chosen by keyset on
  the events' ids; a batch that dies changes nothing, a repeated one finds its rows gone.
  The next run simply continues with what is left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import delivery_events
from broadside.core.db import rowcount
from broadside.core.events import record_event
from broadside.core.models import Broadcast, Event, SiteSettings
from broadside.core.models.sending import BroadcastStatus
from broadside.core.timeutil import utcnow

BATCH = 1000
SETTLED = (BroadcastStatus.SENT.value, BroadcastStatus.CANCELLED.value)
KIND = "compacted"


@dataclass(frozen=True)
class Compaction:
    """What one broadcast's compaction pass did."""

    broadcast_id: int
    removed: int
    finished: bool  # nothing older than the cutoff is left (False: stopped early, or no longer settled)


@dataclass(frozen=True)
class LastCompaction:
    """The broadcast page's sentence: history removed on `at`, after `days` days."""

    at: datetime
    days: int
    removed: int


def retention_days(session: Session) -> int | None:
    """The owner's retention in days; None: keep everything (the default)."""
    settings = session.get(SiteSettings, 1)
    return settings.history_retention_days if settings is not None else None


def _settled_before(broadcast_id: int, cutoff: datetime):
    return exists().where(Broadcast.id == broadcast_id, Broadcast.status.in_(SETTLED),
                          Broadcast.finished_at.is_not(None), Broadcast.finished_at < cutoff)


# The ledger's own kinds: a delivery's moves. A bounce, a complaint or an unsubscribe may name
# a delivery too, but it is the person's evidence (their suppression, the metrics): kept.
STEP_KINDS = tuple(sorted(set(delivery_events.EVENT_FOR.values())))


def _old_delivery_events(cutoff: datetime):
    return (Event.delivery_id.is_not(None), Event.kind.in_(STEP_KINDS), Event.created_at < cutoff)


def due(session: Session, now: datetime, days: int, limit: int = 20) -> list[int]:
    """Settled broadcasts (finished more than `days` ago) that still have delivery events
    older than the cutoff, oldest first."""
    cutoff = now - timedelta(days=days)
    has_old = exists().where(Event.broadcast_id == Broadcast.id, *_old_delivery_events(cutoff))
    return list(session.scalars(
        select(Broadcast.id)
        .where(Broadcast.status.in_(SETTLED), Broadcast.finished_at.is_not(None),
               Broadcast.finished_at < cutoff, has_old)
        .order_by(Broadcast.id).limit(limit)))


def compact_broadcast(session: Session, broadcast_id: int, *, days: int,
                      now: datetime | None = None, batch: int = BATCH,
                      max_batches: int | None = None, deadline: float | None = None) -> Compaction:
    """Delete this broadcast's delivery events older than `days`, `batch` at a time, each batch
    committed; stop after `max_batches` or at `deadline` (time.monotonic()) with what is left
    for the next pass. Records the `compacted` event when nothing old is left."""
    now = now or utcnow()
    cutoff = now - timedelta(days=days)
    removed, after, batches = 0, 0, 0
    while True:
        if (max_batches is not None and batches >= max_batches) or \
                (deadline is not None and time.monotonic() >= deadline):
            return Compaction(broadcast_id, removed, False)
        # The broadcast first (lock order); FOR SHARE: a send again waits for this batch.
        settled = session.execute(
            select(Broadcast.id).where(Broadcast.id == broadcast_id, _settled_before(broadcast_id, cutoff))
            .with_for_update(read=True)).first()
        if settled is None:
            session.rollback()
            return Compaction(broadcast_id, removed, False)
        ids = list(session.scalars(
            select(Event.id)
            .where(Event.broadcast_id == broadcast_id, Event.id > after,
                   *_old_delivery_events(cutoff))
            .order_by(Event.id).limit(batch)))
        if not ids:
            if removed:
                record_event(session, KIND, broadcast_id=broadcast_id,
                             detail=f"step-by-step history removed after {days} days",
                             data={"days": days, "events": removed})
            session.commit()
            return Compaction(broadcast_id, removed, True)
        # The guard is in the DELETE itself, not only in the read above.
        result = session.execute(
            delete(Event)
            .where(Event.id.in_(ids), Event.broadcast_id == broadcast_id,
                   *_old_delivery_events(cutoff), _settled_before(broadcast_id, cutoff))
            .execution_options(synchronize_session=False))
        removed += rowcount(result)
        session.commit()
        after = ids[-1]
        batches += 1


def compact_due(session: Session, *, now: datetime | None = None, budget_seconds: float = 2.0,
                batch: int = BATCH) -> list[Compaction]:
    """One bounded pass over every broadcast due (nothing when the retention is forever):
    stops after `budget_seconds`, the rest waits for the next pass."""
    days = retention_days(session)
    session.commit()
    if days is None:
        return []
    now = now or utcnow()
    deadline = time.monotonic() + budget_seconds
    done = []
    for broadcast_id in due(session, now, days):
        done.append(compact_broadcast(session, broadcast_id, days=days, now=now, batch=batch,
                                      deadline=deadline))
        if time.monotonic() >= deadline:
            break
    return done


def last_compaction(session: Session, broadcast_id: int) -> LastCompaction | None:
    """The latest compaction of this broadcast, for its page; None if never compacted."""
    row = session.execute(
        select(Event.created_at, Event.data)
        .where(Event.broadcast_id == broadcast_id, Event.kind == KIND, Event.delivery_id.is_(None))
        .order_by(Event.id.desc()).limit(1)).first()
    if row is None:
        return None
    data = row.data or {}
    return LastCompaction(row.created_at, int(data.get("days", 0)), int(data.get("events", 0)))
