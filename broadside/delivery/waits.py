"""Running totals of the time the worker spent waiting, for the pace and for the hourly cap.

The worker adds to them (INCRBYFLOAT, in the installation's Redis namespace) and `/metrics`
reads them at scrape time, so they survive restarts of either process.
"""

from __future__ import annotations

from redis import Redis

WAIT_KEYS = {"pace": "metrics:pace_wait_seconds", "hourly": "metrics:hourly_wait_seconds"}


def add_wait_seconds(redis: Redis, namespace: str, kind: str, seconds: float) -> None:
    """Time spent waiting for the pace ("pace") or the hourly cap ("hourly")."""
    if seconds > 0:
        redis.incrbyfloat(f"{namespace}:{WAIT_KEYS[kind]}", round(seconds, 6))
