"""Subscriber growth by day, in the owner's time zone: how many joined a list and how many left
one, on each of the last 30 days (the dashboard's chart).

A join is a subscription that became active (confirmed, or active from the start: an import,
the owner's page, the API) at `COALESCE(confirmed_at, created_at)`; a leave is its
`unsubscribed_at`. Someone on two lists counts on each. A subscription still unconfirmed has
not joined yet; one that left and came back counts its join only (rejoining clears the leave).

One query of counts over index ranges (migrations 0015 and 0016), three per day: the joins as
two ranges of (confirmed_at, created_at, status) — confirmed that day, or never confirmed and
created that day, which is COALESCE(confirmed_at, created_at) in the day without an expression
index — and the leaves as a range of unsubscribed_at. Each count reads its index alone, so the
cost follows the last 30 days' joins and leaves, not the size of the audience, and no row is
read or compared with thirty midnights (one query over the whole range that numbered each
moment's day with a CASE took 90-110 ms for 100,000 joins; the ranges take 8 ms). The days'
bounds are the local midnights, computed here in Python from the owner's zone. The same SQL
runs on SQLite and PostgreSQL (SQLite knows no time zones, so truncating to a UTC date in SQL
would put an evening in Tokyo on the wrong day), and a day is right across a change to or from
summer time.

PostgreSQL runs the statement without parallel workers: the 90 counts' costs add up past its
threshold, and it planned them as a Parallel Append in two workers, ~3 ms of start-up for
~10 ms of index reads, which then took the CPU of the other requests (at a million on two cores,
~21 ms a dashboard in-process against ~15 ms serially, and worse with two at once).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Integer,
    Select,
    String,
    bindparam,
    func,
    literal_column,
    select,
    text,
    union_all,
)
from sqlalchemy.orm import QueryableAttribute, Session

from broadside.core.models import Subscription
from broadside.core.models.audience import SubscriptionStatus
from broadside.core.timeutil import in_zone, utcnow

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


def _per_day(moment: QueryableAttribute[Any], days: int, kind: str,
             *where: ColumnElement[bool]) -> list[Select[int, str, int]]:
    """One count per day: the rows whose `moment` falls in [b<n>, b<n + 1>), the bounds
    bound when the statement runs."""
    return [select(literal_column(str(n), Integer).label("day"),
                   literal_column(f"'{kind}'", String).label("kind"), func.count().label("moves"))
            .where(*where, moment >= bindparam(f"b{n}"), moment < bindparam(f"b{n + 1}"))
            for n in range(days)]


@functools.cache
def _statement(days: int) -> CompoundSelect:
    """Built once per number of days: 90 SELECTs are ~18 ms of Python to build anew."""
    joined = Subscription.status != SubscriptionStatus.UNCONFIRMED.value
    return union_all(
        *_per_day(Subscription.confirmed_at, days, "joined", joined),
        *_per_day(Subscription.created_at, days, "joined", joined, Subscription.confirmed_at.is_(None)),
        *_per_day(Subscription.unsubscribed_at, days, "left"))


@contextlib.contextmanager
def serially(session: Session) -> Iterator[None]:
    """PostgreSQL: no parallel workers for what runs inside, the setting as it was after it
    (for the rest of the caller's transaction). Also the Deliverability page's counts per day
    (broadside.feedback.reputation.figures), for the same reason."""
    if session.get_bind().dialect.name != "postgresql":
        yield
        return
    setting = "max_parallel_workers_per_gather"
    was = session.execute(text(f"SELECT current_setting('{setting}'), "
                               f"set_config('{setting}', '0', true)")).one()[0]
    yield
    session.execute(text(f"SELECT set_config('{setting}', :was, true)"), {"was": was})


def growth(session: Session, zone: ZoneInfo, days: int = DAYS, now: datetime | None = None) -> Growth:
    """Joins and leaves per day over the last `days` days up to now (today included)."""
    today = in_zone(now or utcnow(), zone).date()
    first = today - timedelta(days=days - 1)
    bounds = {f"b{n}": local_midnight(first + timedelta(days=n), zone) for n in range(days + 1)}
    counts: dict[tuple[int, str], int] = {}
    with serially(session):
        rows = session.execute(_statement(days), bounds).all()
    for day, kind, moves in rows:
        counts[(day, kind)] = counts.get((day, kind), 0) + moves
    return Growth([
        GrowthDay(first + timedelta(days=n), counts.get((n, "joined"), 0), counts.get((n, "left"), 0))
        for n in range(days)
    ])
