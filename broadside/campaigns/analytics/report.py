"""What the broadcast page shows of its tracking: totals, the first days, the links.

Reads the aggregate rows only (a handful per broadcast), plus, in per-person mode, how many
distinct copies were opened or clicked: counts, not names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import DateTime, case, func, select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics.modes import OFF, PER_PERSON, effective
from broadside.campaigns.analytics.rewrite import template_links
from broadside.core.models import (
    Broadcast,
    Delivery,
    PersonActivity,
    Revision,
    Subscriber,
    TrackedLink,
    TrackingDay,
)

FIRST_DAYS = 7
PEOPLE_SHOWN = 50


@dataclass(frozen=True)
class Day:
    day: int  # 0: the first 24 hours after sending started
    opens: int = 0
    bot_opens: int = 0
    clicks: int = 0
    bot_clicks: int = 0


@dataclass(frozen=True)
class Link:
    position: int
    url: str
    clicks: int
    bot_clicks: int


@dataclass(frozen=True)
class Person:
    """Per-person mode: one copy's first open and its clicks (an erased person: no email)."""

    email: str | None
    first_open: datetime | None
    clicks: int


@dataclass(frozen=True)
class Report:
    broadcast_id: int
    mode: str
    sent: bool  # Send was pressed: the mode is frozen (it may still be turned off)
    can_stop: bool
    days: list[Day] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    people_opened: int | None = None  # per-person mode only: distinct copies
    people_clicked: int | None = None
    people: list[Person] = field(default_factory=list)  # the latest PEOPLE_SHOWN of them
    untracked: list[str] = field(default_factory=list)  # links with merge fields, left as they were

    @property
    def opens(self) -> int:
        return sum(d.opens for d in self.days)

    @property
    def bot_opens(self) -> int:
        return sum(d.bot_opens for d in self.days)

    @property
    def clicks(self) -> int:
        return sum(d.clicks for d in self.days)

    @property
    def bot_clicks(self) -> int:
        return sum(d.bot_clicks for d in self.days)

    @property
    def anything(self) -> bool:
        return any(d.opens or d.bot_opens or d.clicks or d.bot_clicks for d in self.days)


def broadcast_report(session: Session, broadcast_id: int) -> Report | None:
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        return None
    sent = broadcast.status not in ("draft", "scheduled")
    mode = effective(session, broadcast)
    if not sent:
        return Report(broadcast_id, mode, sent=False, can_stop=False)
    rows = {row.day: row for row in session.scalars(
        select(TrackingDay).where(TrackingDay.broadcast_id == broadcast_id))}
    last = max([FIRST_DAYS - 1, *[d for d in rows if d < 30]])
    days = [Day(n, rows[n].opens, rows[n].bot_opens, rows[n].clicks, rows[n].bot_clicks)
            if n in rows else Day(n) for n in range(last + 1)]
    later = [row for n, row in rows.items() if n > last]
    if later:  # beyond 30 days: folded into the last day shown
        tail = days[-1]
        days[-1] = Day(tail.day, tail.opens + sum(r.opens for r in later),
                       tail.bot_opens + sum(r.bot_opens for r in later),
                       tail.clicks + sum(r.clicks for r in later),
                       tail.bot_clicks + sum(r.bot_clicks for r in later))
    links = [Link(link.position, link.url, link.clicks, link.bot_clicks) for link in session.scalars(
        select(TrackedLink).where(TrackedLink.broadcast_id == broadcast_id)
        .order_by(TrackedLink.position))]
    html_template = session.scalar(select(Revision.html_template)
                                   .where(Revision.broadcast_id == broadcast_id))
    stored = {link.position for link in links}
    untracked = [link.url for link in template_links(html_template or "")
                 if link.has_fields and link.position not in stored] if links or mode != OFF else []
    opened = clicked = None
    if mode == PER_PERSON:
        counts = dict(session.execute(
            select(PersonActivity.kind, func.count(func.distinct(PersonActivity.delivery_id)))
            .where(PersonActivity.broadcast_id == broadcast_id).group_by(PersonActivity.kind)).all())
        opened, clicked = counts.get("open", 0), counts.get("click", 0)
    first_open = func.min(case((PersonActivity.kind == "open", PersonActivity.first_at)),
                          type_=DateTime)
    clicks = func.sum(case((PersonActivity.kind == "click", 1), else_=0))
    people = [Person(email, first, int(n or 0)) for email, first, n in session.execute(
        select(Subscriber.email, first_open, clicks)
        .select_from(PersonActivity)
        .join(Delivery, Delivery.id == PersonActivity.delivery_id)
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(PersonActivity.broadcast_id == broadcast_id)
        .group_by(PersonActivity.delivery_id, Subscriber.email)
        .order_by(func.max(PersonActivity.first_at).desc(), PersonActivity.delivery_id)
        .limit(PEOPLE_SHOWN))] if mode == PER_PERSON else []
    return Report(broadcast_id, mode, sent=True, can_stop=mode != OFF, days=days, links=links,
                  people_opened=opened, people_clicked=clicked, people=people, untracked=untracked)
