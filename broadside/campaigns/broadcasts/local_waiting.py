"""What a broadcast sent at each reader's own hour still waits for: the progress bar's "Waiting:
1,204 for 09:00 Asia/Tokyo (01:00 your time), …".

The copies not yet due are counted by the moment they are due (`local_time.waiting`, one
GROUP BY over the broadcast's pending rows), and each moment is named by the zones whose hour
it is (`Broadcast.local_due`, fixed at the press; "" is the owner's, for readers without a
zone). The progress fragment asks every 1.5 s while a send runs, and at a million rows that
GROUP BY is not free: its answer is kept in Redis for CACHE_SECONDS, so the database counts at
most once per half minute per broadcast whoever watches. A moment that passed since is dropped
when read (its copies are leaving now); with Redis down it is counted at each ask.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.local_time import OWNER, waiting
from broadside.core.models import Broadcast

CACHE_SECONDS = 30


@dataclass(frozen=True)
class WaitingHour:
    due: datetime  # naive UTC
    readers: int
    zones: tuple[str, ...]  # whose hour it is: IANA names, OWNER ("") for readers without one

    @property
    def owners_only(self) -> bool:
        return self.zones == (OWNER,)

    @property
    def named(self) -> tuple[str, ...]:
        return tuple(zone for zone in self.zones if zone != OWNER)


def _read(session: Session, broadcast_id: int, now: datetime) -> tuple[str | None, list[list]]:
    at, local_due = session.execute(select(Broadcast.send_at_local, Broadcast.local_due)
                                    .where(Broadcast.id == broadcast_id)).one_or_none() or (None, None)
    if not local_due:
        return at, []
    by_moment: dict[datetime, list[str]] = {}
    for zone, moment in local_due.items():
        by_moment.setdefault(datetime.fromisoformat(moment), []).append(zone)
    return at, [[due.isoformat(), count, sorted(by_moment.get(due, []))]
                for due, count in waiting(session, broadcast_id, now)]


def waiting_hours(session: Session, redis: Redis | None, key: str, broadcast_id: int,
                  now: datetime) -> tuple[str | None, list[WaitingHour]]:
    """(the broadcast's "HH:MM", what waits for which moment, earliest first); the moments
    still ahead of `now` (naive UTC). Nothing for a broadcast that sent at once."""
    raw = None
    if redis is not None:
        try:
            raw = redis.get(key)
        except RedisError:
            raw = None
    if raw:
        at, rows = json.loads(raw)
    else:
        at, rows = _read(session, broadcast_id, now)
        if redis is not None:
            try:
                redis.set(key, json.dumps([at, rows]), ex=CACHE_SECONDS)
            except RedisError:
                pass
    hours = [WaitingHour(datetime.fromisoformat(due), int(count), tuple(zones))
             for due, count, zones in rows]
    return at, [hour for hour in hours if hour.due > now]
