"""Whether sending can happen right now: Redis reachable, a worker holding the lease, and the
last SMTP check (doctor, System page) not failed."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from redis.exceptions import RedisError

from webapp.doctor import last_smtp_check
from webapp.extensions import get_redis, namespaced


@dataclass(frozen=True)
class SendingStatus:
    redis_ok: bool
    worker_holder: str | None
    smtp_failure: str | None = None  # the last SMTP check's error, when it failed

    @property
    def problem(self) -> str | None:
        if not self.redis_ok:
            return "Sending is stopped: Redis is unreachable, so the worker cannot take jobs."
        if self.worker_holder is None:
            return "Sending is stopped: the worker is not running. Start it with `honcho start`."
        if self.smtp_failure:
            return (f"Sending will fail: the last SMTP check failed ({self.smtp_failure}). "
                    "Fix SMTP_URL, then check again on the System page.")
        return None


def sending_status() -> SendingStatus:
    try:
        holder = get_redis().get(namespaced("worker:lease"))
        last = last_smtp_check(get_redis(), current_app.config["BROADSIDE_NAMESPACE"], current_app.config)
    except RedisError:
        return SendingStatus(redis_ok=False, worker_holder=None)
    return SendingStatus(
        redis_ok=True,
        worker_holder=holder.decode() if holder else None,
        smtp_failure=last.detail if last is not None and not last.ok else None,
    )
