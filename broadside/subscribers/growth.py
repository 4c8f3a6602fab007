"""Subscriber growth by day, in the owner's time zone: how many joined a list and how many left
one, on each of the last 30 days (the dashboard's chart).

A join is a subscription that became active (confirmed, or active from the start: an import,
the owner's page, the API) at `COALESCE(confirmed_at, created_at)`; a leave is its
`unsubscribed_at`. Someone on two lists counts on each. A subscription still unconfirmed has
not joined yet; one that left and came back counts its join only (rejoining clears the leave).

One query, one GROUP BY over the range, read through indexes (migration 0015): the joins as
two ranges of (confirmed_at, created_at) — confirmed in the range, or never confirmed and
created in it, which is COALESCE(confirmed_at, created_at) in the range without an expression
index — and the leaves as a range of unsubscribed_at. So its cost follows the last 30 days'
joins and leaves, not the size of the audience. Each moment is given the number of its day by
comparing it with the local midnights, computed here in Python from the owner's zone. The
same SQL runs on SQLite and PostgreSQL (SQLite knows no time zones, so truncating to a UTC
date in SQL would put an evening in Tokyo on the wrong day), and a day is right across a
change to or from summer time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import ColumnElement, and_, case, func, literal, select, union_all
from sqlalchemy.orm import QueryableAttribute, Session

from broadside.models import Subscription
from broadside.timeutil import in_zone, utcnow

DAYS = 30


@dataclass(frozen=True)
class GrowthDay:
    day: date  # in the owner's zone
    joined: int
    left: int

    @property
    def net(self) -> int:
        return self.joined - self.left


@dataclass(frozen=True)
class Growth:
    days: list[GrowthDay]  # oldest first, today last; every day, quiet ones included

    @property
    def joined(self) -> int:
        return sum(d.joined for d in self.days)

    @property
    def left(self) -> int:
        return sum(d.left for d in self.days)

    @property
    def net(self) -> int:
        return self.joined - self.left

    @property
    def quiet(self) -> bool:
        return not any(d.joined or d.left for d in self.days)


def local_midnight(day: date, zone: ZoneInfo) -> datetime:
    """The start of `day` in `zone`, as a stored (naive UTC) moment."""
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC).replace(tzinfo=None)


def _day_number(moment: ColumnElement[Any] | QueryableAttribute[Any],
                bounds: list[datetime]) -> ColumnElement[Any]:
    """0 for the first day of the range, 1 for the next, …: the first midnight it is before."""
    return case(*[(moment < bound, n) for n, bound in enumerate(bounds[1:])], else_=None)


def growth(session: Session, zone: ZoneInfo, days: int = DAYS, now: datetime | None = None) -> Growth:
    """Joins and leaves per day over the last `days` days up to now (today included)."""
    today = in_zone(now or utcnow(), zone).date()
    first = today - timedelta(days=days - 1)
    bounds = [local_midnight(first + timedelta(days=n), zone) for n in range(days + 1)]
    start, end = bounds[0], bounds[-1]
    confirmed = (
        select(_day_number(Subscription.confirmed_at, bounds).label("day"),
               literal("joined").label("kind"))
        .where(Subscription.status != "unconfirmed", Subscription.confirmed_at >= start,
               Subscription.confirmed_at < end)
    )
    created = (
        select(_day_number(Subscription.created_at, bounds).label("day"),
               literal("joined").label("kind"))
        .where(Subscription.status != "unconfirmed", Subscription.confirmed_at.is_(None),
               Subscription.created_at >= start, Subscription.created_at < end)
    )
    leaves = (
        select(_day_number(Subscription.unsubscribed_at, bounds).label("day"),
               literal("left").label("kind"))
        .where(and_(Subscription.unsubscribed_at >= start, Subscription.unsubscribed_at < end))
    )
    moves = union_all(confirmed, created, leaves).subquery()
    counts: dict[tuple[int, str], int] = {
        (day, kind): count
        for day, kind, count in session.execute(
            select(moves.c.day, moves.c.kind, func.count()).group_by(moves.c.day, moves.c.kind)
        ).all()
    }
    return Growth([
        GrowthDay(first + timedelta(days=n), counts.get((n, "joined"), 0), counts.get((n, "left"), 0))
        for n in range(days)
    ])
