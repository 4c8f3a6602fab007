"""Deleting a list at a million: the time grows with the list, not with the database (the
confirmation page posts to `/lists/<id>/delete`, which calls `lists.service.delete_list` in
the request).

Per backend: the run's shared million (`million.shared`, with whatever deliveries the benches
before left: 3,000,000 to 4,000,000 at 1M, and their events) and, for the list deleted, the
history an import leaves (one `subscribed` event per subscription, naming its list, as
`import_batch` writes), then two deletes, each timed as the request runs it (`delete_list`
and its commit):

- a new, empty list (the owner removes a list made by mistake): < 0.1 s. Its foreign keys set
  the list's deliveries and events to NULL; before migration 0019's indexes that read every
  delivery and event ever written (at 1M: 0.58 s on SQLite, 0.32 s on PostgreSQL, and growing
  with the history);
- "Offers", a twentieth of the people (57,500 at 1M): its subscriptions go with it and
  their events name no list any more, < 1 s.

Run after the benches that read the million: it deletes one of its lists.

    .venv/bin/python bench/list_delete.py [--quick] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import sys
import time

from harness import Bench
from million import analyse, shared
from report import Figure, below

EMPTY_TARGET_S = 0.1
TARGET_S = 1.0


def subscription_events(app, list_id: int) -> int:
    """One `subscribed` event per subscription of the list, naming it (what an import writes
    for each new person), in one statement. Only the list deleted here gets them: the
    deletion sets exactly those to NULL, and the history's events (millions, from the
    million's build) already make the table one that a scan would notice. Each list's (1.6
    million events in all) cost the run 20 s and measured nothing more."""
    from webapp.extensions import db

    with app.app_context():
        made = db.session.execute(db.text("""
            INSERT INTO events (created_at, kind, subscriber_id, list_id, detail)
            SELECT created_at, 'subscribed', subscriber_id, list_id, 'import'
            FROM subscriptions WHERE list_id = :list_id ORDER BY id"""),
            {"list_id": list_id}).rowcount
        db.session.commit()
        db.session.remove()
    return made


def history_events(app) -> int:
    from webapp.extensions import db

    with app.app_context():
        count = db.session.scalar(db.text("SELECT count(*) FROM events"))
        db.session.remove()
    return count


def deliveries(app) -> int:
    from webapp.extensions import db

    with app.app_context():
        count = db.session.scalar(db.text("SELECT count(*) FROM deliveries"))
        db.session.remove()
    return count


def timed_delete(app, list_id: int) -> float:
    from broadside.audience import lists as service
    from webapp.extensions import db

    with app.app_context():
        started = time.perf_counter()
        service.delete_list(db.session, list_id)
        took = time.perf_counter() - started
        db.session.remove()
    return took


def new_list(app, name: str) -> int:
    from broadside.core.models import MailingList
    from webapp.extensions import db

    with app.app_context():
        mailing_list = MailingList(name=name)
        db.session.add(mailing_list)
        db.session.commit()
        list_id = mailing_list.id
        db.session.remove()
    return list_id


def run(bench: Bench, quick: bool, backends: tuple[str, ...] = ("sqlite", "postgresql")) -> list[Figure]:
    return [figure for backend in backends for figure in run_one(bench, backend, quick)]


def run_one(bench: Bench, backend: str, quick: bool) -> list[Figure]:
    built = shared(bench, backend, quick)
    app = built.app
    scale = "100k" if quick else "1M"
    events = subscription_events(app, built.lists["Offers"])
    # As a settled database would be (this server runs no autovacuum): after the benches
    # before, PostgreSQL's deletion read the dead versions their updates left (2.10 s,
    # against 0.47 s after VACUUM (ANALYZE)).
    analyse(app)
    empty = timed_delete(app, new_list(app, "Made by mistake"))
    offers = timed_delete(app, built.lists["Offers"])
    detail = (f"{built.subscribers:,} people, {deliveries(app):,} deliveries, "
              f"{history_events(app):,} events ({events:,} of them the list's subscriptions)")
    return [
        Figure("lists", f"delete an empty list, {backend}, {scale}", empty * 1000, "ms",
               f"< {EMPTY_TARGET_S * 1000:g} ms", below(empty, EMPTY_TARGET_S), detail),
        Figure("lists", f"delete a list of {built.subscribers // 20:,}, {backend}, {scale}",
               offers, "s", f"< {TARGET_S:g} s", below(offers, TARGET_S), detail),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    args = parser.parse_args()
    bench = Bench()
    try:
        for figure in run(bench, args.quick, tuple(args.backend or ("sqlite", "postgresql"))):
            print(figure)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
