"""What each identity's stream is doing, read from Redis for the System page and /metrics:
who holds its lease, since when, its last heartbeat, the rate its worker achieved lately, the
values it runs on, its hourly cap's use and its queues. The worker writes the rate
(`record_rate`) and its running values (`record_running`) every few seconds; everything else
is the lease's, the cap's and RQ's own keys.

The running values are what the stream was built from (its identity's name, transport masked,
pace, hourly cap, its account's ceiling) and a fingerprint of them: an HMAC under SECRET_KEY
of the identity's `stream_settings`, so the page can tell that saved values differ from the running ones (a
changed password included) while Redis holds no hash of a secret anyone could test guesses
against."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass

from redis import Redis

from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.lease import HEARTBEAT_KEY, LEASE_KEY, SINCE_KEY, stream_key
from broadside.delivery.queues import PER_STREAM, Jobs

RATE_KEY = "worker:rate"
RATE_TTL_SECONDS = 60
RUNNING_KEY = "worker:running"


@dataclass(frozen=True)
class Running:
    """The values a stream's worker is sending with (not the saved ones, until it follows)."""

    name: str
    transport: str  # masked
    delay_ms: int
    hourly_limit: int
    fingerprint: str
    account_rate: float | None = None  # the account's ceiling it keeps to (requests/s)


def fingerprint(identity: SendingIdentity, secret_key: str) -> str:
    settings = json.dumps(identity.stream_settings).encode()
    return hmac.new(secret_key.encode(), settings, hashlib.sha256).hexdigest()[:32]


def running_values(identity: SendingIdentity, secret_key: str) -> Running:
    return Running(identity.name, identity.transport, identity.delay_ms, identity.hourly_limit,
                   fingerprint(identity, secret_key), identity.account_rate)


def record_running(redis: Redis, namespace: str, stream: str, running: Running) -> None:
    """Said by the stream's worker once it holds the lease, and again at each tick (it lapses
    with the worker)."""
    redis.set(stream_key(namespace, RUNNING_KEY, stream), json.dumps(running.__dict__),
              ex=RATE_TTL_SECONDS)


def forget_running(redis: Redis, namespace: str, stream: str) -> None:
    """The stream stops: before its lease goes, so a successor's values are never deleted."""
    redis.delete(stream_key(namespace, RUNNING_KEY, stream))


def _running(raw: object) -> Running | None:
    text = _text(raw)
    if not text:
        return None
    try:
        return Running(**json.loads(text))
    except (ValueError, TypeError):
        return None  # written by another version: not shown rather than wrong


@dataclass(frozen=True)
class StreamStatus:
    stream: str
    holder: str | None  # the worker holding the lease (host:pid:tag), None: no worker
    since: float | None  # epoch seconds
    heartbeat_age: float | None  # seconds since the holder last renewed
    rate: float | None  # sends (requests) per second over the worker's last few seconds
    hourly_used: int | None  # None: no cap
    queued: dict[str, int]  # per-stream queue -> jobs waiting
    running: Running | None = None  # None: no worker serves it (or not said yet)


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode()
    return str(value) if value is not None else None


def record_rate(redis: Redis, namespace: str, stream: str, per_second: float) -> None:
    redis.set(stream_key(namespace, RATE_KEY, stream), f"{per_second:.3f}", ex=RATE_TTL_SECONDS)


def read_stream(redis: Redis, namespace: str, stream: str, hourly_limit: int) -> StreamStatus:
    """One stream's status in a few Redis round trips (raises RedisError when unreachable)."""
    pipe = redis.pipeline(transaction=False)
    for base in (LEASE_KEY, SINCE_KEY, HEARTBEAT_KEY, RATE_KEY, RUNNING_KEY):
        pipe.get(stream_key(namespace, base, stream))
    jobs = Jobs(redis, namespace)
    for name in PER_STREAM:
        pipe.llen(f"rq:queue:{jobs.queue_name(name, stream)}")
    holder, since, heartbeat, rate, running, *lengths = pipe.execute()
    now = time.time()
    beat = _text(heartbeat)
    started = _text(since)
    measured = _text(rate)
    return StreamStatus(
        stream=stream,
        holder=_text(holder),
        since=float(started) if holder and started else None,
        heartbeat_age=max(0.0, now - float(beat)) if holder and beat else None,
        rate=float(measured) if measured else None,
        hourly_used=HourlyCap(redis, namespace, hourly_limit, stream).used() if hourly_limit else None,
        queued={name: int(n or 0) for name, n in zip(PER_STREAM, lengths, strict=True)},
        running=_running(running) if holder else None,
    )
