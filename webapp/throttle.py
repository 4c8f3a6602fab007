"""Fixed-window counters in Redis, for login attempts, sign-ups and the unsubscribe endpoints.

Every count is taken atomically: INCR and the window's EXPIRE go to Redis in one MULTI/EXEC
transaction, and the decision is made on the value INCR returned. There is no read-then-write,
so a burst of parallel requests cannot all read "under the limit" before any of them counts.
"""

from __future__ import annotations

import ipaddress

from webapp.extensions import get_redis, namespaced

# Undo one count, but never create a key (a bare DECR would make one at -1 with no expiry).
_REFUND = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('DECR', KEYS[1])
end
return 0
"""


def client_key(remote_addr: str | None) -> str:
    """The client a remote address stands for, in every per-client throttle.

    Callers pass `request.remote_addr`: behind trusted proxies it is already the client's
    address, not the proxy's (webapp/proxies.py rewrites it before Flask sees the request).

    An IPv4 client is its address. An IPv6 client is its /64: one household, office or server
    is given a whole /64 (2^64 addresses), so counting single IPv6 addresses would let anybody
    rotate through fresh ones for free. An IPv4-mapped IPv6 address counts as its IPv4 address.
    """
    if not remote_addr:
        return "unknown"
    text = remote_addr.strip().split("%", 1)[0]  # no zone index ("fe80::1%eth0")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return remote_addr[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def _key(bucket: str) -> str:
    return namespaced(f"throttle:{bucket}")


def increment(bucket: str, window_seconds: int) -> int:
    """Count one attempt in `bucket` and return the count within the current window."""
    return count_all([bucket], window_seconds)[0]


def count_all(buckets: list[str], window_seconds: int) -> list[int]:
    """Count one attempt in each bucket, all in one transaction; the counts, in order."""
    pipe = get_redis().pipeline(transaction=True)
    for bucket in buckets:
        key = _key(bucket)
        pipe.incr(key)
        pipe.expire(key, window_seconds, nx=True)
    results = pipe.execute()
    return [int(value) for value in results[0::2]]


def hit(bucket: str, limit: int, window_seconds: int) -> bool:
    """Count one attempt in `bucket`; True while the count stays within `limit`."""
    return increment(bucket, window_seconds) <= limit


def refund(bucket: str) -> None:
    """Give back one attempt counted in `bucket` (one that turned out to be legitimate)."""
    get_redis().eval(_REFUND, 1, _key(bucket))


def clear(bucket: str) -> None:
    get_redis().delete(_key(bucket))
