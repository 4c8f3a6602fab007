"""The one way a delivery changes state: a predicate-guarded UPDATE, its counters and its events.

Invariant 4 (claim before send) and 9 (evidence) live here. Every transition names the status
it expects (`WHERE id = ? AND status = ?`), so a retried or duplicated job that finds the row
already moved changes nothing; there is no read-then-write. The broadcast's counters move by
exactly the rows that changed, in the same transaction, so the progress bar never has to
count the deliveries table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from webapp.models import Broadcast, Delivery, Event
from webapp.timeutil import utcnow

COUNTER = {
    "pending": Broadcast.pending_count,
    "sending": Broadcast.sending_count,
    "sent": Broadcast.sent_count,
    "skipped": Broadcast.skipped_count,
    "failed": Broadcast.failed_count,
    "unknown": Broadcast.unknown_count,
}

# The event kind recorded when a delivery enters each status.
EVENT_FOR = {
    "sending": "claimed",
    "sent": "sent",
    "skipped": "skipped",
    "failed": "failed",
    "unknown": "unknown",
    "pending": "retry",
}


@dataclass
class Change:
    """One delivery's move, with the values to write and the event detail to record."""

    delivery_id: int
    subscriber_id: int | None
    values: dict[str, Any] = field(default_factory=dict)
    detail: str = ""
    data: dict[str, Any] | None = None


def move_counters(session: Session, broadcast_id: int, moves: dict[tuple[str, str], int]) -> None:
    deltas: dict[str, int] = {}
    for (source, target), count in moves.items():
        if count:
            deltas[source] = deltas.get(source, 0) - count
            deltas[target] = deltas.get(target, 0) + count
    values = {COUNTER[s].key: COUNTER[s] + d for s, d in deltas.items() if d}
    if values:
        session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(**values))


def transition(
    session: Session,
    broadcast_id: int,
    changes: Iterable[Change],
    *,
    source: str,
    target: str,
    now: datetime | None = None,
) -> list[int]:
    """Move each delivery from `source` to `target` if (and only if) it is still in `source`.

    Returns the ids that moved. Does not commit: the caller owns the transaction.
    """
    now = now or utcnow()
    moved: list[Change] = []
    for change in changes:
        result = session.execute(
            update(Delivery)
            .where(Delivery.id == change.delivery_id, Delivery.status == source)
            .values(status=target, updated_at=now, **change.values)
        )
        if result.rowcount == 1:
            moved.append(change)
    if moved:
        move_counters(session, broadcast_id, {(source, target): len(moved)})
        session.execute(
            insert(Event),
            [
                {
                    "kind": EVENT_FOR[target],
                    "broadcast_id": broadcast_id,
                    "delivery_id": c.delivery_id,
                    "subscriber_id": c.subscriber_id,
                    "detail": c.detail,
                    "data": c.data,
                    "created_at": now,
                }
                for c in moved
            ],
        )
    return [c.delivery_id for c in moved]


def claim(
    session: Session, broadcast_id: int, rows: Sequence[tuple[int, int | None]], now: datetime | None = None
) -> list[int]:
    """pending -> sending for a small batch; the caller commits before any SMTP conversation."""
    now = now or utcnow()
    changes = [
        Change(delivery_id, subscriber_id, {"claimed_at": now, "attempts": Delivery.attempts + 1})
        for delivery_id, subscriber_id in rows
    ]
    return transition(session, broadcast_id, changes, source="pending", target="sending", now=now)


def broadcast_event(
    session: Session, broadcast_id: int, kind: str, detail: str = "", data: dict[str, Any] | None = None
) -> None:
    session.execute(
        insert(Event).values(
            kind=kind, broadcast_id=broadcast_id, detail=detail, data=data, created_at=utcnow()
        )
    )
