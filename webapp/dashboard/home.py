"""What the dashboard shows: recent broadcasts with their progress, subscriber growth over the
last 30 days (a chart), and the size of each list."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from broadside.models import Broadcast, MailingList, Subscriber, Subscription
from broadside.subscribers.growth import growth
from webapp.dashboard.chart import Chart, chart

RECENT = 8


@dataclass(frozen=True)
class ListSize:
    id: int
    name: str
    active: int


@dataclass(frozen=True)
class Home:
    recent: list[tuple[Broadcast, str | None]]
    lists: list[ListSize]
    growth: Chart

    @property
    def any_active(self) -> bool:
        return any(b.status in ("queued", "sending") for b, _ in self.recent)


def recent_broadcasts(session: Session, limit: int = RECENT) -> list[tuple[Broadcast, str | None]]:
    """The latest broadcasts (by last change) with the name of their list."""
    return [
        (broadcast, name)
        for broadcast, name in session.execute(
            select(Broadcast, MailingList.name)
            .outerjoin(MailingList, MailingList.id == Broadcast.list_id)
            .order_by(Broadcast.updated_at.desc(), Broadcast.id.desc())
            .limit(limit)
        )
    ]


def list_sizes(session: Session) -> list[ListSize]:
    """Active, unsuppressed subscribers per list (who a send would reach): one GROUP BY."""
    rows = session.execute(
        select(MailingList.id, MailingList.name, func.count(Subscriber.id))
        .outerjoin(Subscription,
                   and_(Subscription.list_id == MailingList.id, Subscription.status == "active"))
        .outerjoin(Subscriber,
                   and_(Subscriber.id == Subscription.subscriber_id, Subscriber.suppression.is_(None)))
        .group_by(MailingList.id, MailingList.name)
        .order_by(MailingList.name)
    ).all()
    return [ListSize(list_id, name, count) for list_id, name, count in rows]


def home_overview(session: Session, zone: ZoneInfo) -> Home:
    return Home(recent_broadcasts(session), list_sizes(session), chart(growth(session, zone)))
