"""The only writer of an outbox row's status: each move one guarded UPDATE (`WHERE status = …`).

    pending --claim--> sending --delivered--> delivered
                               --retry------> pending (next_attempt_at: exponential backoff)
                               --give_up----> failed  (still failing a day after the event)
    sending --release--> pending   (a batch's rows the runner had no time for: not counted)
    sending --stale----> pending or failed   (a worker stopped mid-POST: a counted attempt,
                                              "no answer before the worker stopped")

Delivered once per event id per endpoint by this side: a row is claimed (committed) before its
POST and moved only from `sending` after it, so a second runner finds nothing to do. A crash
between the POST and its record leaves the row `sending`; after `STALE_CLAIM` it counts as a
failed attempt and is POSTed again, which is why delivery is at-least-once across crashes and
the event id is stable: receivers deduplicate on it (README, "Outgoing webhooks"). Counting it
matters: a receiver whose answer kills the worker every time still ends disabled.

The endpoint's own failure clock is kept here too: `failing_since` is set by the first failure
after a success and cleared by any success; a failure a whole window (a day) after it disables
the endpoint (`endpoints.move("disable")`) with the reason the pages show.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.models import WebhookEndpoint, WebhookMessage
from broadside.webhooks import endpoints

_OUTBOX = WebhookMessage.__table__
STALE_CLAIM = timedelta(minutes=5)
MAX_BACKOFF = timedelta(hours=1)
MAX_ERROR = 500
KEEP = timedelta(days=30)  # how long the log keeps a delivered or failed event


def _due(now: datetime):
    return and_(
        WebhookMessage.status == "pending",
        WebhookMessage.next_attempt_at <= now,
        WebhookMessage.endpoint_id.in_(
            select(WebhookEndpoint.id).where(WebhookEndpoint.status == "enabled")),
    )


def anything_due(session: Session, now: datetime) -> bool:
    return session.scalar(select(WebhookMessage.id).where(_due(now)).limit(1)) is not None


def due_endpoints(session: Session, now: datetime, *, exclude: Collection[int] = (),
                  limit: int) -> list[int]:
    """Up to `limit` enabled endpoints with due events (not those in `exclude`: served
    already), the one whose event has waited longest first."""
    query = (select(WebhookMessage.endpoint_id).where(_due(now))
             .group_by(WebhookMessage.endpoint_id)
             .order_by(func.min(WebhookMessage.next_attempt_at), WebhookMessage.endpoint_id)
             .limit(limit))
    if exclude:
        query = query.where(WebhookMessage.endpoint_id.not_in(list(exclude)))
    return list(session.scalars(query))


def claim(session: Session, now: datetime, limit: int, *,
          endpoint_id: int | None = None) -> list[int]:
    """pending -> sending for up to `limit` due rows of enabled endpoints (of one, when
    named), oldest first; the caller commits before any POST."""
    query = select(WebhookMessage.id).where(_due(now))
    if endpoint_id is not None:
        query = query.where(WebhookMessage.endpoint_id == endpoint_id)
    ids = list(session.scalars(
        query.order_by(WebhookMessage.next_attempt_at, WebhookMessage.id).limit(limit)))
    if not ids:
        return []
    return sorted(session.connection().execute(
        update(_OUTBOX)
        .where(_OUTBOX.c.id.in_(ids), _OUTBOX.c.status == "pending")
        .values(status="sending", claimed_at=now, updated_at=now,
                attempts=_OUTBOX.c.attempts + 1)
        .returning(_OUTBOX.c.id)
    ).scalars())


def _from_sending(session: Session, message_id: int, **values) -> bool:
    return rowcount(session.execute(
        update(WebhookMessage)
        .where(WebhookMessage.id == message_id, WebhookMessage.status == "sending")
        .values(**values)
        .execution_options(synchronize_session=False)
    )) == 1


def delivered(session: Session, message_id: int, endpoint_id: int, code: int,
              now: datetime) -> bool:
    """sending -> delivered; the endpoint is healthy again. Does not commit."""
    moved = _from_sending(session, message_id, status="delivered", response_code=code,
                          last_error=None, delivered_at=now, updated_at=now)
    if moved:
        session.execute(
            update(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id)
            .values(failing_since=None, last_success_at=now)
            .execution_options(synchronize_session=False))
    return moved


def backoff(attempts: int, base_seconds: float) -> timedelta:
    """Exponential from `base_seconds` after the first attempt, capped at an hour, with a
    little jitter so a recovered receiver is not hit by every waiting event at once."""
    seconds = min(base_seconds * 2 ** max(attempts - 1, 0), MAX_BACKOFF.total_seconds())
    return timedelta(seconds=seconds * random.uniform(1.0, 1.2))


def failed_attempt(session: Session, message_id: int, endpoint_id: int, *, code: int | None,
                   error: str, now: datetime, window: timedelta, base_seconds: float) -> str:
    """sending -> pending (a later attempt) or failed (the event is older than `window`);
    a failure `window` after the endpoint's first one disables it. Returns the new status
    ("" when the row had already moved). Does not commit."""
    row = session.execute(
        select(WebhookMessage.created_at, WebhookMessage.attempts)
        .where(WebhookMessage.id == message_id)).one_or_none()
    if row is None:
        return ""
    deadline = row.created_at + window
    error = error[:MAX_ERROR]
    if now >= deadline:
        status = "failed" if _from_sending(
            session, message_id, status="failed", response_code=code, last_error=error,
            updated_at=now) else ""
    else:
        next_at = min(now + backoff(row.attempts, base_seconds), deadline)
        status = "pending" if _from_sending(
            session, message_id, status="pending", response_code=code, last_error=error,
            next_attempt_at=next_at, updated_at=now) else ""
    if status:
        _failing(session, endpoint_id, error, now, window)
    return status


def _failing(session: Session, endpoint_id: int, error: str, now: datetime,
             window: timedelta) -> None:
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.failing_since.is_(None))
        .values(failing_since=now).execution_options(synchronize_session=False))
    since = session.scalar(select(WebhookEndpoint.failing_since)
                           .where(WebhookEndpoint.id == endpoint_id))
    if since is not None and now - since >= window:
        hours = (now - since).total_seconds() / 3600
        span = f"{hours:.0f} hours" if hours >= 2 else f"{(now - since).total_seconds():.0f} seconds"
        endpoints.move(session, endpoint_id, "disable", reason=(
            f"Disabled by Broadside: every delivery failed for {span}. Last error: {error} "
            "Fix the receiver, then enable the endpoint: the events still waiting go out again."))


def release(session: Session, message_ids: Sequence[int], now: datetime) -> int:
    """Claimed rows the runner had no time to POST (its budget spent, a stop asked) go back
    to pending, their attempt not counted. Does not commit."""
    if not message_ids:
        return 0
    return rowcount(session.execute(
        update(WebhookMessage)
        .where(WebhookMessage.id.in_(list(message_ids)), WebhookMessage.status == "sending")
        .values(status="pending", attempts=WebhookMessage.attempts - 1, updated_at=now)
        .execution_options(synchronize_session=False)))


STOPPED = ("No answer before the worker stopped: it ended during this delivery (a receiver "
           "whose answer stops the worker every time ends disabled); sent again under the "
           "same event id.")


def release_stale(session: Session, now: datetime, *, window: timedelta, base_seconds: float,
                  older_than: timedelta = STALE_CLAIM) -> int:
    """Rows left `sending` by a worker that stopped count as failed attempts (`STOPPED`), with
    the backoff, the window and the endpoint's failure clock of any other (at-least-once: the
    POST may have reached the receiver, which deduplicates by event id). Does not commit."""
    stale = session.execute(
        select(WebhookMessage.id, WebhookMessage.endpoint_id)
        .where(WebhookMessage.status == "sending", WebhookMessage.claimed_at < now - older_than)
        .order_by(WebhookMessage.id)).all()
    return sum(1 for message_id, endpoint_id in stale if failed_attempt(
        session, message_id, endpoint_id, code=None, error=STOPPED, now=now, window=window,
        base_seconds=base_seconds))


def prune(session: Session, now: datetime, keep: timedelta = KEEP, limit: int = 5000) -> int:
    """Forget delivered and failed events older than `keep` (their payloads name people), at
    most `limit` rows per call. Does not commit."""
    old = list(session.scalars(
        select(WebhookMessage.id)
        .where(WebhookMessage.created_at < now - keep,
               WebhookMessage.status.in_(("delivered", "failed")))
        .limit(limit)))
    if not old:
        return 0
    return rowcount(session.execute(
        delete(WebhookMessage).where(WebhookMessage.id.in_(old))
        .execution_options(synchronize_session=False)))


def log(session: Session, endpoint_id: int, limit: int = 50) -> list[WebhookMessage]:
    """The endpoint's newest events, for its delivery log."""
    return list(session.scalars(
        select(WebhookMessage).where(WebhookMessage.endpoint_id == endpoint_id)
        .order_by(WebhookMessage.id.desc()).limit(limit)))


def counts(session: Session, endpoint_id: int) -> dict[str, int]:
    return {status: n for status, n in session.execute(
        select(WebhookMessage.status, func.count()).where(WebhookMessage.endpoint_id == endpoint_id)
        .group_by(WebhookMessage.status))}
