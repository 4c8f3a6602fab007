"""Helpers for the evidence of leaving and bouncing; the rows themselves are written by
`broadside.core.events.record_event` (invariant 9: every change appends an event)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.models import Broadcast


def existing_broadcast_id(session: Session, broadcast_id: int | None) -> int | None:
    """The id if that broadcast still exists: a token outlives a deleted broadcast."""
    if broadcast_id is None:
        return None
    return session.scalar(select(Broadcast.id).where(Broadcast.id == broadcast_id))
