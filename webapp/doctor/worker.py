"""Who holds a stream's sending lease (`broadside.delivery.lease`), since when, and its last
heartbeat: the worker's line among the checks (the default identity's stream, and whether a
worker serves every other identity's), and what the readiness, the System page and /metrics
read."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from redis import Redis
from redis.exceptions import RedisError

from broadside.core.timeutil import epoch_to_stored, local_format
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.lease import HEARTBEAT_KEY, LEASE_KEY, SINCE_KEY, stream_key
from webapp.doctor.check import Check
from webapp.templating import SYSTEM_TIME

UTC_ZONE = ZoneInfo("UTC")


@dataclass(frozen=True)
class WorkerInfo:
    holder: str | None
    since: float | None  # epoch seconds
    heartbeat: float | None  # epoch seconds

    def heartbeat_age(self, now: float | None = None) -> float | None:
        if self.heartbeat is None:
            return None
        return max(0.0, (now or time.time()) - self.heartbeat)


def _epoch(raw: bytes | None) -> float | None:
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def worker_info(redis: Redis, namespace: str, stream: str = "default") -> WorkerInfo:
    """Who holds a stream's sending lease (broadside.delivery.lease; the default identity's unless
    another stream is named), since when, and its last renewal."""
    holder, since, heartbeat = redis.mget(
        stream_key(namespace, LEASE_KEY, stream), stream_key(namespace, SINCE_KEY, stream),
        stream_key(namespace, HEARTBEAT_KEY, stream),
    )
    if not holder:
        return WorkerInfo(None, None, _epoch(heartbeat))
    return WorkerInfo(holder.decode(errors="replace"), _epoch(since), _epoch(heartbeat))


def format_clock(epoch: float, zone: ZoneInfo) -> str:
    """In the owner's zone, named as on every page (the System page shows these lines)."""
    return local_format(epoch_to_stored(epoch), zone, SYSTEM_TIME)


def check_worker(redis: Redis, namespace: str, zone: ZoneInfo = UTC_ZONE,
                 others: Sequence[SendingIdentity] = ()) -> Check:
    """The default identity's stream: who holds its lease, since when, its heartbeat; and,
    with other sending identities (`others`, live ones), whether a worker serves each of their
    streams too (each stream's own lease, as the System page reads it)."""
    try:
        info = worker_info(redis, namespace)
        unserved = [identity.name for identity in others
                    if worker_info(redis, namespace, identity.key).holder is None]
    except RedisError:
        return Check("worker", False, "unknown while Redis is not answering", "start Redis first (see above)")
    if info.holder is None:
        last = ""
        if info.heartbeat is not None:
            last = f" (last heartbeat {format_clock(info.heartbeat, zone)})"
        return Check("worker", False, f"no worker holds the sending lease{last}",
                     "start it: `python -m jobs`, or `honcho start` for web and worker")
    age = info.heartbeat_age()
    since = f" since {format_clock(info.since, zone)}" if info.since else ""
    beat = f", heartbeat {age:.1f} s ago" if age is not None else ""
    summary = f"{info.holder} holds the lease{since}{beat}"
    if unserved:
        return Check("worker", False, f"{summary}; no worker serves the stream of "
                     + ", ".join(f"“{name}”" for name in unserved),
                     "`python -m jobs` without --identity serves every identity, a new one "
                     "within seconds; where workers run with --identity, start "
                     "`python -m jobs --identity NAME` for each one missing")
    if others:
        summary += f"; every identity's stream is served ({len(others) + 1})"
    return Check("worker", True, summary)
