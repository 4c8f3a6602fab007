"""The send loop's database statements, old form against new, per row, in alternating rounds
on one private database (issue 19 point 5: the database side of the loop).

    .venv/bin/python bench/loop_costs.py [--backend sqlite|postgresql] [--rows 4000] [--batch 100]

- claim: the due rows read (SELECT) then claimed (`ledger.claim`), against the read and the
  claim in one statement (`ledger.claim_due`), each committed as the loop commits it;
- outcomes: a batch's `sending -> sent` moves as one executemany of the guarded UPDATE (the
  old `move_rows` on PostgreSQL), against `ledger.move_rows` now (on PostgreSQL one
  UPDATE ... FROM unnest; on SQLite still the executemany), each committed;
- the send-time re-check (`recipient_state`), for scale.

Wall time per row on a shared machine: compare the two columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Bench, populate, press_send
from million_snapshot import write_whole_snapshot


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="postgresql")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    from sqlalchemy import select

    from broadside.campaigns.broadcasts import ledger
    from broadside.core.models import Delivery
    from broadside.core.timeutil import utcnow
    from jobs.recheck import recipient_state
    from jobs.sending import _DUE_ROWS
    from webapp.extensions import db

    bench = Bench()
    try:
        url = bench.sqlite_url("costs") if args.backend == "sqlite" else bench.postgres_url("costs")
        app = bench.app(url)
        list_id = populate(app, args.rows, {"costs": args.rows})["costs"]
        table = Delivery.__table__
        seen: dict[str, list[float]] = {}
        with app.app_context():
            session = db.session
            for round_ in range(args.rounds):
                for form in (("old", "new") if round_ % 2 == 0 else ("new", "old")):
                    broadcast_id, _ = press_send(app, list_id, enqueue=False)
                    write_whole_snapshot(app, broadcast_id)
                    claim_s = move_s = recheck_s = 0.0
                    done = 0
                    while True:
                        started = time.perf_counter()
                        if form == "old":
                            rows = [tuple(r) for r in session.connection().execute(
                                _DUE_ROWS, {"broadcast_id": broadcast_id, "now": utcnow(),
                                            "limit": args.batch})]
                            ledger.claim(session, broadcast_id, [(r[0], r[1]) for r in rows])
                        else:
                            rows = ledger.claim_due(session, broadcast_id, args.batch)
                        session.commit()
                        claim_s += time.perf_counter() - started
                        if not rows:
                            break
                        started = time.perf_counter()
                        for _, subscriber_id, list_of in rows:
                            recipient_state(session, broadcast_id, list_of or list_id, subscriber_id)
                        recheck_s += time.perf_counter() - started
                        now = utcnow()
                        changes = [ledger.Change(d, s, {"sent_at": now, "smtp_code": 250,
                                                        "reason": "250 OK queued as X",
                                                        "provider_message_id": None,
                                                        "error_class": None})
                                   for d, s, _ in rows]
                        started = time.perf_counter()
                        if form == "old":
                            keys = tuple(sorted(changes[0].values))
                            session.connection().execute(
                                ledger._move_statement(table, keys),
                                [{"_id": c.delivery_id, "_source": "sending", "_target": "sent",
                                  "_now": now, **c.values} for c in changes])
                        else:
                            ledger.move_rows(session, table, changes, source="sending",
                                             target="sent", now=now)
                        session.commit()
                        move_s += time.perf_counter() - started
                        done += len(rows)
                    left = session.scalar(select(Delivery.id).where(
                        Delivery.broadcast_id == broadcast_id, Delivery.status != "sent").limit(1))
                    assert left is None, "every row should be sent"
                    for name, seconds in (("claim", claim_s), ("outcomes", move_s),
                                          ("re-check", recheck_s)):
                        seen.setdefault(f"{name} {form}", []).append(seconds / done * 1e6)
        print(f"{args.backend}, {args.rows} rows in batches of {args.batch}, {args.rounds} rounds "
              "(µs per row, median; each round's figures):")
        for name in ("claim", "outcomes", "re-check"):
            for form in ("old", "new"):
                values = seen[f"{name} {form}"]
                print(f"  {name:9} {form}: {statistics.median(values):7.1f}  "
                      f"({', '.join(f'{v:.1f}' for v in values)})")
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
