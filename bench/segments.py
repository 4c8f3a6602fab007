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


def _draw(number_sql: str, salt: int) -> str:
    """A fixed pseudo-random number 0..4294967290 for each `number_sql` and `salt` (the same
    on both databases: 64-bit integer arithmetic), so the population needs no Python loop."""
    return f"((({number_sql}) * 2654435761 + {salt} * 40503) % 4294967291)"


def populate(app, subscribers: int = SUBSCRIBERS) -> dict[str, int]:
    """Fill the database; returns the ids the rules name. Set-based (INSERT ... SELECT over a
    generated series, the draws `_draw`): 100,000 people with their lists and history in
    seconds, where the executemany of Python dicts it replaces took 15 s on SQLite and 33 s
    on PostgreSQL, twice a run for each (segments, then automations)."""
    from million import _ago, pick, series
    from sqlalchemy import text

    from broadside.core.models import Broadcast, MailingList
    from broadside.core.timeutil import utcnow
    from webapp.extensions import db

    now = utcnow()
    with app.app_context():
        session = db.session
        backend = session.get_bind().dialect.name
        weekly, offers = MailingList(name="Weekly"), MailingList(name="Offers")
        session.add_all([weekly, offers])
        session.flush()
        i = "(s.x - 1)" if backend == "sqlite" else "(s.x::bigint - 1)"
        as_text = "CAST({} AS TEXT)"
        json_object = "json_object" if backend == "sqlite" else "json_build_object"
        age = as_text.format(f"18 + {_draw(i, 3)} % 63")
        renews = (f"'202' || {as_text.format(f'5 + {_draw(i, 4)} % 3')} || '-0' || "
                  f"{as_text.format(f'1 + {_draw(i, 5)} % 9')} || '-15'")
        attributes = (f"{json_object}('city', {pick(CITIES, _draw(i, 1))}, 'country', 'EU', "
                      f"'plan', {pick(PLANS, _draw(i, 2))}, 'age', {age}, 'renews', {renews})")
        session.execute(text(f"""
            INSERT INTO subscribers (email, name, attributes, created_at, soft_bounce_count,
                                     suppression)
            SELECT 'reader' || {i} || '@bench.example', 'Reader ' || {i}, {attributes}, :now, 0,
                   CASE WHEN {i} % 100 = 0 THEN 'bounced' END
            FROM {series(backend, subscribers)} ORDER BY s.x"""), {"now": now})
        person = "p.id" if backend == "sqlite" else "p.id::bigint"
        joined = _ago(backend, f"({_draw(person, 7)} % 731) * 86400")
        # Everyone on Weekly (5% of them unsubscribed), 30% also on Offers, joined over two years.
        session.execute(text(f"""
            INSERT INTO subscriptions (subscriber_id, list_id, status, created_at)
            SELECT p.id, :weekly,
                   CASE WHEN {_draw(person, 6)} % 100 < 5 THEN 'unsubscribed' ELSE 'active' END,
                   {joined}
            FROM subscribers p ORDER BY p.id"""), {"weekly": weekly.id})
        session.execute(text(f"""
            INSERT INTO subscriptions (subscriber_id, list_id, status, created_at)
            SELECT p.id, :offers, 'active', {joined}
            FROM subscribers p WHERE {_draw(person, 8)} % 10 < 3 ORDER BY p.id"""),
            {"offers": offers.id})
        history = []
        for n in range(HISTORY):
            sent_at = now - timedelta(days=7 * (HISTORY - n))
            past = Broadcast(list_id=weekly.id, subject=f"Issue #{n + 1}", status="sent",
                             created_at=sent_at)
            session.add(past)
            session.flush()
            history.append(past.id)
            # Each reached about 80% of everyone.
            session.execute(text(f"""
                INSERT INTO deliveries (broadcast_id, subscriber_id, status, attempts, list_id,
                                        sent_at)
                SELECT :broadcast, p.id, 'sent', 1, :weekly, :sent_at
                FROM subscribers p WHERE {_draw(person, 10 + n)} % 10 < 8 ORDER BY p.id"""),
                {"broadcast": past.id, "weekly": weekly.id, "sent_at": sent_at})
        result = {"weekly": weekly.id, "offers": offers.id, "last": history[-1]}
        session.commit()
        if backend == "postgresql":
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
    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from broadside.core.timeutil import utcnow
    from broadside.segments import service
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
