"""Cancelling a million: the owner's request answers in < 1 s, and the worker then skips every
pending row in short committed chunks (issue 19, the cancel that did not notice the size).

Per backend: the run's shared million (`million.shared`, fixed seed: its broadcast of N
recipients, N = 1,000,000, or 100,000 with --quick; with --size, a population and a broadcast
of its own), every row put back to `pending` and the broadcast paused so nothing sends before
the cancel, a real worker process
running against the discarding SMTP server, then Cancel pressed as the web does
(`service.cancel_broadcast`), timed. The figures:

- the request: the seconds `cancel_broadcast` took (< 1 s);
- the worker's completion: from the press until the broadcast's pending counter is 0 (for
  information; the counters are checked against the rows afterwards);
- for information, with `--before` only: the same rows put back to pending and skipped the
  old way, in the request's own transaction (`ledger.cancel_pending`: one event per row, one
  UPDATE) — what the request used to take, holding the database all that while (at 1M:
  27.6 s on SQLite, 48.6 s on PostgreSQL; BENCHMARKS.md). It costs two more passes over the
  million on each database, so `run_all.py` leaves it out: it is the before of a change
  already made.

Everything is removed afterwards (`Bench.close`).

    .venv/bin/python bench/cancel.py [--quick] [--backend sqlite|postgresql] [--before]
"""

from __future__ import annotations

import argparse
import sys
import time

from harness import Bench
from million import half_sent_broadcast, is_built, population, settle_all, shared
from report import Figure, below
from smtp_sink import Sink

REQUEST_TARGET_S = 1.0
COMPLETE_WAIT_S = 600.0


def all_pending(app, broadcast_id: int) -> int:
    """Every row of the broadcast back to pending (as if none had been attempted), its
    counters to match, the broadcast paused (the worker leaves it alone until the cancel)."""
    from sqlalchemy import func, select, update

    from broadside.core.models import Broadcast, Delivery, Event
    from webapp.extensions import db

    with app.app_context():
        db.session.execute(update(Delivery).where(Delivery.broadcast_id == broadcast_id).values(
            status="pending", attempts=0, smtp_code=None, reason=None, claimed_at=None,
            sent_at=None))
        db.session.execute(Event.__table__.delete().where(Event.broadcast_id == broadcast_id,
                                                          Event.delivery_id.is_not(None)))
        total = db.session.scalar(select(func.count()).select_from(Delivery)
                                  .where(Delivery.broadcast_id == broadcast_id)) or 0
        db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(
            status="paused", pause_reason="bench", finished_at=None, total=total,
            pending_count=total, sending_count=0, sent_count=0, skipped_count=0,
            failed_count=0, unknown_count=0))
        db.session.commit()
        db.session.remove()
    return total


def _state(app, broadcast_id: int) -> tuple[int, int, dict[str, int]]:
    from sqlalchemy import func, select

    from broadside.core.models import Broadcast, Delivery
    from webapp.extensions import db

    with app.app_context():
        pending, skipped = db.session.execute(
            select(Broadcast.pending_count, Broadcast.skipped_count)
            .where(Broadcast.id == broadcast_id)).one()
        rows = dict(db.session.execute(
            select(Delivery.status, func.count()).where(Delivery.broadcast_id == broadcast_id)
            .group_by(Delivery.status)).all()) if pending == 0 else {}
        db.session.remove()
    return pending, skipped, rows


def _pending(app, broadcast_id: int) -> int:
    from sqlalchemy import select

    from broadside.core.models import Broadcast
    from webapp.extensions import db

    with app.app_context():
        value = db.session.scalar(select(Broadcast.pending_count).where(Broadcast.id == broadcast_id))
        db.session.remove()
    return int(value or 0)


