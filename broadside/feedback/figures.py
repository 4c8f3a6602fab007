"""Bounces and complaints reported by the providers, counted from their events for /metrics.

Events are only ever appended, so a full count is cached in Redis with the highest event id
it covered and redone every BOUNCE_RECOUNT_SECONDS; in between, a scrape counts only the
newer events. Losing Redis loses only the cache.
"""

from __future__ import annotations

import json

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from broadside.core.models import Event

BOUNCE_CACHE_KEY = "metrics:bounces"
BOUNCE_RECOUNT_SECONDS = 300


def _count_bounces(session: Session, since_id: int | None, up_to_id: int | None) -> dict[str, int]:
    bounce_type = case(
        (Event.detail.like("hard bounce%"), "hard"),
        (Event.detail.like("soft bounce%"), "soft"),
        else_="other",
    )
    query = select(Event.kind, bounce_type, func.count()).where(Event.kind.in_(("bounce", "complaint")))
    if since_id is not None:
        query = query.where(Event.id > since_id)
    if up_to_id is not None:
        query = query.where(Event.id <= up_to_id)
    counts: dict[str, int] = {}
    for kind, kind_type, count in session.execute(query.group_by(Event.kind, bounce_type)).all():
        label = "complaint" if kind == "complaint" else kind_type
        counts[label] = counts.get(label, 0) + count
    return counts


def bounce_counts(session: Session, redis: Redis, namespace: str) -> dict[str, int]:
    """Bounce and complaint events by type. Events are only ever appended, so a full count
    (a scan of the events table) is kept in Redis with the highest event id it covered and
    redone every few minutes; in between, a scrape counts only the newer events (a range
    of the primary key)."""
    key = f"{namespace}:{BOUNCE_CACHE_KEY}"
    try:
        raw = redis.get(key)
    except RedisError:
        raw = None
    if raw:
        base = json.loads(raw)
        recent = _count_bounces(session, since_id=base["max_id"], up_to_id=None)
        labels = set(base["counts"]) | set(recent)
        return {label: base["counts"].get(label, 0) + recent.get(label, 0) for label in labels}
    max_id = session.scalar(select(func.max(Event.id))) or 0
    counts = _count_bounces(session, since_id=None, up_to_id=max_id)
    try:
        redis.set(key, json.dumps({"max_id": max_id, "counts": counts}), ex=BOUNCE_RECOUNT_SECONDS)
    except RedisError:
        pass
    return counts
