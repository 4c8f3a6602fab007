"""Sending benchmarks: throughput against a bare smtplib loop, the pipeline's ceiling, pacing,
and recovery after a SIGKILL. Each takes a populated database (see run_all.py) and the SMTP
servers from smtp_sink.py, and returns Figures.
"""

from __future__ import annotations

import re
import smtplib
import time
from datetime import datetime

from harness import Bench, broadcast_state, press_send, steer
from report import Figure, at_least
from smtp_sink import Sink

THROUGHPUT_TARGET = 0.70  # worker >= 70% of a bare smtplib loop (aiosmtpd; bench/wire.py asks
# 1.0 on PostgreSQL: the worker pipelines, the bare loop does not)
CEILING_TARGET = 0.90  # worker >= 90% of the bare loop against the discarding responder
PACING_RATE_TARGET = 0.95  # at 50 ms, >= 95% of 20/s and never above
RECOVERY_TARGET_S = 15.0  # sending resumes within 15 s of a SIGKILL and restart


def _rate(stats: dict) -> float:
    """Messages per second at the server, first MAIL FROM to last accepted end of DATA."""
    span = max(stats["end_at"]) - min(stats["mail_at"])
    return stats["count"] / span if span > 0 else float("inf")


def _send_with_worker(bench: Bench, app, database_url: str, sink: Sink, list_id: int, size: int,
                      *, delay_ms: int = 0, label: str) -> tuple[int, dict, float]:
    sink.reset()
    # Not enqueued here: the worker's start-up repair gives the broadcast its job, queued the
    # way that worker reads jobs (an older tree in bench/ab_throughput.py may not read JSON).
    broadcast_id, _ = press_send(app, list_id, enqueue=False)
    worker = bench.worker(database_url, smtp_url=sink.url, delay_ms=delay_ms, burst=True, label=label)
    try:
        worker.wait(timeout=60 + size / 20)
    finally:
        state = broadcast_state(app, broadcast_id)
        if state["status"] in ("queued", "sending", "paused"):
            # Unfinished: cancel it, or the next worker's orphan repair would send the rest
            # into another benchmark's figures.
            steer(app, broadcast_id, "cancel")
    stats = sink.stats()
    if state["status"] != "sent" or stats["count"] != size:
        raise RuntimeError(f"{label}: expected {size} messages and a sent broadcast, got "
                           f"{stats['count']} and {state}; worker log:\n{worker.output[-3000:]}")
    return broadcast_id, stats, worker.peak_mb


def bare_loop(port: int, messages: list[tuple[str, list[str], bytes]]) -> float:
    """The peer: one reused smtplib connection sending the same bytes, nothing else.
    Returns the client's own wall time; the rate compared is the one the server saw."""
    started = time.perf_counter()
    conn = smtplib.SMTP("127.0.0.1", port, timeout=30)
    conn.ehlo()
    for mail_from, rcpts, data in messages:
        conn.sendmail(mail_from, rcpts, data)
    conn.quit()
    return time.perf_counter() - started


