"""Invariant 1, one consumer per identity: each identity's stream is sent by the one worker
holding that identity's lease in Redis while alive.

A second worker started beside it waits (saying who holds the lease) instead of doubling the
send rate. The holder is a stream: a thread of a worker process that serves many identities,
each stream with its own lease, keeper and value (host, pid and a random part), so two
streams of one process never share a lease, and its proof of life (below) is its process's:
all its streams live and die with it. The lease is a Redis key with a TTL of `TTL_MS`,
renewed every `RENEW_EVERY_S` by a `LeaseKeeper` thread of its own (never by the send loop),
with a compare-and-set.

How a successor gets the stream, and how fast:
- The holder stops (SIGTERM, a deploy): it releases the lease; the successor takes it at its
  next attempt (0.5 s).
- The holder dies (SIGKILL, OOM, a crash) on the same machine: its lease carries a proof of
  who it is (`proof_key`: boot id, pid namespace, pid and the process's start time). A
  successor that shares the boot and the pid namespace looks the process up in /proc; when
  it is gone (or a zombie, or the pid now belongs to a younger process) the holder provably
  sends nothing any more, and the successor deletes the dead holder's lease (a
  compare-and-delete on its exact value) and takes it at once. Anything else (another
  machine, another container's pid namespace, no /proc) proves nothing: the successor waits.
- Otherwise the lease expires `TTL_MS` after the holder's last renewal.

Why two workers can never send for one identity at once:
1. Only one process holds the key: it is taken with SET NX and renewed, released or deleted
   only by compare-and-set on the holder's unique value (host, pid and a random part).
2. The holder knows how long the key is surely still its own without asking Redis:
   `valid_until`, the moment the last successful renewal (or the acquisition) was *sent*,
   plus the TTL, minus `DRIFT_S` for the two clocks' rates. Redis started the TTL later than
   that moment, so the key outlives `valid_until`.
3. The sender re-checks the lease before every claim (`still_mine`: fresh locally and still
   its value in Redis); a claim covers about 0.2 s of sends. And right before each message's
   MAIL FROM (or provider request) the pace callback checks `fresh()` locally (no round
   trip: jobs.runtime.LeasedPacer); past `valid_until` it waits for the keeper's next
   renewal, and raises `LeaseLost` if the keeper finds the lease gone.
So a message starts only while the key is surely the holder's, and a successor's key exists
only after the holder's is gone. What can overlap is the one message already on the wire
when the holder froze (its MAIL FROM was sent in time; its DATA is finished later); nothing
can start after.
- The renewal thread stalls (the whole process frozen: SIGSTOP, a paused VM, swap): the
  sender is frozen with it; on waking, the sender finds `valid_until` past, waits for a
  renewal, and the renewal's compare-and-set fails if a successor took over: it stops.
- Redis does not answer for a while: renewals fail; the key may expire, and nobody can take it
  while Redis is down. Past `valid_until` the sender waits (at its pace callback or its next
  claim); when Redis answers, the keeper renews (the key still ours), takes the key again if
  it vanished and nobody holds it (nobody sent meanwhile: a holder would have the key), or
  reports the lease lost and the worker stops.
- A slow SMTP reply holds the send loop for 30 s: the keeper renews independently, so a live
  but slow holder keeps its lease (and a successor keeps waiting); the loop goes on after.
- Redis flushed or restarted with the key gone: the keeper's next renewal fails; if nobody
  else holds the key it takes it again, otherwise the worker stops (its sender found the key
  not its own at its next claim anyway).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

TTL_MS = 3_000
RENEW_EVERY_S = 0.5
# The holder counts its lease as surely its own until TTL - DRIFT_S after a renewal was sent:
# room for the two clocks' rates and a renewal answered late.
DRIFT_S = 0.5
LEASE_KEY = "worker:lease"
SINCE_KEY = "worker:lease:since"
HEARTBEAT_KEY = "worker:heartbeat"
PROOF_KEY = "worker:lease:proof"

log = logging.getLogger("broadside.worker")

# Renew only if we still hold it (compare-and-set, atomic in Redis), and beat the heartbeat.
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('set', KEYS[2], ARGV[3])
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
# Release (or delete a proven-dead holder's lease) only if the value is still exactly it.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class LeaseLost(RuntimeError):
    """Raised right before a send when the lease is no longer surely this process's own."""


def stream_key(namespace: str, base: str, stream: str = "default") -> str:
    """A per-identity Redis key: the default identity keeps the keys it always had."""
    return f"{namespace}:{base}" if stream == "default" else f"{namespace}:{base}:{stream}"


