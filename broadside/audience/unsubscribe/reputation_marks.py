"""The reputation guard's evidence, written where a suppression is recorded: a sent message
that bounced hard or drew a complaint gets one `ReputationMark` (UNIQUE per message and kind)
naming the identity it went out through and when it was sent.

Called by `suppression.suppress_linked`, the one writer of `Subscriber.suppression`, whenever a
suppression as `bounced` (a hard bounce, not the third soft one) or `complained` names the
message it is about (a delivery, an automation message or a transactional message). So every
source of bounces counts the same way: a provider's webhook, SES's notifications, a refusal at
RCPT recorded by the worker, a bounce mailbox; nothing counts twice (a second report of the
same message changes no suppression, and the mark is UNIQUE anyway).

One INSERT ... SELECT from the message's row (its identity through its broadcast or
automation), ON CONFLICT DO NOTHING; nothing when the message is unknown. Does not commit.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, case, false, func, literal, select, true
from sqlalchemy.orm import Session

from broadside.core.db import dialect_insert, rowcount
from broadside.core.models import (
    Automation,
    AutomationMessage,
    Broadcast,
    Delivery,
    ReputationMark,
    TransactionalMessage,
)
from broadside.core.models.reputation import DEFAULT_IDENTITY_KEY
from broadside.core.timeutil import utcnow


def mark(session: Session, kind: str, *, delivery_id: int | None = None,
         automation_message_id: int | None = None,
         transactional_message_id: int | None = None) -> bool:
    """Record that the message named bounced hard (`bounced`) or was complained about; True
    when a mark was written. The first message named is the one (a report names one)."""
    now = utcnow()
    if delivery_id is not None:
        source, source_id, sent_at, identity = (
            "delivery", Delivery.id, Delivery.sent_at, Broadcast.identity_id)
        query = (select(Delivery.id).join(Broadcast, Broadcast.id == Delivery.broadcast_id)
                 .where(Delivery.id == delivery_id))
    elif automation_message_id is not None:
        source, source_id, sent_at, identity = (
            "automation_message", AutomationMessage.id, AutomationMessage.sent_at,
            Automation.identity_id)
        query = (select(AutomationMessage.id)
                 .join(Automation, Automation.id == AutomationMessage.automation_id)
                 .where(AutomationMessage.id == automation_message_id))
    elif transactional_message_id is not None:
        source, source_id, sent_at, identity = (
            "transactional_message", TransactionalMessage.id, TransactionalMessage.sent_at,
            TransactionalMessage.identity_id)
        query = select(TransactionalMessage.id).where(
            TransactionalMessage.id == transactional_message_id)
    else:
        return False
    refused: ColumnElement[bool] = sent_at.is_(None)
    rows = query.with_only_columns(
        func.coalesce(identity, DEFAULT_IDENTITY_KEY), literal(kind), literal(source), source_id,
        func.coalesce(sent_at, now), _boolean(refused), literal(now),
        maintain_column_froms=True)
    insert = dialect_insert(session, ReputationMark).from_select(
        ["identity_key", "kind", "source_kind", "source_id", "sent_at", "refused",
         "recorded_at"], rows).on_conflict_do_nothing()
    return rowcount(session.execute(insert)) == 1


def _boolean(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """A condition as a stored boolean on both databases."""
    return case((condition, true()), else_=false())