def throughput(bench: Bench, app, database_url: str, backend: str, record: Sink, list_id: int,
               size: int, repeats: int = 1,
               target: float = THROUGHPUT_TARGET) -> tuple[list[Figure], list]:
    """Worker (SEND_DELAY_MS=0), then at once the bare loop replaying exactly the bytes the
    worker sent, both against the same aiosmtpd process; the ratio of the rates the server saw.
    With `repeats` > 1 the pair runs that many times and the median ratio is reported."""
    pairs = []
    messages: list = []
    for attempt in range(repeats):
        _, stats, _ = _send_with_worker(bench, app, database_url, record, list_id, size,
                                        label=f"throughput-{backend}-{size}-{attempt}")
        worker_rate = _rate(stats)
        messages = record.dump(bench.workdir / f"sent-{backend}-{size}.pickle")
        record.reset()
        bare_loop(record.port, messages)
        bare_rate = _rate(record.stats())
        record.reset()
        pairs.append((worker_rate / bare_rate, worker_rate, bare_rate))
    pairs.sort()
    ratio, worker_rate, bare_rate = pairs[len(pairs) // 2]
    size_kb = sum(len(m[2]) for m in messages) / len(messages) / 1024
    label = f"{size // 1000}k" if size >= 1000 else str(size)
    spread = (f"median of {repeats} pairs (ratios {', '.join(f'{p[0]:.2f}' for p in pairs)}); "
              if repeats > 1 else "")
    return [Figure(
        "throughput", f"worker / bare smtplib, {label} recipients, {backend}", ratio, "ratio",
        f"≥ {target:.2f}", at_least(ratio, target),
        f"{spread}worker {worker_rate:,.0f} msg/s, bare loop {bare_rate:,.0f} msg/s "
        f"(aiosmtpd, {size_kb:.1f} KB messages)",
        extra={"pairs": [{"ratio": r, "worker_msg_s": w, "bare_msg_s": b} for r, w, b in pairs]},
    )], messages


def ceiling(bench: Bench, app, database_url: str, backend: str, discard: Sink, list_id: int,
            size: int, messages: list, repeats: int = 1) -> list[Figure]:
    """The worker against a server that answers at once: what the pipeline itself can do,
    against the bare smtplib loop sending the same bytes to the same responder right after.
    Target: the worker >= CEILING_TARGET x the bare loop (issue 19 point 5). With `repeats`
    > 1 the pair runs that many times, in turn worker first and bare loop first (so a drift
    in the machine's speed favours neither), and the median ratio is reported."""
    replay = [messages[i % len(messages)] for i in range(size)] if messages else []
    pairs = []
    peak = 0.0
    discard.reset()
    for attempt in range(repeats):
        rates: dict[str, float] = {}
        for side in (("worker", "bare") if attempt % 2 == 0 else ("bare", "worker")):
            if side == "worker":
                _, stats, rss = _send_with_worker(bench, app, database_url, discard, list_id, size,
                                                  label=f"ceiling-{backend}-{size}-{attempt}")
                peak = max(peak, rss)
                rates["worker"] = _rate(stats)
            else:
                bare_loop(discard.port, replay)
                rates["bare"] = _rate(discard.stats())
            discard.reset()
        pairs.append((rates["worker"] / rates["bare"], rates["worker"], rates["bare"]))
    pairs.sort()
    ratio, worker_rate, bare_rate = pairs[len(pairs) // 2]
    label = f"{size // 1000}k" if size >= 1000 else str(size)
    spread = (f"median of {repeats} pairs (ratios {', '.join(f'{p[0]:.2f}' for p in pairs)}); "
              if repeats > 1 else "")
    return [
        Figure("ceiling", f"worker → discarding responder, {label}, {backend}", worker_rate, "msg/s",
               detail=f"bare smtplib → same responder: {bare_rate:,.0f} msg/s "
                      f"({len(replay):,} messages); worker peak RSS {peak:.0f} MB"),
        Figure("ceiling", f"worker / bare smtplib, discarding responder, {label}, {backend}", ratio,
               "ratio", f"≥ {CEILING_TARGET:.2f}", at_least(ratio, CEILING_TARGET),
               f"{spread}worker {worker_rate:,.0f} msg/s, bare loop {bare_rate:,.0f} msg/s",
               extra={"pairs": [{"ratio": r, "worker_msg_s": w, "bare_msg_s": b}
                                for r, w, b in pairs]}),
    ]


def pacing(bench: Bench, app, database_url: str, stamp: Sink,
           runs: list[tuple[int, int, int]]) -> list[Figure]:
    """runs: (SEND_DELAY_MS, recipients, list id). The gaps are between MAIL FROM arrivals as
    the kernel of the receiving server timed them (the `stamp` server: SO_TIMESTAMPNS), so
    that server's own scheduling cannot shorten or stretch a gap."""
    figures = []
    for delay_ms, size, list_id in runs:
        gaps, achieved = _paced_gaps(bench, app, database_url, stamp, list_id, size, delay_ms)
        configured = 1000 / delay_ms
        ratio = achieved / configured
        min_gap_ms = min(gaps) * 1000
        if delay_ms == 50:
            ok = PACING_RATE_TARGET <= ratio <= 1.0
            target = f"{PACING_RATE_TARGET:.2f} – 1.00"
        else:
            ok, target = None, ""
        figures.append(Figure(
            "pacing", f"achieved ÷ configured rate, {delay_ms} ms", ratio, "ratio", target, ok,
            f"{achieved:.2f}/s against {configured:.2f}/s over {size} sends; "
            f"mean gap {1000 / achieved:.2f} ms",
        ))
        figures.append(Figure(
            "pacing", f"minimum gap between sends, {delay_ms} ms", min_gap_ms, "ms",
            f"≥ {delay_ms} ms", min_gap_ms >= delay_ms,
            f"MAIL FROM arrivals, kernel receive timestamps; {len(gaps)} gaps",
        ))
    return figures


def pacing_seen_by_aiosmtpd(bench: Bench, app, database_url: str, record: Sink, list_id: int,
                            size: int, delay_ms: int = 50) -> list[Figure]:
    """The same measurement with aiosmtpd's handler clock (what the test suite sees): that
    server stamps MAIL FROM when its event loop gets to it, so one late stamp makes a long gap
    followed by a short one. Shown to explain the tests' tolerance; not a target."""
    gaps, _ = _paced_gaps(bench, app, database_url, record, list_id, size, delay_ms)
    short = sum(1 for g in gaps if g * 1000 < delay_ms)
    return [Figure(
        "pacing", f"minimum gap seen by aiosmtpd's handler, {delay_ms} ms", min(gaps) * 1000, "ms",
        detail=f"application-level stamps, {len(gaps)} gaps, {short} under {delay_ms} ms: each "
               "follows a long one (the server's own scheduling), the kernel stamps above show "
               "the wire",
    )]


def _paced_gaps(bench: Bench, app, database_url: str, sink: Sink, list_id: int, size: int,
                delay_ms: int) -> tuple[list[float], float]:
    _, stats, _ = _send_with_worker(bench, app, database_url, sink, list_id, size,
                                    delay_ms=delay_ms, label=f"pacing-{delay_ms}")
    sink.reset()
    mail = sorted(stats["mail_at"])
    gaps = [b - a for a, b in zip(mail, mail[1:], strict=False)]
    return gaps, (len(mail) - 1) / (mail[-1] - mail[0])


def _log_time(text: str, needle: str, wall_minus_mono: float) -> float | None:
    """The monotonic time of the first log line containing `needle` (asctime, ms precision)."""
    for line in text.splitlines():
        if needle in line:
            match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})", line)
            if match:
                wall = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
                return wall + int(match.group(2)) / 1000 - wall_minus_mono
    return None


