"""A bulk action's confirmation fixes its set of people: what that costs the request.

The confirmation's POST counts who the filter matches (as before) and now also writes their
ids into `bulk_action_members` (one INSERT ... SELECT, in the transaction of the action's
row). Per backend, over `million.population(n)` (default 100,000 people), for four filters,
the median of `--repeat` runs of:

- `count`: `bulk.plan` alone, the confirmation page's cost (and the POST's before the set);
- `confirm`: the POST's domain work now: `bulk.plan` uncounted, then `bulk.submit` (the set
  written, its size checked against what the page said) with its commit;
- `batch`: one worker batch of 1,000 (the set's keyset read, the re-check against the
  filter, the effect, the batch's rows deleted), for an "add to a list".

Each confirmed action is removed afterwards (its set, its row, what its batch did). Printed
as milliseconds and as the ratio confirm / count (the POST now, relative to the POST before
the set, which was the count and one row).

On SQLite also the longest a writer on another connection (as the worker's claims and
outcomes are) waited for the one write lock during a confirmation, and its ratio to the
confirmation's own time. (Reading the ids ahead in chunks, outside the lock, then writing
them in chunks made that wait longer, not shorter: at a million, 0.8-0.9 s against 0.3-0.8 s
for the one INSERT ... SELECT, which stayed.)

    .venv/bin/python bench/bulk_confirm.py [--size 100000] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from harness import Bench
from million import analyse, population

FILTERS = {
    "everyone": {},
    "list Everyone": {"list_id": "Everyone"},
    "active on Everyone": {"list_id": "Everyone", "status": "active"},
    "name contains 'a'": {"q": "a"},
}


def writer_waited(path: str, confirm) -> float:
    """The longest wait (ms) of a writer committing one row every 10 ms while `confirm` runs."""
    import sqlite3
    import threading

    waits: list[float] = []
    done = threading.Event()

    def write() -> None:
        connection = sqlite3.connect(path, timeout=60, isolation_level=None)
        connection.execute("CREATE TABLE IF NOT EXISTS bench_ticks (x INTEGER)")
        while not done.is_set():
            start = time.perf_counter()
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO bench_ticks VALUES (1)")
            connection.execute("COMMIT")
            waits.append(time.perf_counter() - start)
            time.sleep(0.01)
        connection.close()

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(0.1)
    confirm()
    time.sleep(0.1)
    done.set()
    thread.join()
    return max(waits) * 1000


def lock_waits(app, lists: dict[str, int], path: str) -> list[tuple[str, float, float]]:
    """Per filter: the writer's longest wait during a confirmation, and the confirmation's own
    time (SQLite only)."""
    from sqlalchemy import delete

    from broadside.audience.subscribers import bulk
    from broadside.audience.subscribers.search import Filters
    from broadside.core.models import BulkAction, BulkActionMember
    from webapp.extensions import db

    rows = []
    with app.app_context():
        for label, raw in FILTERS.items():
            filters = Filters.parse(raw.get("q"), None,
                                    lists[raw["list_id"]] if "list_id" in raw else None,
                                    raw.get("status"))
            expected = bulk.plan(db.session, action="block", list_id=None, scope="all",
                                 ids=[], filters=filters).total
            db.session.rollback()
            took: list[float] = []

            def confirm() -> None:
                start = time.perf_counter()
                plan = bulk.plan(db.session, action="block", list_id=None, scope="all",
                                 ids=[], filters=filters, count=False)  # noqa: B023
                bulk.submit(db.session, plan, lambda _id: None, expected=expected)  # noqa: B023
                took.append((time.perf_counter() - start) * 1000)  # noqa: B023
                db.session.execute(delete(BulkActionMember))
                db.session.execute(delete(BulkAction))
                db.session.commit()

            rows.append((label, writer_waited(path, confirm), took[0]))
        db.session.remove()
    return rows


def measure(app, lists: dict[str, int], repeat: int) -> list[tuple[str, float, float, float, int]]:
    from sqlalchemy import delete

    from broadside.audience.subscribers import bulk
    from broadside.audience.subscribers.search import Filters
    from broadside.core.models import BulkAction, BulkActionMember, Subscription
    from webapp.extensions import db

    spare = None
    rows = []
    with app.app_context():
        from broadside.audience import lists as list_service

        spare = list_service.create_list(db.session, "Bench spare").id
        for label, raw in FILTERS.items():
            filters = Filters.parse(raw.get("q"), None,
                                    lists[raw["list_id"]] if "list_id" in raw else None,
                                    raw.get("status"))
            counts, confirms, batches, total = [], [], [], 0
            for _ in range(repeat):
                start = time.perf_counter()
                plan = bulk.plan(db.session, action="add", list_id=spare, scope="all", ids=[],
                                 filters=filters)
                db.session.rollback()
                counts.append(time.perf_counter() - start)
                expected = plan.total
                start = time.perf_counter()  # the POST: checked uncounted, counted by the set
                plan = bulk.plan(db.session, action="add", list_id=spare, scope="all", ids=[],
                                 filters=filters, count=False)
                record = bulk.submit(db.session, plan, lambda _id: None, expected=expected)
                confirms.append(time.perf_counter() - start)
                total = record.total
                bulk._move(db.session, record.id, "start")
                db.session.commit()
                start = time.perf_counter()
                bulk.run_batch(db.session, record.id, 1000)
                batches.append(time.perf_counter() - start)
                db.session.execute(delete(BulkActionMember))
                db.session.execute(delete(BulkAction))
                db.session.execute(delete(Subscription).where(Subscription.list_id == spare))
                db.session.commit()
            rows.append((label, statistics.median(counts) * 1000,
                         statistics.median(confirms) * 1000, statistics.median(batches) * 1000,
                         total))
        db.session.remove()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    args = parser.parse_args()
    bench = Bench()
    try:
        for backend in args.backend or ["sqlite", "postgresql"]:
            url = bench.sqlite_url("bulk") if backend == "sqlite" else bench.postgres_url("bulk")
            app = bench.app(url)
            lists = population(app, args.size)
            analyse(app)
            print(f"{backend}, {args.size:,} people")
            print(f"  {'filter':22} {'people':>9} {'count ms':>9} {'confirm ms':>11} "
                  f"{'ratio':>6} {'batch ms':>9}")
            for label, count, confirm, batch, total in measure(app, lists, args.repeat):
                print(f"  {label:22} {total:>9,} {count:>9.0f} {confirm:>11.0f} "
                      f"{confirm / count:>6.2f} {batch:>9.1f}")
            if backend == "sqlite":
                print(f"  {'a writer waited':22} {'waited ms':>9} {'confirm ms':>11} "
                      f"{'ratio':>6}")
                for label, waited, took in lock_waits(app, lists, url.removeprefix("sqlite:///")):
                    print(f"  {label:22} {waited:>9.0f} {took:>11.0f} {waited / took:>6.2f}")
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