# ---------------------------------------------------------------- a holder's proof of life


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _start_time(pid: int) -> tuple[str, str] | None:
    """A process's state and start time (clock ticks since boot), or None when it is gone."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0], fields[19]  # state (field 3), starttime (field 22)


def _pid_namespace() -> str | None:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


def own_proof() -> str | None:
    """Who this process is, in a form another process on the same machine can check:
    boot id, pid namespace, pid, start time. None where /proc does not say."""
    boot, pidns, pid = _read("/proc/sys/kernel/random/boot_id"), _pid_namespace(), os.getpid()
    started = _start_time(pid)
    if not boot or not pidns or started is None:
        return None
    return f"{boot}|{pidns}|{pid}|{started[1]}"


def provably_dead(proof: str) -> bool:
    """True only when the process named by `proof` surely no longer runs: same boot and pid
    namespace as ours, and its pid gone, a zombie, or taken by a process started later."""
    try:
        boot, pidns, pid, started = proof.split("|")
        number = int(pid)
    except ValueError:
        return False
    if boot != _read("/proc/sys/kernel/random/boot_id") or pidns != _pid_namespace():
        return False  # another machine or container: /proc here says nothing about it
    now = _start_time(number)
    return now is None or now[0] in ("Z", "X") or now[1] != started


# ---------------------------------------------------------------- the lease


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value) if value else None


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
        self.proof_key = stream_key(namespace, PROOF_KEY, stream)
        self.identity = identity or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        # Until when the key is surely ours (time.monotonic). None: nobody keeps this lease
        # (a caller renewing by hand, as tests do), so only Redis is asked.
        self.valid_until: float | None = None

    def holder(self) -> str | None:
        value = self.redis.get(self.key)
        if isinstance(value, bytes):
            return value.decode()
        return value or None

    def try_acquire(self) -> bool:
        sent_at = time.monotonic()
        if self.redis.set(self.key, self.identity, nx=True, px=TTL_MS):
            self._fresh_from(sent_at)
            now = str(time.time())
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(self.since_key, now)
            pipe.set(self.heartbeat_key, now)
            proof = own_proof()
            if proof is not None:
                pipe.set(self.proof_key, f"{self.identity}|{proof}")
            else:
                pipe.delete(self.proof_key)
            pipe.execute()
            return True
        return False

    def take_from_dead(self) -> str | None:
        """Delete the lease of a holder proven dead (see the module's docstring); returns the
        dead holder's value, or None when nothing was proven."""
        holder, proof = (_text(v) for v in self.redis.mget(self.key, self.proof_key))
        if not holder or not proof:
            return None
        named, _, rest = proof.partition("|")
        if named != holder or not provably_dead(rest):
            return None
        if self._release(keys=[self.key], args=[holder]):
            return holder
        return None

    def renew(self) -> bool:
        sent_at = time.monotonic()
        ok = bool(self._renew(keys=[self.key, self.heartbeat_key],
                              args=[self.identity, TTL_MS, str(time.time())]))
        if ok:
            self._fresh_from(sent_at)
        return ok

    def _fresh_from(self, sent_at: float) -> None:
        if self.valid_until is not None:
            self.valid_until = sent_at + TTL_MS / 1000 - DRIFT_S

    def fresh(self) -> bool:
        """Locally, without Redis: is the key surely still ours (always, when unkept)?"""
        return self.valid_until is None or time.monotonic() < self.valid_until

    def still_mine(self) -> bool:
        return self.fresh() and self.redis.get(self.key) == self.identity.encode()

    def release(self) -> None:
        self._release(keys=[self.key], args=[self.identity])


class LeaseKeeper(threading.Thread):
    """Renews a held lease every RENEW_EVERY_S, on its own thread: the send loop, a slow
    server or a long database query never delays a renewal. `on_lost` is called once when the
    lease is found to be someone else's; after that `lost` is set and `fresh()` stays false."""

    def __init__(self, lease: Lease, on_lost: Callable[[str | None], None],
                 on_redis: Callable[[RedisError | None], None] | None = None) -> None:
        super().__init__(name=f"lease {lease.stream}", daemon=True)
        self.lease = lease
        self.on_lost = on_lost
        self.on_redis = on_redis or (lambda error: None)
        self.lost = threading.Event()
        self.done = threading.Event()
        self.renewed = threading.Condition()
        lease.valid_until = time.monotonic() + TTL_MS / 1000 - DRIFT_S  # just acquired

    def run(self) -> None:
        while not self.done.wait(RENEW_EVERY_S):
            holder: str | None = None
            try:
                ok = self.lease.renew()
                if not ok:
                    holder = self.lease.holder()
                    ok = holder is None and self.lease.try_acquire()
                    if ok:
                        log.warning("lease had vanished (Redis restarted or flushed); taken again")
                self.on_redis(None)
            except RedisError as exc:
                self.on_redis(exc)
                continue
            if not ok:
                self.lease.valid_until = float("-inf")
                self.lost.set()
                self.on_lost(holder)
                return
            with self.renewed:
                self.renewed.notify_all()

    def wait_fresh(self, stop: threading.Event | None = None) -> None:
        """Return once the lease is surely ours (at once, mostly); raise LeaseLost when it is
        not (lost, or this keeper stopped)."""
        while not self.lease.fresh():
            if self.lost.is_set() or self.done.is_set() or (stop is not None and stop.is_set()):
                raise LeaseLost(f"the sending lease of stream {self.lease.stream} is not ours any more")
            with self.renewed:
                self.renewed.wait(RENEW_EVERY_S)

    def stop(self) -> None:
        self.done.set()
        with self.renewed:
            self.renewed.notify_all()