# Issue 19 point 6: SIGKILL -> the restarted worker's next accepted send, under 5 s.
RECOVERY_FAST_TARGET_S = 5.0


def recovery(bench: Bench, app, database_url: str, record: Sink, list_id: int,
             delay_ms: int = 20) -> list[Figure]:
    """SIGKILL the worker's whole process group mid-broadcast, start a new one at once (as the
    Procfile starts it: `python -m jobs`), and time the gap to the next message the server
    accepts, split at the lease hand-over (taken at once from a holder proven dead, else
    after the TTL)."""
    from lean import start_worker

    from broadside.delivery.lease import LEASE_KEY, TTL_MS

    redis = bench.redis()
    lease_key = f"{bench.namespace}:{LEASE_KEY}"
    wall_minus_mono = time.time() - time.monotonic()
    record.reset()
    broadcast_id, _ = press_send(app, list_id)
    first = start_worker(bench, database_url, smtp_url=record.url, delay_ms=delay_ms, burst=False,
                         label="recovery-first")
    while redis.get(lease_key) is None and first.alive() and time.monotonic() - first.started_at < 60:
        time.sleep(0.005)
    cold_lease = time.monotonic() - first.started_at
    record.wait_for(60, 60, first.alive)
    cold_first_send = min(record.stats()["mail_at"]) - first.started_at
    holder = redis.get(lease_key)
    ttl_left_ms = redis.pttl(lease_key)
    killed_at = time.monotonic()
    first.kill_group()
    seen_at_kill = record.count()
    second = start_worker(bench, database_url, smtp_url=record.url, delay_ms=delay_ms, burst=False,
                          label="recovery-second")
    expired_at = taken_at = None
    deadline = killed_at + 60
    try:
        while time.monotonic() < deadline and second.alive():
            value = redis.get(lease_key)
            now = time.monotonic()
            if expired_at is None and value != holder:
                expired_at = now
            if taken_at is None and value is not None and value != holder:
                taken_at = now
            if taken_at is not None and record.count() > seen_at_kill:
                break
            time.sleep(0.005)
        stats = record.stats()
        after = [(m, e) for m, e in zip(stats["mail_at"], stats["end_at"], strict=True) if m > killed_at]
        if not after:
            raise RuntimeError("no send after the restart; log:\n" + second.output[-3000:])
        _, next_accepted = min(after)
        proven = "provably dead" in second.output
        ready_logged = _log_time(second.output, "worker ready for identity", wall_minus_mono)
        asked_logged = _log_time(second.output, "taking the sending lease", wall_minus_mono)
        held_logged = _log_time(second.output, "lease taken by", wall_minus_mono)
    finally:
        second.terminate()
        redis.close()
    state = broadcast_state(app, broadcast_id)
    if state["status"] in ("queued", "sending", "paused"):
        steer(app, broadcast_id, "cancel")  # the rest of the list is not part of the figure
    total = next_accepted - killed_at
    how = ("taken at once: the dead holder's pid was gone (same boot and pid namespace)" if proven
           else f"after the dead lease expired (it had {ttl_left_ms / 1000:.2f} s of its "
                f"{TTL_MS / 1000:.0f} s TTL left)")
    split = (f"kill → new worker holds the lease {taken_at - killed_at:.2f} s ({how}); "
             f"new lease → next accepted send {next_accepted - taken_at:.2f} s (orphan repair, "
             f"job, slice start)") if expired_at and taken_at else "lease hand-over not observed"
    return [
        Figure("recovery", "SIGKILL → next accepted send after restart", total, "s",
               f"< {RECOVERY_FAST_TARGET_S:.0f} s", total < RECOVERY_FAST_TARGET_S, split),
        Figure("recovery", "new worker start-up (spawn → ready, lease held)",
               (ready_logged - second.started_at) if ready_logged else None, "s",
               detail=f"`python -m jobs`: imports, schema check, lease; the rows in flight at "
                      f"the kill became unknown: {state['counts'].get('unknown', 0)}"),
        Figure("recovery", "lease hand-over (new worker's first attempt → lease held)",
               (held_logged - asked_logged) if held_logged and asked_logged else None, "s",
               "< 1 s", (held_logged - asked_logged) < 1.0 if held_logged and asked_logged else None,
               "what the lease adds to the recovery, start-up aside (the rest is start-up: "
               "imports, configuration, schema check; then orphan repair and the first slice)"),
        Figure("recovery", "cold start, no lease held (spawn → lease → first send)", cold_first_send, "s",
               detail=f"lease taken {cold_lease:.2f} s after spawn, first MAIL FROM "
                      f"{cold_first_send - cold_lease:.2f} s later"),
    ]
