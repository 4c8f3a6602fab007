"""The optional hourly cap (an identity's; SEND_HOURLY_LIMIT for the default): a rolling hour
of send attempts in Redis.

Resetting moves the window (the record of past sends in Redis is dropped); the database,
where every send is recorded, loses nothing.
"""

from __future__ import annotations

import time
import uuid

from redis import Redis

from broadside.delivery.lease import stream_key

WINDOW_SECONDS = 3600


class HourlyCap:
    def __init__(self, redis: Redis, namespace: str, limit: int, stream: str = "default") -> None:
        """`stream`: the sending identity's key; each identity has its own cap."""
        self.redis = redis
        self.key = stream_key(namespace, "sends:hour", stream)
        self.limit = limit

    def _trim(self, now: float) -> None:
        self.redis.zremrangebyscore(self.key, "-inf", now - WINDOW_SECONDS)

    def used(self, now: float | None = None) -> int:
        now = now or time.time()
        self._trim(now)
        return int(self.redis.zcard(self.key))

    def free_at(self, now: float | None = None) -> float | None:
        """None when a send may go now; otherwise the epoch second when one may."""
        if self.limit <= 0:
            return None
        now = now or time.time()
        if self.used(now) < self.limit:
            return None
        oldest = self.redis.zrange(self.key, 0, 0, withscores=True)
        return (float(oldest[0][1]) + WINDOW_SECONDS) if oldest else None

    def record(self, now: float | None = None) -> None:
        if self.limit <= 0:
            return
        now = now or time.time()
        self.redis.zadd(self.key, {f"{now}:{uuid.uuid4().hex[:6]}": now})
        self.redis.expire(self.key, WINDOW_SECONDS + 60)

    def reset(self) -> None:
        self.redis.delete(self.key)
