"""What the dashboard shows: recent broadcasts with their progress, subscriber growth over the
last 30 days (a chart), and the size of each list.

Each list's size is counted like the subscriber table's total (`search.count_matching`): its
active subscriptions on the (list_id, status) index, never past COUNT_CAP rows (above it,
PostgreSQL's estimate or "more than 100,000"), less its suppressed people (found through the
suppression index, at most SUPPRESSED_CAP of them, then their subscriptions by person). So the
dashboard costs the same at a million as at a thousand."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo

from sqlalchemy import func, literal_column, select, true
from sqlalchemy.orm import Session

from broadside.models import Broadcast, MailingList, Subscriber, Subscription
from broadside.subscribers.growth import growth
from broadside.subscribers.search import COUNT_CAP, Filters, count_matching
from webapp.dashboard.chart import Chart, chart

RECENT = 8
# Suppressed people looked up per dashboard (one index lookup each, about 10 µs): past this
# many, the lists' sizes are said as "at most N" rather than read further.
SUPPRESSED_CAP = 10_000


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
    (the suppression index, at most `cap` of them, in a LIMITed subquery), then each one's
    subscriptions through the index by person. On PostgreSQL the subscriptions are a LATERAL
    subquery: a plain join was planned as a hash join over every active subscription (a
    scan of the table to find the few suppressed). None when there are more than `cap`
    suppressed people: not counted, and said as such."""
    people = (select(Subscriber.id).where(Subscriber.suppression.is_not(None))
              .limit(cap + 1).subquery())
    if (session.scalar(select(func.count()).select_from(people)) or 0) > cap:
        return None
    theirs = select(Subscription.list_id).where(Subscription.subscriber_id == people.c.id,
                                                Subscription.status == "active")
    if session.get_bind().dialect.name == "postgresql":
        # OFFSET keeps PostgreSQL from flattening the subquery back into that join.
        each = theirs.offset(0).lateral()
        query = select(each.c.list_id, func.count()).select_from(people).join(each, true())
    else:
        # SQLite would walk every subscription in list order (for the GROUP BY) and find each
        # in the people: `id + 0` is SQLite's documented way to keep a term from an index
        # (like a unary +), so the people come first and each is looked up in
        # (subscriber_id, status, list_id) alone: 18 ms for 10,000 people at a million, not 200.
        query = (select(Subscription.list_id, func.count()).select_from(people)
                 .join(Subscription, Subscription.subscriber_id == people.c.id + literal_column("0"))
                 .where(Subscription.status == "active"))
    return dict(session.execute(query.group_by(query.selected_columns[0])).all())


def list_sizes(session: Session, cap: int = COUNT_CAP,
               suppressed_cap: int = SUPPRESSED_CAP) -> list[ListSize]:
    """Active, unsuppressed subscribers per list (who a send would reach), each counted up
    to `cap` (see the module's docstring). The suppressed are looked up only when some list
    is counted exactly, and at most `suppressed_cap` of them (one index lookup each): past
    it, an exact list says "at most N" (its active subscribers, suppressed included)."""
    totals = [(list_id, name, count_matching(session, Filters(list_id=list_id, status="active"),
                                             cap=cap))
              for list_id, name in session.execute(
                  select(MailingList.id, MailingList.name).order_by(MailingList.name)).all()]
    wanted = any(total.exact and total.value for _, _, total in totals)
    suppressed = suppressed_per_list(session, suppressed_cap) if wanted else {}
    sizes = []
    for list_id, name, total in totals:
        if total.exact and total.value is not None and (suppressed is not None or not total.value):
            sizes.append(ListSize(list_id, name, total.value - (suppressed or {}).get(list_id, 0)))
        elif total.exact and total.value is not None:
            sizes.append(ListSize(list_id, name, None, f"at most {total.value:,}"))
        else:
            sizes.append(ListSize(list_id, name, None, total.words))
    return sizes


def home_overview(session: Session, zone: ZoneInfo) -> Home:
    return Home(recent_broadcasts(session), list_sizes(session), chart(growth(session, zone)))
