"""The account ceiling's cost per request: one EVALSHA (broadside.delivery.account_limit) on
top of the identity's pace, measured against the bare pacer (jobs.pacing.Pacer at 0 ms) and
against a message to aiosmtpd on loopback (~1.4 ms, FIELD-NOTES: about 700 a second).

Run: .venv/bin/python bench/account_ceiling.py [requests]   (Redis on 127.0.0.1:6379 or
BROADSIDE_BENCH_REDIS). The rate is set high (100,000/s) so the window never makes it wait:
what is measured is the script's round trip, not the ceiling doing its job. The target is a
ratio in the same run, as the machines are shared and loaded: the ceiling's cost per request
at most 4× a bare Redis PING (one round trip plus a script of five sorted-set commands)."""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid

from redis import Redis

from broadside.delivery.account_limit import Ceiling, account_digest
from jobs.pacing import Pacer

SMTP_LOOPBACK_S = 1 / 700
TARGET_PINGS = 4.0


def per_request(step, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - started) / n


def main(n: int = 20_000) -> int:
    redis = Redis.from_url(os.environ.get("BROADSIDE_BENCH_REDIS", "redis://127.0.0.1:6379/0"))
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    digest = account_digest("smtp://bench@smtp.example.com", "bench")
    assert digest is not None
    try:
        bare, limited, unlimited, pings = [], [], [], []
        for _ in range(3):
            pings.append(per_request(redis.ping, n))
            pacer = Pacer(0)
            ceiling = Ceiling(redis, namespace, digest, 100_000.0)
            counting = Ceiling(redis, namespace, digest, None)
            bare.append(per_request(pacer.wait, n))
            limited.append(per_request(lambda p=pacer, c=ceiling: (p.wait(), c.wait()), n))
            unlimited.append(per_request(lambda p=pacer, c=counting: (p.wait(), c.wait()), n))
        b, lim, unl, ping = (statistics.median(x) for x in (bare, limited, unlimited, pings))
        print(f"requests per run: {n:,} (median of 3)")
        print(f"bare pacer:                   {b * 1e6:8.2f} µs a request")
        print(f"pacer + ceiling (rate set): {lim * 1e6:8.2f} µs a request ({lim / b:,.0f}× the bare pacer)")
        print(f"pacer + ceiling (no rate):  {unl * 1e6:8.2f} µs a request ({unl / b:,.0f}× the bare pacer)")
        print(f"a Redis PING:                 {ping * 1e6:8.2f} µs")
        print(f"ceiling's share of a loopback SMTP message (~1.4 ms): {(lim - b) / SMTP_LOOPBACK_S:.0%}")
        ok = (lim - b) <= TARGET_PINGS * ping
        print(f"target: ceiling at most {TARGET_PINGS:g}× a PING: {(lim - b) / ping:.1f}× "
              f"{'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        for key in redis.scan_iter(f"{namespace}:*"):
            redis.delete(key)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))
