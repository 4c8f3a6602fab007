"""Evidence rows for leaving and bouncing (invariant 9: every change appends an event)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.models import Broadcast, Event


def append_event(
    session: Session,
    kind: str,
    *,
    subscriber_id: int | None,
    list_id: int | None = None,
    broadcast_id: int | None = None,
    delivery_id: int | None = None,
    detail: str = "",
    data: dict[str, Any] | None = None,
) -> Event:
    """Add an evidence row to the caller's transaction (invariant 9: evidence)."""
    event = Event(
        kind=kind, subscriber_id=subscriber_id, list_id=list_id, broadcast_id=broadcast_id,
        delivery_id=delivery_id, detail=detail[:2000], data=data,
    )
    session.add(event)
    return event


def existing_broadcast_id(session: Session, broadcast_id: int | None) -> int | None:
    """The id if that broadcast still exists: a token outlives a deleted broadcast."""
    if broadcast_id is None:
        return None
    return session.scalar(select(Broadcast.id).where(Broadcast.id == broadcast_id))
