"""When a feed is polled and when its digest goes: `next_digest` (daily, or weekly on a
weekday, at "HH:MM" in the owner's time zone) and the poll interval (`POLL_EVERY`: a feed is
asked at most every 15 minutes)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

POLL_EVERY = timedelta(minutes=15)
# A digest that could not be sent is tried again this much later (not at every tick).
DIGEST_RETRY = timedelta(minutes=15)


class Schedule(Protocol):
    every: str | None
    at: str | None
    weekday: int | None


def next_digest(schedule: Schedule, zone: ZoneInfo, now: datetime) -> datetime:
    """The first moment after `now` (naive UTC) at which the digest is due, as naive UTC. A
    time the zone skips (spring forward) is read as the clock reads it just after."""
    hour, minute = (int(part) for part in (schedule.at or "00:00").split(":"))
    local_now = now.replace(tzinfo=UTC).astimezone(zone)
    for days in range(0, 9):
        day = (local_now + timedelta(days=days)).date()
        if schedule.every == "weekly" and day.weekday() != (schedule.weekday or 0):
            continue
        moment = datetime.combine(day, time(hour, minute), tzinfo=zone)
        utc = moment.astimezone(UTC).replace(tzinfo=None)
        if utc > now:
            return utc
    raise AssertionError("no digest time within nine days")  # pragma: no cover
