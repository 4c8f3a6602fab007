"""The evidence log: every state change of a delivery, a broadcast, a subscription or a
suppression appends one `Event` row (invariant 9, docs/ARCHITECTURE.md), in the caller's
transaction, so the change and its evidence commit or roll back together.

`record_event` is the one writer of single events; the delivery ledger
(`broadside.campaigns.broadcasts.ledger`) writes its per-row events in bulk, in the same shape.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from broadside.core.models import Event
from broadside.core.timeutil import utcnow

MAX_DETAIL = 2000


def record_event(
    session: Session,
    kind: str,
    *,
    subscriber_id: int | None = None,
    list_id: int | None = None,
    broadcast_id: int | None = None,
    delivery_id: int | None = None,
    automation_id: int | None = None,
    detail: str = "",
    data: dict[str, Any] | None = None,
) -> None:
    """Append one event to the caller's transaction (nothing is committed here)."""
    session.execute(
        insert(Event).values(
            kind=kind,
            subscriber_id=subscriber_id,
            list_id=list_id,
            broadcast_id=broadcast_id,
            delivery_id=delivery_id,
            automation_id=automation_id,
            detail=(detail or "")[:MAX_DETAIL],
            data=data,
            created_at=utcnow(),
        )
    )
