"""The evidence log: every state change of a delivery, a broadcast, a subscription or a
suppression appends one `Event` row (invariant 9, docs/ARCHITECTURE.md), in the caller's
transaction, so the change and its evidence commit or roll back together.

`record_event` is the one writer of single events; the delivery ledger
(`broadside.campaigns.broadcasts.ledger`) writes its per-row events in bulk, in the same shape.
Each event names its actor (`actor_person_id`, `actor_token_id`) when a person or an API token
caused it (broadside.core.actors: set per request by the web app), NULL for the worker's; the
bulk writers take the same columns from `actor_columns()`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, insert, literal
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from broadside.core import actors
from broadside.core.models import Event
from broadside.core.timeutil import utcnow

MAX_DETAIL = 2000
ACTORS = ("actor_person_id", "actor_token_id")  # the columns `actor_literals` fills


def actor_columns() -> dict[str, int | None]:
    """The actor columns of an event written now: the current person and token, or NULLs."""
    who = actors.current()
    return {"actor_person_id": who.person_id if who else None,
            "actor_token_id": who.token_id if who else None}


def actor_literals() -> tuple[ColumnElement[int | None], ColumnElement[int | None]]:
    """The same two values as SELECT columns, for an INSERT ... SELECT of events."""
    found = actor_columns()
    return (literal(found["actor_person_id"], Integer()),
            literal(found["actor_token_id"], Integer()))


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
            **actor_columns(),
        )
    )
