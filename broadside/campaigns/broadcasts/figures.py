"""The broadcasts' figures /metrics reads at scrape time: every delivery by how it ended (its
status, error class, skip reason, reply code and attempts) and the broadcasts by state.

A settled broadcast's groups are cached in Redis under a stamp of its counters, and a
broadcast still sending is counted from its counters and its rows past the last one counted
(`active_figures`); losing Redis loses only the cache.
"""

from __future__ import annotations

import json

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.active_figures import OUTCOMES, active_groups
from broadside.core.models import Broadcast, Delivery

DELIVERY_CACHE_KEY = "metrics:deliveries"
ACTIVE_CACHE_KEY = "metrics:active"
MAX_BROADCASTS_PER_QUERY = 500


def delivery_groups(session: Session, redis: Redis, namespace: str) -> list[tuple]:
    """Every delivery in (status, error_class, skip reason, smtp_code, attempts if sent, count)
    groups, for /metrics.

    A settled broadcast (nothing pending or in flight) changes no more, so its groups are
    cached in Redis under a stamp of its counters; only active or changed broadcasts are
    counted again, through the (broadcast_id, status) index. A scrape thus costs the
    active broadcasts' rows, not the whole table.
    """
    skipped_reason = case((Delivery.status == "skipped", Delivery.reason), else_=None)
    sent_attempts = case((Delivery.status == "sent", Delivery.attempts), else_=None)
    broadcasts = session.execute(
        select(Broadcast.id, Broadcast.pending_count, Broadcast.sending_count, Broadcast.sent_count,
               Broadcast.skipped_count, Broadcast.failed_count, Broadcast.unknown_count,
               Broadcast.updated_at)
    ).all()
    keys = [f"{namespace}:{DELIVERY_CACHE_KEY}:{row[0]}" for row in broadcasts]
    try:
        cached = redis.mget(keys) if keys else []
    except RedisError:
        cached = [None] * len(keys)
    groups: list[tuple] = []
    stale: dict[int, tuple[str, bool]] = {}
    for row, raw in zip(broadcasts, cached, strict=True):
        broadcast_id, pending, sending = row[0], row[1], row[2]
        stamp = "|".join(str(v) for v in row[1:])
        settled = pending == 0 and sending == 0
        if settled and raw:
            data = json.loads(raw)
            if data.get("stamp") == stamp:
                groups.extend(tuple(g) for g in data["groups"])
                continue
        if not settled:
            groups.extend(active_groups(session, redis,
                                        f"{namespace}:{ACTIVE_CACHE_KEY}:{broadcast_id}",
                                        broadcast_id, pending, sending,
                                        dict(zip(OUTCOMES, row[3:7], strict=True))))
            continue
        stale[broadcast_id] = (stamp, settled)
    if not stale:
        return groups
    query = (
        select(Delivery.broadcast_id, Delivery.status, Delivery.error_class, skipped_reason,
               Delivery.smtp_code, sent_attempts, func.count())
        .group_by(Delivery.broadcast_id, Delivery.status, Delivery.error_class, skipped_reason,
                  Delivery.smtp_code, sent_attempts)
    )
    if len(stale) <= MAX_BROADCASTS_PER_QUERY:
        query = query.where(Delivery.broadcast_id.in_(stale))
    fresh: dict[int, list[tuple]] = {}
    for broadcast_id, *group in session.execute(query).all():
        if broadcast_id in stale:
            fresh.setdefault(broadcast_id, []).append(tuple(group))
    try:
        with redis.pipeline(transaction=False) as pipe:
            for broadcast_id, (stamp, settled) in stale.items():
                if settled:
                    payload = json.dumps({"stamp": stamp, "groups": fresh.get(broadcast_id, [])})
                    # No expiry: a recount of every settled broadcast at once is the slow
                    # case (seconds at a million deliveries), so it happens only after Redis
                    # loses the keys. One small key per broadcast.
                    pipe.set(f"{namespace}:{DELIVERY_CACHE_KEY}:{broadcast_id}", payload)
            pipe.execute()
    except RedisError:
        pass  # the figures are right; the next scrape counts again
    for found in fresh.values():
        groups.extend(found)
    return groups


def broadcast_counts(session: Session) -> dict[str, int]:
    """Broadcasts by status (only the statuses some broadcast is in)."""
    return dict(session.execute(
        select(Broadcast.status, func.count()).group_by(Broadcast.status)).all())
