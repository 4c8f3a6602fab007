"""Reads of broadcasts that pages and the API list, beside the writes in `service` and
`ledger`: each one bounded query, returning rows or plain dataclasses.

- `delivery_rows`: the API's page of a broadcast's deliveries (a keyset on the delivery id,
  read through the (broadcast_id, status, id) index: one range for a status, else the first
  `limit` past `after` of each status; never a sort of the whole broadcast, never an OFFSET);
- `recent_broadcasts`: the dashboard's latest broadcasts with their list's or segment's name;
- `sending_broadcasts`: the System page's broadcasts on their way (queued or sending).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.drafts import BroadcastRow
from broadside.campaigns.broadcasts.evidence import next_delivery_ids
from broadside.core.models import Broadcast, Delivery, MailingList, Segment, Subscriber

RECENT = 8


@dataclass(frozen=True)
class DeliveryRow:
    id: int
    email: str | None  # None once the person is erased
    status: str
    reason: str | None
    attempts: int


def delivery_rows(session: Session, broadcast_id: int, *, status: str | None, after: int,
                  limit: int) -> list[DeliveryRow]:
    """The first `limit` deliveries past the id `after`, in id order, of one status or all."""
    query = (
        select(Delivery.id, Subscriber.email, Delivery.status, Delivery.reason, Delivery.attempts)
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id, Delivery.id > after)
        .order_by(Delivery.id)
        .limit(limit)
    )
    if status:
        query = query.where(Delivery.status == status)
    else:
        query = query.where(Delivery.id.in_(next_delivery_ids(broadcast_id, after, None, limit)))
    return [DeliveryRow(*row) for row in session.execute(query)]


def recent_broadcasts(session: Session, limit: int = RECENT) -> list[BroadcastRow]:
    """The latest broadcasts (by last change) with the name of their list or segment."""
    return [
        BroadcastRow(broadcast, list_name, segment_name)
        for broadcast, list_name, segment_name in session.execute(
            select(Broadcast, MailingList.name, Segment.name)
            .outerjoin(MailingList, MailingList.id == Broadcast.list_id)
            .outerjoin(Segment, Segment.id == Broadcast.segment_id)
            .order_by(Broadcast.updated_at.desc(), Broadcast.id.desc())
            .limit(limit)
        )
    ]


@dataclass(frozen=True)
class SendingBroadcast:
    id: int
    subject: str
    send_rate: float
    sent: int
    total: int
    notice: str | None


def sending_broadcasts(session: Session) -> list[SendingBroadcast]:
    """Broadcasts queued or sending, oldest first."""
    return [
        SendingBroadcast(*row)
        for row in session.execute(
            select(Broadcast.id, Broadcast.subject, Broadcast.send_rate, Broadcast.sent_count,
                   Broadcast.total, Broadcast.notice)
            .where(Broadcast.status.in_(("queued", "sending")))
            .order_by(Broadcast.id)
        ).all()
    ]
