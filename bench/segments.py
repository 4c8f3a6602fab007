"""Segments at 100,000 subscribers: the builder's count and a broadcast's snapshot.

Targets (issue 14): with 100,000 subscribers carrying 5 attributes each, a segment count with
three conditions (one attribute, one join date, one history condition) p95 < 300 ms, and a
segment snapshot < 3 s, on SQLite and on PostgreSQL.

The population: 100,000 people with city, country, plan, age and renews attributes, on one or
two lists joined over the last two years (1% bounced, 5% unsubscribed), and a history of five
sent broadcasts reaching about 80% of them each (about 400,000 delivery rows). The count is
`broadside.segments.service.count_matching`, what the builder's live preview runs; the snapshot
is `send_broadcast` to the segment (freeze, one INSERT ... SELECT with each person's list,
counters), what pressing Send runs.

Run alone: .venv/bin/python bench/segments.py [--backend sqlite|postgresql] [--rounds N]
(bench/run_all.py runs it for both databases.)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import timedelta

from harness import Bench
from million_snapshot import write_whole_snapshot
from report import Figure, below, median, percentile

SUBSCRIBERS = 100_000
COUNT_P95_MS = 300.0
SNAPSHOT_S = 3.0
HISTORY = 5  # sent broadcasts in everyone's past
CITIES = ["Berlin", "Paris", "Lisbon", "Oslo", "Rome", "Vienna", "Madrid", "Prague"]
PLANS = ["free", "free", "free", "paid", "team"]


def populate(app, subscribers: int = SUBSCRIBERS) -> dict[str, int]:
    """Fill the database; returns the ids the rules name."""
    from sqlalchemy import insert, select

    from broadside.models import Broadcast, Delivery, MailingList, Subscriber, Subscription
    from broadside.timeutil import utcnow
    from webapp.extensions import db

    rng = random.Random(14)
    now = utcnow()
    with app.app_context():
        session = db.session
        weekly, offers = MailingList(name="Weekly"), MailingList(name="Offers")
        session.add_all([weekly, offers])
        session.flush()
        chunk = 10_000
        for start in range(0, subscribers, chunk):
            session.execute(insert(Subscriber), [
                {"email": f"reader{i}@bench.example", "name": f"Reader {i}",
                 "attributes": {"city": rng.choice(CITIES), "country": "EU",
                                "plan": rng.choice(PLANS), "age": str(rng.randint(18, 80)),
                                "renews": f"202{rng.randint(5, 7)}-0{rng.randint(1, 9)}-15"},
                 "created_at": now, "suppression": "bounced" if i % 100 == 0 else None}
                for i in range(start, min(start + chunk, subscribers))])
        ids = session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
        rows = []
        for subscriber_id in ids:
            joined = now - timedelta(days=rng.randint(0, 730))
            status = "unsubscribed" if rng.random() < 0.05 else "active"
            rows.append({"subscriber_id": subscriber_id, "list_id": weekly.id, "status": status,
                         "created_at": joined})
            if rng.random() < 0.3:
                rows.append({"subscriber_id": subscriber_id, "list_id": offers.id,
                             "status": "active", "created_at": joined})
        for start in range(0, len(rows), chunk):
            session.execute(insert(Subscription), rows[start:start + chunk])
        history = []
        for n in range(HISTORY):
            past = Broadcast(list_id=weekly.id, subject=f"Issue #{n + 1}", status="sent",
                             created_at=now - timedelta(days=7 * (HISTORY - n)))
            session.add(past)
            session.flush()
            history.append(past.id)
            sent_at = now - timedelta(days=7 * (HISTORY - n))
            deliveries = [{"broadcast_id": past.id, "subscriber_id": s, "status": "sent",
                           "attempts": 1, "list_id": weekly.id, "sent_at": sent_at}
                          for s in ids if rng.random() < 0.8]
            for start in range(0, len(deliveries), chunk):
                session.execute(insert(Delivery), deliveries[start:start + chunk])
        result = {"weekly": weekly.id, "offers": offers.id, "last": history[-1]}
        session.commit()
        if db.engine.dialect.name == "postgresql":
            session.remove()
            with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("VACUUM ANALYZE")
        else:
            session.execute(db.text("ANALYZE"))
            session.commit()
        session.remove()
    return result


def three_conditions(ids: dict[str, int], now) -> dict:
    """One attribute, one join date, one history condition (the issue's measure)."""
    return {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"},
        {"field": "joined", "op": "after", "value": (now - timedelta(days=365)).date().isoformat()},
        {"field": "received", "op": "is_not", "value": ids["last"]},
    ]}


def measure(app, backend: str, ids: dict[str, int], rounds: int) -> list[Figure]:
    from broadside.broadcasts.drafts import create_draft
    from broadside.broadcasts.service import send_broadcast
    from broadside.segments import service
    from broadside.timeutil import utcnow
    from webapp.extensions import db

    figures = []
    with app.app_context():
        session = db.session
        narrow = service.create_segment(session, "Berlin, joined this year, missed the last issue",
                                        three_conditions(ids, utcnow()))
        broad = service.create_segment(session, "Everyone in the EU", {"all": [
            {"field": "attributes.country", "op": "equals", "value": "EU"},
            {"any": [{"field": "list", "op": "is_on", "value": ids["offers"]},
                     {"field": "list", "op": "is_on", "value": ids["weekly"]}]}]})
        timings = []
        for _ in range(rounds + 2):
            started = time.perf_counter()
            count = service.count_matching(session, narrow)
            timings.append((time.perf_counter() - started) * 1000)
            session.rollback()
        timings = timings[2:]  # warm-up
        p95 = percentile(timings, 95)
        figures.append(Figure(
            "segments", f"count, 3 conditions, {backend}", p95, "ms", f"p95 < {COUNT_P95_MS:.0f} ms",
            below(p95, COUNT_P95_MS),
            f"{count:,} of {SUBSCRIBERS:,} match (attribute, join date, did not receive a broadcast); "
            f"median {median(timings):.0f} ms over {len(timings)} counts"))

        for segment, label in ((narrow, "3 conditions"), (broad, "everyone, over two lists")):
            draft = create_draft(session, segment_id=segment.id, subject="Bench {{ name }}",
                                 body="Hello.", skip_if_received_within_hours=None)
            started = time.perf_counter()
            broadcast = send_broadcast(session, draft.id, default_from="Bench <b@bench.example>",
                                       jobs=None)
            session.commit()
            write_whole_snapshot(app, broadcast.id)  # the worker's part, timed here too
            seconds = time.perf_counter() - started
            session.refresh(broadcast)
            figures.append(Figure(
                "segments", f"snapshot, {label}, {backend}", seconds, "s", f"< {SNAPSHOT_S:.0f} s",
                below(seconds, SNAPSHOT_S),
                f"send_broadcast: {broadcast.total:,} pending rows, one copy each with its list"))
        session.remove()
    return figures


def run(bench: Bench, backend: str, rounds: int = 20) -> list[Figure]:
    url = bench.sqlite_url("segments") if backend == "sqlite" else bench.postgres_url("segments")
    app = bench.app(url)
    ids = populate(app)
    return measure(app, backend, ids, rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    bench = Bench()
    failed = False
    try:
        for backend in args.backend or ["sqlite", "postgresql"]:
            started = time.perf_counter()
            for figure in run(bench, backend, args.rounds):
                failed |= figure.ok is False
                print(f"{figure.result:5} {figure.name:45} {figure.shown():>10}  {figure.detail}")
            print(f"({backend}: {time.perf_counter() - started:.0f} s with the population)")
    finally:
        bench.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
