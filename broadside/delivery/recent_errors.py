"""The System page's recent errors: deliveries, automation messages and transactional mail
(test sends, sign-up confirmations) that failed, ended unknown, or wait to retry after an
error; newest first. Each row says what it belongs to, so the page can link where the owner
acts: the broadcast, the automation's messages, the subscriber.

Deliveries and automation messages are found through their events (their ledgers record
`failed`, `unknown` and `retry` as each happens) among the newest ERROR_EVENTS_WINDOW events:
a range of the events' primary key, so the page costs the same with ten million of them in
history; an error older than that is still on its broadcast's deliveries table or its
automation's messages page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, literal, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql import Subquery

from broadside.core.models import (
    Automation,
    AutomationMessage,
    AutomationRevision,
    Broadcast,
    Delivery,
    Event,
    Subscriber,
    TransactionalMessage,
)
from broadside.delivery.content_retention import removal_words

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
    kind: str = "broadcast"  # broadcast | automation | test | confirmation (transactional)
    subscriber_id: int | None = None
    automation_id: int | None = None
    automation_name: str | None = None
    step: int | None = None  # an automation message's step


def last_errors(session: Session, limit: int = ERRORS_SHOWN) -> list[ErrorRow]:
    """Deliveries and transactional mail (test sends, sign-up confirmations) that failed,
    ended unknown, or wait to retry after an error; newest first.

    The deliveries are found through their events (the ledger records `failed`, `unknown` and
    `retry` as each happens) among the newest ERROR_EVENTS_WINDOW events, never by reading the
    deliveries of every broadcast ever sent; each is then shown as it stands now."""
    newest = session.scalar(select(func.max(Event.id))) or 0

    def recent(column: InstrumentedAttribute[int | None]) -> Subquery:
        """The rows `column` names in the newest error events."""
        return (select(column)
                .where(Event.id > newest - ERROR_EVENTS_WINDOW,
                       Event.kind.in_(("failed", "unknown", "retry")), column.is_not(None))
                .order_by(Event.id.desc())
                .limit(limit * 5)).subquery()

    deliveries = recent(Event.delivery_id)
    rows = session.execute(
        select(Delivery.id, Delivery.status, Delivery.error_class, Delivery.smtp_code,
               Delivery.reason, Delivery.updated_at, Delivery.attempts, Broadcast.id,
               Broadcast.subject, Subscriber.email, literal("broadcast"), Delivery.subscriber_id)
        .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.id.in_(select(deliveries.c.delivery_id)),
               or_(Delivery.status.in_(("failed", "unknown")),
                   and_(Delivery.status == "pending", Delivery.error_class.is_not(None))))
        .order_by(Delivery.updated_at.desc(), Delivery.id.desc())
        .limit(limit)
    ).all()
    errors = [ErrorRow(*row) for row in rows]
    message = AutomationMessage
    messages = recent(Event.automation_message_id)
    for found in session.execute(
        select(message.status, message.error_class, message.smtp_code, message.reason,
               func.coalesce(message.updated_at, message.due_at).label("at"), message.attempts,
               AutomationRevision.subject, Subscriber.email, message.subscriber_id,
               Automation.id.label("automation_id"), Automation.name, message.position)
        .join(Automation, Automation.id == message.automation_id)
        .join(AutomationRevision, AutomationRevision.id == message.revision_id)
        .outerjoin(Subscriber, Subscriber.id == message.subscriber_id)
        .where(message.id.in_(select(messages.c.automation_message_id)),
               or_(message.status.in_(("failed", "unknown")),
                   and_(message.status == "pending", message.error_class.is_not(None))))
        .order_by(message.updated_at.desc(), message.id.desc())
        .limit(limit)
    ).all():
        errors.append(ErrorRow(None, found.status, found.error_class, found.smtp_code,
                               found.reason, found.at, found.attempts, None, found.subject,
                               found.email, "automation", found.subscriber_id,
                               found.automation_id, found.name, found.position))
    # Transactional mail keeps no update time: it is tried within seconds of being queued
    # (retries within minutes), so the time it was queued stands for when it failed.
    mail = TransactionalMessage
    for row in session.execute(
        select(mail.status, mail.reason, mail.created_at, mail.attempts, mail.broadcast_id,
               mail.subject, mail.to_email, mail.kind, mail.subscriber_id,
               mail.content_removed_at)
        .where(or_(mail.status.in_(("failed", "unknown")),
                   and_(mail.status == "pending", mail.attempts > 0, mail.reason.is_not(None))))
        .order_by(mail.created_at.desc(), mail.id.desc())
        .limit(limit)
    ).all():
        errors.append(ErrorRow(None, row.status, None, None, row.reason, row.created_at, row.attempts,
                               row.broadcast_id,
                               removal_words(row.kind, row.created_at, row.content_removed_at)
                               or row.subject,
                               row.to_email, row.kind,
                               row.subscriber_id))
    session.commit()
    errors.sort(key=lambda e: e.at or datetime.min, reverse=True)
    return errors[:limit]
