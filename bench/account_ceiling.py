"""The account ceiling's cost per request: one EVALSHA (broadside.delivery.account_limit) on
top of the identity's pace, measured against the bare pacer (jobs.pacing.Pacer at 0 ms), a
bare Redis PING and a message to aiosmtpd on loopback (~1.4 ms: FIELD-NOTES, about 700 a
second).

    .venv/bin/python bench/account_ceiling.py [requests]    # alone (Redis on 127.0.0.1:6379)
    (and in bench/run_all.py, area "ceiling")

The rate is set high (100,000/s) so the window never makes it wait: what is measured is the
script's round trip, not the ceiling doing its job. The target is a ratio in the same run, as
the machines are shared and loaded: the ceiling's cost per request at most 4× a bare Redis
PING (one round trip plus a script of five sorted-set commands). A provider account with no
rate reads only its hold (one GET); an SMTP account with no rate has no ceiling at all."""

from __future__ import annotations

import statistics
import sys
import time
import uuid

from redis import Redis

from broadside.delivery.account_limit import Ceiling, account_digest
from jobs.pacing import Pacer

SMTP_LOOPBACK_S = 1 / 700
TARGET_PINGS = 4.0


def _per_request(step, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - started) / n


def measure(redis: Redis, namespace: str, n: int) -> dict[str, float]:
    """Seconds per request, median of 3 runs of `n`: bare pacer, with a rate, with none, PING."""
    digest = account_digest("postmark://bench-token@", "bench")
    assert digest is not None
    runs: dict[str, list[float]] = {"bare": [], "limited": [], "hold_only": [], "ping": []}
    try:
        for _ in range(3):
            pacer = Pacer(0)
            limited = Ceiling(redis, namespace, digest, 100_000.0)
            hold_only = Ceiling(redis, namespace, digest, None)
            runs["ping"].append(_per_request(redis.ping, n))
            runs["bare"].append(_per_request(pacer.wait, n))
            runs["limited"].append(_per_request(lambda p=pacer, c=limited: (p.wait(), c.wait()), n))
            runs["hold_only"].append(_per_request(lambda p=pacer, c=hold_only: (p.wait(), c.wait()), n))
    finally:
        for key in redis.scan_iter(f"{namespace}:account:*"):
            redis.delete(key)
    return {name: statistics.median(values) for name, values in runs.items()}


def run(bench, n: int = 5_000) -> list:
    """The figures for bench/run_all.py."""
    from report import Figure

    got = measure(bench.redis(), bench.namespace, n)
    cost = got["limited"] - got["bare"]
    pings = cost / got["ping"]
    return [
        Figure("ceiling", "account ceiling per request, in Redis PINGs", round(pings, 2), "×",
               f"≤ {TARGET_PINGS:g}×", pings <= TARGET_PINGS,
               f"{cost * 1e6:.0f} µs a request against a {got['ping'] * 1e6:.0f} µs PING; "
               f"{cost / SMTP_LOOPBACK_S:.0%} of a loopback SMTP message",
               extra={k: v * 1e6 for k, v in got.items()}),
        Figure("ceiling", "a provider account with no rate (its hold only), per request",
               round((got["hold_only"] - got["bare"]) * 1e6, 1), "µs"),
    ]


def main(n: int = 20_000) -> int:
    redis = Redis.from_url("redis://127.0.0.1:6379/0")
    got = measure(redis, f"bench-{uuid.uuid4().hex[:8]}", n)
    bare, cost = got["bare"], got["limited"] - got["bare"]
    print(f"requests per run: {n:,} (median of 3)")
    for name, label in (("bare", "bare pacer"), ("limited", "pacer + ceiling (a rate)"),
                        ("hold_only", "pacer + hold (no rate)"), ("ping", "a Redis PING")):
        print(f"{label:28} {got[name] * 1e6:9.2f} µs a request ({got[name] / bare:,.0f}× the bare pacer)")
    print(f"ceiling's share of a loopback SMTP message (~1.4 ms): {cost / SMTP_LOOPBACK_S:.0%}")
    ok = cost <= TARGET_PINGS * got["ping"]
    print(f"target: ceiling at most {TARGET_PINGS:g}× a PING: {cost / got['ping']:.1f}× "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))
