"""What the dashboard shows: recent broadcasts with their progress, subscriber growth over the
last 30 days (a chart), and the size of each list.

Each list's size is counted like the subscriber table's total (`search.count_matching`): its
active subscriptions on the (list_id, status) index, never past COUNT_CAP rows (above it,
PostgreSQL's estimate or "more than 100,000"), less its suppressed people (found through the
suppression index, at most COUNT_CAP of them, then their subscriptions by person). So the
dashboard costs the same at a million as at a thousand."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.models import Broadcast, MailingList, Subscriber, Subscription
from broadside.subscribers.growth import growth
from broadside.subscribers.search import COUNT_CAP, Filters, count_matching
from webapp.dashboard.chart import Chart, chart

RECENT = 8


@dataclass(frozen=True)
class ListSize:
    id: int
    name: str
    active: int | None  # None: not counted exactly (see `words`)
    words: str = ""

    @property
    def shown(self) -> str:
        return f"{self.active:,}" if self.active is not None else self.words


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


def suppressed_per_list(session: Session, cap: int = COUNT_CAP) -> dict[int, int] | None:
    """Active subscriptions of suppressed people, per list: the suppressed people first
    (the suppression index, at most `cap` of them, in a LIMITed subquery so that no planner
    walks every active subscription to find them), then each one's subscriptions (by person).
    None when there are more than `cap` suppressed people: not counted, said as such."""
    people = (select(Subscriber.id).where(Subscriber.suppression.is_not(None))
              .limit(cap + 1).subquery())
    if session.scalar(select(func.count()).select_from(people)) > cap:
        return None
    return dict(session.execute(
        select(Subscription.list_id, func.count())
        .select_from(people)
        .join(Subscription, Subscription.subscriber_id == people.c.id)
        .where(Subscription.status == "active")
        .group_by(Subscription.list_id)
    ).all())


def list_sizes(session: Session, cap: int = COUNT_CAP) -> list[ListSize]:
    """Active, unsuppressed subscribers per list (who a send would reach), each counted up
    to `cap` (see the module's docstring)."""
    suppressed = suppressed_per_list(session, cap)
    sizes = []
    for list_id, name in session.execute(
            select(MailingList.id, MailingList.name).order_by(MailingList.name)).all():
        total = count_matching(session, Filters(list_id=list_id, status="active"), cap=cap)
        if total.exact and total.value is not None and (suppressed is not None or not total.value):
            sizes.append(ListSize(list_id, name, total.value - (suppressed or {}).get(list_id, 0)))
        elif total.exact and total.value is not None:
            sizes.append(ListSize(list_id, name, None, f"at most {total.value:,}"))
        else:
            sizes.append(ListSize(list_id, name, None, total.words))
    return sizes


def home_overview(session: Session, zone: ZoneInfo) -> Home:
    return Home(recent_broadcasts(session), list_sizes(session), chart(growth(session, zone)))
