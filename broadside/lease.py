"""Invariant 1, one consumer per identity: each identity's stream is sent by the one worker
holding that identity's lease in Redis while alive.

A second worker started beside it waits (saying who holds the lease) instead of doubling
the send rate. The lease expires `TTL_MS` after the holder's last renewal, so a worker killed
with SIGKILL is replaced within seconds. The sender re-checks the lease before every claim,
so a worker that lost it (Redis flushed, a long stall) stops sending at once.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from redis import Redis

TTL_MS = 8_000
RENEW_EVERY_S = 2.0
LEASE_KEY = "worker:lease"
SINCE_KEY = "worker:lease:since"
HEARTBEAT_KEY = "worker:heartbeat"

# Renew or release only if we still hold it (compare-and-set, atomic in Redis).
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def stream_key(namespace: str, base: str, stream: str = "default") -> str:
    """A per-identity Redis key: the default identity keeps the keys it always had."""
    return f"{namespace}:{base}" if stream == "default" else f"{namespace}:{base}:{stream}"


class Lease:
    def __init__(self, redis: Redis, namespace: str, identity: str | None = None,
                 stream: str = "default") -> None:
        """`stream`: the sending identity's key (SendingIdentity.key); `identity`: who holds
        it (this process, by default)."""
        self.redis = redis
        self.stream = stream
        self.key = stream_key(namespace, LEASE_KEY, stream)
        self.since_key = stream_key(namespace, SINCE_KEY, stream)
        self.heartbeat_key = stream_key(namespace, HEARTBEAT_KEY, stream)
        self.identity = identity or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    def holder(self) -> str | None:
        value = self.redis.get(self.key)
        if isinstance(value, bytes):
            return value.decode()
        return value or None

    def try_acquire(self) -> bool:
        if self.redis.set(self.key, self.identity, nx=True, px=TTL_MS):
            now = str(time.time())
            self.redis.set(self.since_key, now)
            self.redis.set(self.heartbeat_key, now)
            return True
        return False

    def renew(self) -> bool:
        ok = bool(self._renew(keys=[self.key], args=[self.identity, TTL_MS]))
        if ok:
            self.redis.set(self.heartbeat_key, str(time.time()))
        return ok

    def still_mine(self) -> bool:
        return self.redis.get(self.key) == self.identity.encode()

    def release(self) -> None:
        self._release(keys=[self.key], args=[self.identity])
