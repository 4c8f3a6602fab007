"""Who left, bounced or complained, and why: the reads behind the owner's pages. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session

from broadside.core.errors import NotFound
from broadside.core.i18n import _
from broadside.core.models import Event, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow

DEPARTURE_KINDS = (
    "unsubscribed", "resubscribed", "bounce", "complaint", "suppressed", "unsuppressed",
    "erased",  # a person erased themselves from their link (the event names nobody)
)
PAGE_SIZE = 50


@dataclass(frozen=True)
class Departure:
    event_id: int
    at: datetime
    kind: str
    detail: str
    subscriber_id: int | None
    email: str | None
    list_id: int | None
    broadcast_id: int | None
    delivery_id: int | None


@dataclass(frozen=True)
class DeparturesPage:
    mailing_list: MailingList
    rows: list[Departure]
    counts: dict[str, int]  # unsubscribed / bounce / complaint over the last `days`
    days: int
    older_than: int | None  # the event id to ask for the next page, if there is one


def _about_list(list_id: int):
    """Events about this list: its own unsubscribes, and every-list events (bounces,
    complaints, suppression) of people on it that came from no other list's broadcast."""
    on_list = exists().where(
        Subscription.subscriber_id == Event.subscriber_id, Subscription.list_id == list_id
    )
    return and_(
        Event.kind.in_(DEPARTURE_KINDS),
        or_(Event.list_id == list_id, and_(Event.list_id.is_(None), on_list)),
    )


def _rows(session: Session, condition, limit: int, before_id: int | None) -> list[Departure]:
    query = (
        select(Event.id, Event.created_at, Event.kind, Event.detail, Event.subscriber_id,
               Subscriber.email, Event.list_id, Event.broadcast_id, Event.delivery_id)
        .outerjoin(Subscriber, Subscriber.id == Event.subscriber_id)
        .where(condition)
        .order_by(Event.id.desc())
        .limit(limit)
    )
    if before_id is not None:
        query = query.where(Event.id < before_id)
    return [Departure(*row) for row in session.execute(query)]


def list_departures(
    session: Session, list_id: int, *, before_id: int | None = None, limit: int = PAGE_SIZE,
    days: int = 30,
) -> DeparturesPage:
    mailing_list = session.get(MailingList, list_id)
    if mailing_list is None:
        raise NotFound(_("There is no such list."))
    rows = _rows(session, _about_list(list_id), limit + 1, before_id)
    since = utcnow() - timedelta(days=days)
    counted = session.execute(
        select(Event.kind, func.count())
        .where(_about_list(list_id), Event.created_at >= since,
               Event.kind.in_(("unsubscribed", "bounce", "complaint")))
        .group_by(Event.kind)
    ).all()
    counts = {"unsubscribed": 0, "bounce": 0, "complaint": 0} | dict(counted)
    more = len(rows) > limit
    rows = rows[:limit]
    return DeparturesPage(mailing_list, rows, counts, days, rows[-1].event_id if more else None)


def recent_for_list(session: Session, list_id: int, limit: int = 10) -> list[Departure]:
    return _rows(session, _about_list(list_id), limit, None)


def recent_for_subscriber(session: Session, subscriber_id: int, limit: int = 20) -> list[Departure]:
    condition = and_(Event.kind.in_(DEPARTURE_KINDS), Event.subscriber_id == subscriber_id)
    return _rows(session, condition, limit, None)


def list_names(session: Session) -> dict[int, str]:
    return dict(session.execute(select(MailingList.id, MailingList.name)).all())
