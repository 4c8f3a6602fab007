"""The lease against real Redis and real processes: a holder SIGKILLed is replaced at once (its
death proven), a holder frozen is replaced after the TTL and sends nothing after it wakes, a
live but slow holder never loses its lease, and the pace callback refuses a stale lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import broadside.delivery.lease
from broadside.delivery.lease import (
    DRIFT_S,
    TTL_MS,
    Lease,
    LeaseKeeper,
    LeaseLost,
    own_proof,
    provably_dead,
)
from jobs.runtime import LeasedPacer
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.slow

# A holder in its own process: takes the lease, keeps it with a LeaseKeeper, prints "held",
# then its "send loop" either sleeps (a slow SMTP reply) or, each 50 ms, asks the pace
# callback for the next send and prints "sent" or "lost".
HOLDER = """
import sys, time
from redis import Redis
from broadside.delivery.lease import Lease, LeaseKeeper, LeaseLost
from jobs.runtime import LeasedPacer
redis = Redis.from_url(sys.argv[1], socket_timeout=1)
lease = Lease(redis, sys.argv[2], identity=sys.argv[3])
assert lease.try_acquire()
keeper = LeaseKeeper(lease, lambda holder: print("lost-to", holder, flush=True))
keeper.start()
pacer = LeasedPacer(0, keeper)
print("held", flush=True)
if sys.argv[4] == "slow":
    time.sleep(float(sys.argv[5]))  # one slow server reply: the loop does nothing at all
    print("still-mine" if lease.still_mine() else "not-mine", flush=True)
else:
    while True:
        try:
            pacer.wait()
            print("sent", time.time(), flush=True)
        except LeaseLost:
            print("lost", flush=True)
            break
        time.sleep(0.05)
time.sleep(60)
"""


def start_holder(namespace: str, identity: str, mode: str, seconds: float = 0.0) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, REDIS_URL, namespace, identity, mode,
                             str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def test_two_kept_leases_contend_and_only_one_ever_holds(redis_client, namespace):
    redis = redis_client
    first, second = Lease(redis, namespace, "a"), Lease(redis, namespace, "b")
    assert first.try_acquire()
    keeper = LeaseKeeper(first, lambda holder: None)
    keeper.start()
    try:
        deadline = time.monotonic() + 2.5 * TTL_MS / 1000
        while time.monotonic() < deadline:  # well past the TTL: renewals keep it
            assert not second.try_acquire()
            assert second.take_from_dead() is None  # "a" has no proof of death: it is alive
            assert first.still_mine() and first.fresh()
            time.sleep(0.1)
    finally:
        keeper.stop()
        keeper.join(5)
    first.release()
    assert second.try_acquire()


def test_a_sigkilled_holder_is_replaced_at_once(redis_client, namespace):
    redis = redis_client
    holder = start_holder(namespace, "killed-holder", "send")
    successor = Lease(redis, namespace, "successor")
    try:
        assert not successor.try_acquire() and successor.take_from_dead() is None  # alive
        holder.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        holder.wait(10)  # reaped or not (a zombie), it is dead
        while not successor.try_acquire():
            successor.take_from_dead()  # as jobs.stream.acquire_lease does at each attempt
            assert time.monotonic() - killed_at < 5, "the successor waited 5 s"
        took = time.monotonic() - killed_at
        assert took < 1.0, f"death was proven, yet the successor waited {took:.2f} s"
        assert successor.still_mine()
    finally:
        stop(holder)


def test_a_zombie_holder_is_dead(redis_client, namespace):
    redis = redis_client
    holder = start_holder(namespace, "zombie-holder", "send")
    try:
        os.kill(holder.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        stat = Path(f"/proc/{holder.pid}/stat")
        while stat.read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert Lease(redis, namespace, "next").take_from_dead() == "zombie-holder"  # not reaped
    finally:
        stop(holder)


def test_proofs_from_elsewhere_prove_nothing():
    mine = own_proof()
    assert mine is not None and not provably_dead(mine)
    boot, pidns, pid, started = mine.split("|")
    assert not provably_dead(f"another-boot|{pidns}|{pid}|{started}")
    assert not provably_dead(f"{boot}|4026531999|999999|1")  # another pid namespace
    assert provably_dead(f"{boot}|{pidns}|{pid}|{int(started) + 1}")  # pid reused since
    assert not provably_dead("garbage")


def test_a_frozen_holder_is_replaced_after_the_ttl_and_sends_nothing_after_waking(redis_client, namespace):
    redis = redis_client
    holder = start_holder(namespace, "frozen-holder", "send")
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline().startswith("sent")
        holder.send_signal(signal.SIGSTOP)  # a paused VM: renewals and sends stop together
        frozen_at = time.time()
        successor = Lease(redis, namespace, "successor")
        while not successor.try_acquire():
            # Alive (stopped, not dead): no proof, only the TTL hands it over.
            assert successor.take_from_dead() is None
            assert time.time() - frozen_at < TTL_MS / 1000 + 2
            time.sleep(0.05)
        taken_at = time.time()
        holder.send_signal(signal.SIGCONT)
        lines = []
        for line in holder.stdout:
            lines.append(line.split())
            if line.strip() == "lost":
                break
        sent_after = [float(words[1]) for words in lines if words[0] == "sent" and float(words[1]) > taken_at]
        assert not sent_after, f"the old holder started sends after the successor took over: {lines}"
        assert ["lost"] in lines
        assert successor.still_mine()
    finally:
        stop(holder)


def test_a_live_but_slow_holder_never_loses_its_lease(redis_client, namespace):
    redis = redis_client
    slow_s = 3 * TTL_MS / 1000
    holder = start_holder(namespace, "slow-holder", "slow", slow_s)
    assert holder.stdout is not None
    try:
        successor = Lease(redis, namespace, "successor")
        deadline = time.monotonic() + slow_s - 0.5
        while time.monotonic() < deadline:
            assert not successor.try_acquire()
            assert successor.take_from_dead() is None
            time.sleep(0.1)
        assert holder.stdout.readline().strip() == "still-mine"
    finally:
        stop(holder)


def test_the_pace_callback_waits_for_a_renewal_and_refuses_a_lost_lease(redis_client, namespace, monkeypatch):
    redis = redis_client
    lease = Lease(redis, namespace, "me")
    assert lease.try_acquire()
    keeper = LeaseKeeper(lease, lambda holder: None)
    pacer = LeasedPacer(0, keeper)
    lease.valid_until = time.monotonic() - 1  # stale: as after a freeze
    renewed = threading.Timer(0.3, lambda: lease.renew())
    renewed.start()
    began = time.monotonic()
    pacer.wait()  # waits for the renewal (the key is still ours), then lets the send go
    assert 0.2 < time.monotonic() - began < 2 and lease.fresh()
    renewed.join()
    # The key is someone else's now: the keeper's next renewal fails, and the send is refused.
    redis.set(lease.key, "someone-else")
    monkeypatch.setattr(broadside.delivery.lease, "RENEW_EVERY_S", 0.05)
    keeper.start()
    deadline = time.monotonic() + 5
    while not keeper.lost.is_set():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with pytest.raises(LeaseLost):
        pacer.wait()
    assert not lease.still_mine()
    assert DRIFT_S < TTL_MS / 1000
