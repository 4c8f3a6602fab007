"""One hit, counted: one `n = n + 1` per aggregate row it touches, never a row per hit.

An open adds one to its day's row (an upsert on (broadcast, day): both SQLite and PostgreSQL
say `INSERT ... ON CONFLICT DO UPDATE`); a click adds one to its link's row and to its day's.
Human and suspected-bot hits go to separate columns. Nothing here receives the reader's
address or user agent (bots.py reads them and returns a reason); per-person rows are written
only for a broadcast in per-person mode whose copy belongs to a list that allows it, and only
for hits not taken for a machine.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.analytics.modes import AGGREGATE, PER_PERSON
from broadside.campaigns.analytics.tokens import ClickClaim, OpenClaim
from broadside.core.db import dialect_insert
from broadside.core.errors import NotFound
from broadside.core.models import Broadcast, Delivery, MailingList, PersonActivity, TrackedLink, TrackingDay
from broadside.core.timeutil import utcnow

COUNTING = (AGGREGATE, PER_PERSON)
DAY_SECONDS = 86_400


def _day(broadcast: Broadcast, now: datetime) -> int:
    start = broadcast.started_at or broadcast.queued_at or now
    return max(0, int((now - start).total_seconds() // DAY_SECONDS))


def bump_day(session: Session, broadcast_id: int, day: int, column: str, by: int = 1) -> None:
    """The one upsert of a day's row: `column = column + by`."""
    table = TrackingDay.__table__
    values = {"broadcast_id": broadcast_id, "day": day, "opens": 0, "bot_opens": 0, "clicks": 0,
              "bot_clicks": 0}
    values[column] = max(by, 0)
    current: ColumnElement = table.c[column]
    statement = dialect_insert(session, table).values(**values).on_conflict_do_update(
        index_elements=["broadcast_id", "day"], set_={column: current + by})
    session.execute(statement)


def _counting(session: Session, broadcast_id: int) -> Broadcast | None:
    broadcast = session.get(Broadcast, broadcast_id)
    return broadcast if broadcast is not None and broadcast.tracking in COUNTING else None


def _person_allowed(session: Session, broadcast: Broadcast, delivery_id: int | None) -> bool:
    if delivery_id is None or broadcast.tracking != PER_PERSON:
        return False
    return bool(session.scalar(
        select(MailingList.per_person_tracking).select_from(Delivery)
        .join(MailingList, MailingList.id == func.coalesce(Delivery.list_id, broadcast.list_id))
        .where(Delivery.id == delivery_id, Delivery.broadcast_id == broadcast.id)))


def _first_time(session: Session, broadcast_id: int, delivery_id: int, kind: str, position: int,
                now: datetime) -> None:
    statement = dialect_insert(session, PersonActivity.__table__).values(
        broadcast_id=broadcast_id, delivery_id=delivery_id, kind=kind, position=position,
        first_at=now).on_conflict_do_nothing(index_elements=["delivery_id", "kind", "position"])
    session.execute(statement)


def record_open(session: Session, claim: OpenClaim, *, bot: bool, now: datetime | None = None) -> bool:
    """Count an open (False: the broadcast is gone or its tracking is off: nothing counted)."""
    now = now or utcnow()
    broadcast = _counting(session, claim.broadcast_id)
    if broadcast is None:
        session.rollback()
        return False
    bump_day(session, broadcast.id, _day(broadcast, now), "bot_opens" if bot else "opens")
    if not bot and _person_allowed(session, broadcast, claim.delivery_id):
        assert claim.delivery_id is not None
        _first_time(session, broadcast.id, claim.delivery_id, "open", -1, now)
    session.commit()
    return True


def known_link(session: Session, claim: ClickClaim) -> bool:
    """Whether the token names a link of that broadcast (its signature was checked already)."""
    return session.scalar(select(TrackedLink.id).where(
        TrackedLink.broadcast_id == claim.broadcast_id,
        TrackedLink.position == claim.position)) is not None


def record_click(session: Session, claim: ClickClaim, *, bot: bool, now: datetime | None = None) -> None:
    """Count a click on a known link (NotFound for a link the broadcast does not have).
    With tracking off it counts nothing; the caller still sends the reader on their way."""
    now = now or utcnow()
    if not known_link(session, claim):
        session.rollback()
        raise NotFound("No such link.")
    broadcast = _counting(session, claim.broadcast_id)
    if broadcast is None:
        session.rollback()
        return
    column = "bot_clicks" if bot else "clicks"
    session.execute(update(TrackedLink).where(TrackedLink.broadcast_id == broadcast.id,
                                              TrackedLink.position == claim.position)
                    .values({column: getattr(TrackedLink, column) + 1}))
    bump_day(session, broadcast.id, _day(broadcast, now), column)
    if not bot and _person_allowed(session, broadcast, claim.delivery_id):
        assert claim.delivery_id is not None
        _first_time(session, broadcast.id, claim.delivery_id, "click", claim.position, now)
    session.commit()


def move_click_to_bots(session: Session, broadcast_id: int, position: int,
                       now: datetime | None = None) -> None:
    """A click first counted as a reader's turned out to open a prefetch burst."""
    now = now or utcnow()
    broadcast = _counting(session, broadcast_id)
    if broadcast is None:
        session.rollback()
        return
    session.execute(update(TrackedLink).where(TrackedLink.broadcast_id == broadcast_id,
                                              TrackedLink.position == position,
                                              TrackedLink.clicks > 0)
                    .values(clicks=TrackedLink.clicks - 1, bot_clicks=TrackedLink.bot_clicks + 1))
    day = _day(broadcast, now)
    bump_day(session, broadcast_id, day, "clicks", -1)
    bump_day(session, broadcast_id, day, "bot_clicks")
    session.commit()