def measure(bench: Bench, backend: str, size: int | None, sink: Sink, quick: bool = False,
            before: bool = False) -> list[Figure]:
    """Cancel a broadcast of `size` pending rows built here, or (size None) the run's shared
    million's (`million.shared`), which is left with every row skipped."""
    from broadside.campaigns.broadcasts import ledger, service
    from webapp.extensions import db, get_jobs

    started = time.perf_counter()
    if size is None:
        made = ("the run's shared million (handed on by an earlier bench)"
                if is_built(bench, backend, quick) else "the run's shared million (built here)")
        built = shared(bench, backend, quick)
        app, url, broadcast_id = built.app, built.url, built.broadcast_id
        built.state = "cancelled"
    else:
        url = bench.sqlite_url("cancel") if backend == "sqlite" else bench.postgres_url("cancel")
        app = bench.app(url)
        # ~89% of "Everyone" is active and unsuppressed: enough people for `size` recipients.
        list_id = population(app, size * 115 // 100)["Everyone"]
        broadcast_id = half_sent_broadcast(app, list_id, size)
        made = "a population of its own"
    rows = all_pending(app, broadcast_id)
    populated = time.perf_counter() - started
    label = f"{rows // 1000}k" if rows < 1_000_000 else f"{rows / 1_000_000:g}M"

    bench.forget_jobs()  # no job another bench left queued on this database
    settle_all(bench)
    worker = bench.worker(url, smtp_url=sink.url, burst=False, label=f"cancel-{backend}")
    deadline = time.monotonic() + 60
    while "worker ready" not in worker.output:
        if not worker.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start; log:\n{worker.output[-3000:]}")
        time.sleep(0.05)

    with app.app_context():
        pressed = time.perf_counter()
        service.cancel_broadcast(db.session, broadcast_id, jobs=get_jobs())
        request_s = time.perf_counter() - pressed
        db.session.remove()
    complete_s = None
    while time.perf_counter() - pressed < COMPLETE_WAIT_S and worker.alive():
        if _pending(app, broadcast_id) == 0:
            complete_s = time.perf_counter() - pressed
            break
        time.sleep(0.05)
    worker.terminate()
    pending, skipped, by_status = _state(app, broadcast_id)
    exact = pending == 0 and by_status == {"skipped": rows} and skipped == rows
    if complete_s is None or not exact:
        raise RuntimeError(f"the skip did not finish exactly ({pending=}, {skipped=}, {by_status}); "
                           f"worker log:\n{worker.output[-3000:]}")

    before_s = None
    if before:  # the same rows skipped the old way, inside the request's transaction
        all_pending(app, broadcast_id)
        with app.app_context():
            began = time.perf_counter()
            ledger.cancel_pending(db.session, broadcast_id, "cancelled")
            db.session.commit()
            before_s = time.perf_counter() - began
            db.session.remove()
    old_way = ("" if before_s is None
               else f"the old in-request skip of the same rows took {before_s:.1f} s; ")

    where = f"{label} pending, {backend}"
    return [
        Figure("cancel", f"press Cancel (the request) {where}", request_s, "s",
               f"< {REQUEST_TARGET_S:.0f} s", below(request_s, REQUEST_TARGET_S),
               f"cancel_broadcast: the broadcast moved, one event, the worker's job queued; "
               f"{old_way}{made} and its rows put back to pending took {populated:.0f} s",
               extra={"before_in_request_s": before_s}),
        Figure("cancel", f"press Cancel -> every row skipped {where}", complete_s, "s", "",
               None, f"the worker's chunks ({rows:,} rows, {rows / complete_s:,.0f} rows/s); "
               "counters equal the rows",
               extra={"rows": rows}),
    ]


def run(bench: Bench, quick: bool, backends: tuple[str, ...] = ("sqlite", "postgresql"),
        size: int | None = None, before: bool = False) -> list[Figure]:
    """With no `size`: the run's shared million (1,000,000 recipients; quick 100,000). With
    `before`, also the old in-request skip of the same rows, for information."""
    sink = Sink("discard")
    bench.cleanups.append(sink.close)
    figures: list[Figure] = []
    for backend in backends:
        figures += measure(bench, backend, size, sink, quick, before)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 recipients instead of 1,000,000")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    parser.add_argument("--size", type=int, help="recipients (overrides --quick)")
    parser.add_argument("--before", action="store_true",
                        help="also time the old in-request skip of the same rows")
    args = parser.parse_args()
    bench = Bench()
    failed = False
    try:
        started = time.perf_counter()
        for figure in run(bench, args.quick, tuple(args.backend or ("sqlite", "postgresql")),
                          args.size, args.before):
            failed |= figure.ok is False
            print(f"{figure.result:5} {figure.name:50} {figure.shown():>10}  {figure.detail}")
        print(f"({time.perf_counter() - started:.0f} s in all)")
    finally:
        bench.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
