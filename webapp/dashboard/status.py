"""Whether sending can happen right now: Redis reachable and a worker holding the lease."""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import RedisError

from webapp.extensions import get_redis, namespaced


@dataclass(frozen=True)
class SendingStatus:
    redis_ok: bool
    worker_holder: str | None

    @property
    def problem(self) -> str | None:
        if not self.redis_ok:
            return "Sending is stopped: Redis is unreachable, so the worker cannot take jobs."
        if self.worker_holder is None:
            return "Sending is stopped: the worker is not running. Start it with `honcho start`."
        return None


def sending_status() -> SendingStatus:
    try:
        holder = get_redis().get(namespaced("worker:lease"))
    except RedisError:
        return SendingStatus(redis_ok=False, worker_holder=None)
    return SendingStatus(redis_ok=True, worker_holder=holder.decode() if holder else None)
