"""What a delivery's move leaves behind: its event, or none when the row itself keeps it, and
the outgoing webhook event it sends. Written by `broadside.campaigns.broadcasts.ledger` in the
transaction of the move, in bulk per flush.

Invariant 9 (evidence) without duplicates (a broadcast may have a million rows). Two moves are
kept by the delivery row itself rather than by an event, because the row records them and
never overwrites them afterwards: a row's first claim (`claimed_at`, `attempts` = 1; a
re-claim, which overwrites them, writes its `claimed` event, and a row sent back to `pending`
first records its first claim at that claim's own time: `keep_first_claim`) and the worker's
`sending -> sent` (`ROW_KEEPS`: `sent` is final; `sent_at`, `smtp_code` and `reason`, the
server's reply, are never written again). Every other move appends its event, as does a
provider's delivery event settling an `unknown` row (its detail is the evidence). The timeline
(`broadside.campaigns.broadcasts.evidence`) reads the row's moments with the events.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import insert, literal, select
from sqlalchemy.orm import Session

from broadside.core.events import actor_columns
from broadside.core.models import Delivery, Event
from broadside.core.models.sending import DeliveryStatus
from broadside.webhooks import emitter

_DELIVERIES = Delivery.__table__
_EVENTS = Event.__table__

# The outgoing webhook event sent when a delivery enters each of these statuses.
WEBHOOK_FOR: dict[str, str] = {
    DeliveryStatus.SENT: "delivery.sent",
    DeliveryStatus.FAILED: "delivery.failed",
    DeliveryStatus.UNKNOWN: "delivery.unknown",
}

# The event kind recorded when a delivery enters each status.
EVENT_FOR: dict[str, str] = {
    DeliveryStatus.SENDING: "claimed",
    DeliveryStatus.SENT: "sent",
    DeliveryStatus.SKIPPED: "skipped",
    DeliveryStatus.FAILED: "failed",
    DeliveryStatus.UNKNOWN: "unknown",
    DeliveryStatus.PENDING: "retry",
}

# (source, target) moves whose evidence is the delivery row itself (see the module's doc).
ROW_KEEPS = {(DeliveryStatus.SENDING.value, DeliveryStatus.SENT.value)}


class MovedRow(Protocol):
    """A delivery that moved, with the detail its event records (`ledger.Change` is one)."""

    delivery_id: int
    subscriber_id: int | None
    detail: str
    data: dict[str, Any] | None


def record(session: Session, broadcast_id: int, moved: Sequence[MovedRow], kind: str, now: datetime) -> None:
    """One event per row that moved (its detail and data), in one executemany."""
    actors_now = actor_columns()
    session.connection().execute(
        insert(_EVENTS),
        [
            {
                "kind": kind,
                "broadcast_id": broadcast_id,
                "delivery_id": c.delivery_id,
                "subscriber_id": c.subscriber_id,
                "list_id": None,
                "detail": c.detail,
                "data": c.data,
                "created_at": now,
                **actors_now,
            }
            for c in moved
        ],
    )


def keep_first_claim(session: Session, broadcast_id: int, moved: Sequence[MovedRow]) -> None:
    """A row back in `pending` will be claimed again, which overwrites `claimed_at`: its first
    claim (attempts = 1, the one claim without an event) becomes an event now, at its own
    time, so the timeline keeps every attempt. Later claims wrote theirs when they happened."""
    session.connection().execute(
        insert(_EVENTS).from_select(
            ["kind", "broadcast_id", "delivery_id", "subscriber_id", "detail", "created_at"],
            select(
                literal(EVENT_FOR[DeliveryStatus.SENDING], Event.kind.type),
                _DELIVERIES.c.broadcast_id,
                _DELIVERIES.c.id,
                _DELIVERIES.c.subscriber_id,
                literal("", Event.detail.type),
                _DELIVERIES.c.claimed_at,
            ).where(
                _DELIVERIES.c.id.in_([c.delivery_id for c in moved]),
                _DELIVERIES.c.broadcast_id == broadcast_id,
                _DELIVERIES.c.attempts == 1,
                _DELIVERIES.c.claimed_at.is_not(None),
            ),
        )
    )


def emit(session: Session, broadcast_id: int, moved: Sequence[MovedRow], event_type: str,
         now: datetime) -> None:
    """The flush's outgoing webhook events, in bulk like its evidence: one SELECT of the
    endpoints wanting them and, only if there are any, one of the people and one executemany."""

    def datas() -> list[dict[str, Any]]:
        found = emitter.people(session, [c.subscriber_id for c in moved])
        return [{"broadcast_id": broadcast_id, "delivery_id": c.delivery_id,
                 "subscriber": found.get(c.subscriber_id) if c.subscriber_id else None,
                 "detail": c.detail or None}
                for c in moved]

    emitter.emit_many(session, event_type, datas, now)
