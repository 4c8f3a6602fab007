"""What an A/B test and "at each reader's own hour" cost on the send path, as ratios in one run:
the audience snapshot (the worker writing every reader's row) of a plain broadcast, of one
with a four-variant A/B test (each row's variant drawn in SQL from the seed) and of one at
09:00 in each reader's time zone (each row's due time from the zones at the press); and,
with --send, the worker's rate for a plain broadcast against one whose test goes to half the
audience in four variants (each reader's message picked per variant).

    .venv/bin/python bench/engagement.py [readers] [rounds] [--backend sqlite|postgresql] [--send N]

The rounds alternate the kinds, so a machine that slows mid-run slows all of them; each
figure is the median of its rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Bench, populate, steer
from million_snapshot import write_whole_snapshot
from render import BODY

KINDS = ("plain", "ab", "local")
ZONES = ("Asia/Tokyo", "Europe/Berlin", "America/New_York", "Australia/Sydney",
         "America/Sao_Paulo", "Asia/Kolkata", "Europe/London", None)


def ab_test(share: int) -> dict:
    return {"variants": [{"subject": s} for s in ("News", "This week's news", "Read this",
                                                   "Three things")],
            "share": share, "measure": "opens", "wait_hours": 4, "default": 0}


def press(app, list_id: int, kind: str, share: int = 50) -> int:
    from broadside.campaigns.analytics import modes
    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from broadside.core.models import MailingList
    from webapp.extensions import db

    with app.app_context():
        draft = create_draft(db.session, list_id=list_id, subject="News", body=BODY)
        if kind in ("ab", "tracked"):  # tracked: a plain broadcast tracked as a test is
            db.session.get(MailingList, list_id).per_person_tracking = True
            draft.ab_test = ab_test(share) if kind == "ab" else None
            db.session.commit()
            modes.choose(db.session, draft.id, modes.PER_PERSON)
        elif kind == "local":
            draft.send_at_local = "09:00"
        db.session.commit()
        broadcast = send_broadcast(db.session, draft.id, default_from="Bench <news@bench.example>",
                                   jobs=None)
        broadcast_id = broadcast.id
        db.session.remove()
    return broadcast_id


def worker_rate(bench: Bench, app, url: str, sink, list_id: int, size: int, kind: str,
                label: str) -> float:
    from harness import broadcast_state
    from pipeline import _rate
    from sqlalchemy import update

    from broadside.core.models import Broadcast
    from broadside.core.timeutil import utcnow
    from webapp.extensions import db

    sink.reset()
    broadcast_id = press(app, list_id, kind, share=50)
    if kind == "ab":  # the test's half; then, the wait over at once, the rate of the rest's
        worker = bench.worker(url, smtp_url=sink.url, delay_ms=0, burst=True, label=label)
        worker.wait(timeout=60 + size / 20)
        with app.app_context():
            db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                               .values(ab_wait_until=utcnow() - timedelta(seconds=1),
                                       waiting_until=None))
            db.session.commit()
            db.session.remove()
        sink.reset()
    worker = bench.worker(url, smtp_url=sink.url, delay_ms=0, burst=True, label=label)
    worker.wait(timeout=60 + size / 20)
    stats = sink.stats()
    state = broadcast_state(app, broadcast_id)
    if state["status"] != "sent" or (kind != "ab" and stats["count"] != size):
        raise RuntimeError(f"{label}: {stats['count']} sent, {state}; {worker.output[-2000:]}")
    return _rate(stats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readers", type=int, nargs="?", default=100_000)
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--send", type=int, default=0)
    args = parser.parse_args()
    bench = Bench()
    try:
        url = bench.sqlite_url("engagement") if args.backend == "sqlite" else bench.postgres_url(
            "engagement")
        app = bench.app(url)
        names = [f"{kind} {n}" for n in range(args.rounds) for kind in KINDS]
        lists = populate(app, args.readers, dict.fromkeys(names, args.readers))
        from sqlalchemy import case, update

        from broadside.core.models import Subscriber
        from webapp.extensions import db
        with app.app_context():  # eight zones, one reader in eight without one
            db.session.execute(update(Subscriber).values(timezone=case(
                *((Subscriber.id % len(ZONES) == n, zone) for n, zone in enumerate(ZONES)))))
            db.session.commit()
            db.session.remove()
        seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for round_ in range(args.rounds):
            order = KINDS if round_ % 2 == 0 else tuple(reversed(KINDS))
            for kind in order:
                broadcast_id = press(app, lists[f"{kind} {round_}"], kind)
                seconds[kind].append(write_whole_snapshot(app, broadcast_id))
                steer(app, broadcast_id, "cancel")
        plain = statistics.median(seconds["plain"])
        print(f"Snapshot of {args.readers:,} readers, {args.backend}: plain {plain * 1000:.0f} ms; "
              + "; ".join(f"{kind} {statistics.median(seconds[kind]) * 1000:.0f} ms "
                          f"(ratio {statistics.median(seconds[kind]) / plain:.2f})"
                          for kind in ("ab", "local"))
              + f" (rounds ms: {({k: [round(x * 1000) for x in v] for k, v in seconds.items()})})")
        if args.send:
            from smtp_sink import Sink

            sink = Sink("discard")
            # Both tracked per person (the test needs it: its cost is not the test's). The
            # test's list is twice as long: the rate is its rest's, about as many messages.
            rates: dict[str, list[float]] = {"tracked": [], "ab": []}
            sends = populate(app, 2 * args.send, {
                **{f"send tracked {n}": args.send for n in range(args.rounds)},
                **{f"send ab {n}": 2 * args.send for n in range(args.rounds)}}, domain="send.example")
            for round_ in range(args.rounds):
                for kind in (("tracked", "ab") if round_ % 2 == 0 else ("ab", "tracked")):
                    name = f"send {kind} {round_}"
                    rates[kind].append(worker_rate(
                        bench, app, url, sink, sends[name],
                        args.send * (2 if kind == "ab" else 1), kind, f"engagement-{round_}"))
            a, b = statistics.median(rates["tracked"]), statistics.median(rates["ab"])
            print(f"Worker, about {args.send:,} messages, {args.backend}, discarding server, "
                  f"tracked per person: one message {a:,.0f} msg/s, the rest of a four-variant "
                  f"A/B test {b:,.0f} msg/s: ratio {b / a:.2f} (rounds: "
                  f"{[round(x) for x in rates['tracked']]} / {[round(x) for x in rates['ab']]})")
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
