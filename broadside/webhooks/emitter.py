"""Recording outgoing webhook events: in the transaction of the change, and only when wanted.

Each writer of a state the owner can subscribe to (docs/ARCHITECTURE.md, "State machines and
their owners") calls `emit` (or `emit_many`) right after its guarded write and its evidence
event, in the same transaction: a change that commits has its webhook events, one that rolls
back has none (the outbox pattern). One row per endpoint that wants the event, sharing one
stable event id (`evt_…`), which the receiver uses to deduplicate.

Nothing is written, and the event's data is not even built, when no enabled endpoint wants
the event type: the cost is one SELECT on a table of a handful of rows (per flush, for the
delivery ledger), so a million-recipient broadcast with no endpoint for `delivery.*` writes
nothing extra. That SELECT sits between the send loop's batches, so it is compiled once per
dialect and run on the driver's cursor (as the send-time re-check is: jobs/recheck.py), and
the event type is matched in Python. Its answer is never cached: it is read in the
transaction that records the change, so an endpoint committed before that transaction reads
it gets the event, exactly as a fresh ORM query would; no TTL, no window in which a new
endpoint misses events.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from broadside.core.models import Subscriber, WebhookEndpoint, WebhookMessage
from broadside.core.timeutil import utcnow

_OUTBOX = WebhookMessage.__table__
Data = dict[str, Any]


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex


_ENABLED = (select(WebhookEndpoint.id, WebhookEndpoint.events)
            .where(WebhookEndpoint.status == "enabled").order_by(WebhookEndpoint.id))
_compiled_enabled: dict[str, str] = {}


def wanting(session: Session, event_type: str) -> list[int]:
    """The enabled endpoints that want `event_type`, read now, in the session's transaction
    (one statement compiled once per dialect, run on the driver's cursor)."""
    connection = session.connection()
    sql = _compiled_enabled.get(connection.dialect.name)
    if sql is None:
        sql = _compiled_enabled[connection.dialect.name] = str(_ENABLED.compile(
            dialect=connection.dialect, compile_kwargs={"literal_binds": True}))  # a constant
    cursor = connection.connection.cursor()
    try:
        cursor.execute(sql)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    wanted = f",{event_type},"
    return [endpoint_id for endpoint_id, events in rows if wanted in (events or "")]


def _rows(endpoints: Sequence[int], event_type: str, datas: Sequence[Data],
          now: datetime) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for data in datas:
        event_id = new_event_id()
        person = data.get("subscriber")
        subscriber_id = person.get("id") if isinstance(person, dict) else None
        rows.extend({"endpoint_id": endpoint_id, "event_id": event_id, "event_type": event_type,
                     "data": data, "subscriber_id": subscriber_id, "created_at": now,
                     "status": "pending", "attempts": 0, "next_attempt_at": now}
                    for endpoint_id in endpoints)
    return rows


def emit(session: Session, event_type: str, data: Callable[[], Data],
         now: datetime | None = None) -> int:
    """Record one event for every enabled endpoint wanting it; `data` is called only then.
    Returns the rows written. Does not commit."""
    endpoints = wanting(session, event_type)
    if not endpoints:
        return 0
    rows = _rows(endpoints, event_type, [data()], now or utcnow())
    session.connection().execute(insert(_OUTBOX), rows)
    return len(rows)


def emit_many(session: Session, event_type: str, datas: Callable[[], Sequence[Data]],
              now: datetime | None = None) -> int:
    """`emit` for many events of one type (a ledger flush, an import batch, people entering an
    automation): one SELECT of the endpoints, then (only if any) one executemany."""
    endpoints = wanting(session, event_type)
    if not endpoints:
        return 0
    rows = _rows(endpoints, event_type, list(datas()), now or utcnow())
    if rows:
        session.connection().execute(insert(_OUTBOX), rows)
    return len(rows)


def emit_for(session: Session, endpoint_id: int, event_type: str, data: Data,
             now: datetime | None = None) -> str:
    """One event for one endpoint whatever it wants (the owner's test event); returns its id.
    Does not commit."""
    rows = _rows([endpoint_id], event_type, [data], now or utcnow())
    session.connection().execute(insert(_OUTBOX), rows)
    return str(rows[0]["event_id"])


def people(session: Session, subscriber_ids: Sequence[int | None]) -> dict[int, Data]:
    """Each person as events show them: id, email and name (one SELECT)."""
    ids = sorted({i for i in subscriber_ids if i is not None})
    found: dict[int, Data] = {}
    for start in range(0, len(ids), 5000):
        for sid, email, name in session.execute(
            select(Subscriber.id, Subscriber.email, Subscriber.name)
            .where(Subscriber.id.in_(ids[start:start + 5000]))
        ):
            found[sid] = {"id": sid, "email": email, "name": name}
    return found


def person(session: Session, subscriber_id: int | None) -> Data | None:
    if subscriber_id is None:
        return None
    return people(session, [subscriber_id]).get(subscriber_id)


def forget_people(session: Session, subscriber_ids: Sequence[int]) -> None:
    """Erasing people deletes the events that name them, sent or not. Does not commit."""
    session.execute(delete(WebhookMessage).where(WebhookMessage.subscriber_id.in_(list(subscriber_ids)))
                    .execution_options(synchronize_session=False))


def emit_subscriber(session: Session, event_type: str, subscriber_id: int, **extra: Any) -> int:
    """A `subscriber.*` event: the person and what the writer adds (list id, source, kind)."""
    return emit(session, event_type,
                lambda: {"subscriber": person(session, subscriber_id), **extra})
