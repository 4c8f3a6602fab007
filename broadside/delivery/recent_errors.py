"""The System page's recent errors: deliveries and transactional mail (test sends, sign-up
confirmations) that failed, ended unknown, or wait to retry after an error; newest first.

The deliveries are found through their events (the ledger records `failed`, `unknown` and
`retry` as each happens) among the newest ERROR_EVENTS_WINDOW events: a range of the events'
primary key, so the page costs the same with ten million deliveries in history; an error
older than that is still on its broadcast's deliveries table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from broadside.core.models import Broadcast, Delivery, Event, Subscriber, TransactionalMessage

ERRORS_SHOWN = 20
ERROR_EVENTS_WINDOW = 100_000


@dataclass(frozen=True)
class ErrorRow:
    delivery_id: int | None  # None for transactional mail
    status: str
    error_class: str | None
    smtp_code: int | None
    reason: str | None
    at: datetime | None
    attempts: int
    broadcast_id: int | None
    subject: str
    email: str | None
    kind: str = "broadcast"  # broadcast | test | confirmation (transactional mail)


def last_errors(session: Session, limit: int = ERRORS_SHOWN) -> list[ErrorRow]:
    """Deliveries and transactional mail (test sends, sign-up confirmations) that failed,
    ended unknown, or wait to retry after an error; newest first.

    The deliveries are found through their events (the ledger records `failed`, `unknown` and
    `retry` as each happens) among the newest ERROR_EVENTS_WINDOW events, never by reading the
    deliveries of every broadcast ever sent; each is then shown as it stands now."""
    newest = session.scalar(select(func.max(Event.id))) or 0
    recent = (
        select(Event.delivery_id)
        .where(Event.id > newest - ERROR_EVENTS_WINDOW, Event.kind.in_(("failed", "unknown", "retry")),
               Event.delivery_id.is_not(None))
        .order_by(Event.id.desc())
        .limit(limit * 5)
    ).subquery()
    rows = session.execute(
        select(Delivery.id, Delivery.status, Delivery.error_class, Delivery.smtp_code,
               Delivery.reason, Delivery.updated_at, Delivery.attempts, Broadcast.id,
               Broadcast.subject, Subscriber.email)
        .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.id.in_(select(recent.c.delivery_id)),
               or_(Delivery.status.in_(("failed", "unknown")),
                   and_(Delivery.status == "pending", Delivery.error_class.is_not(None))))
        .order_by(Delivery.updated_at.desc(), Delivery.id.desc())
        .limit(limit)
    ).all()
    errors = [ErrorRow(*row) for row in rows]
    # Transactional mail keeps no update time: it is tried within seconds of being queued
    # (retries within minutes), so the time it was queued stands for when it failed.
    mail = TransactionalMessage
    for row in session.execute(
        select(mail.status, mail.reason, mail.created_at, mail.attempts, mail.broadcast_id,
               mail.subject, mail.to_email, mail.kind)
        .where(or_(mail.status.in_(("failed", "unknown")),
                   and_(mail.status == "pending", mail.attempts > 0, mail.reason.is_not(None))))
        .order_by(mail.created_at.desc(), mail.id.desc())
        .limit(limit)
    ).all():
        errors.append(ErrorRow(None, row.status, None, None, row.reason, row.created_at, row.attempts,
                               row.broadcast_id, row.subject, row.to_email, row.kind))
    session.commit()
    errors.sort(key=lambda e: e.at or datetime.min, reverse=True)
    return errors[:limit]
