"""Fixed-window counters in Redis, for login attempts, sign-ups and the unsubscribe endpoints."""

from __future__ import annotations

from webapp.extensions import get_redis, namespaced


def hit(bucket: str, limit: int, window_seconds: int) -> bool:
    """Count one attempt in `bucket`; True while the count stays within `limit`."""
    key = namespaced(f"throttle:{bucket}")
    pipe = get_redis().pipeline()
    pipe.incr(key)
    pipe.expire(key, window_seconds, nx=True)
    count, _ = pipe.execute()
    return int(count) <= limit


def is_limited(bucket: str, limit: int) -> bool:
    value = get_redis().get(namespaced(f"throttle:{bucket}"))
    return value is not None and int(value) >= limit


def clear(bucket: str) -> None:
    get_redis().delete(namespaced(f"throttle:{bucket}"))
