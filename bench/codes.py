"""What minting a code per recipient adds to the worker's claim: the claim of a batch of 100
rows with codes on (the guarded `UPDATE ... RETURNING` and ONE `INSERT ... ON CONFLICT DO
NOTHING RETURNING` of the batch's codes, as `jobs.broadcasts.BroadcastRows.claim` does) against
the same claim with codes off, and against minting one row at a time (a round trip per row, the
shape the set-based INSERT replaces).

    .venv/bin/python bench/codes.py [--backend sqlite|postgresql] [--people 20000]

Per backend: `people` people on one list, three broadcasts to them (codes off, codes on, codes
on minted row by row), each snapshotted whole; then the three are claimed in turns, a batch of
each per round, each batch committed (as the engine commits a claim before any send), so a
noisy moment of a shared machine falls on all three alike. The figures: the ratio of the
medians of per-batch time, codes on / codes off (shown), and what a code adds to each row's
claim, in µs, with its target: at most ADDED_TARGET, under 5% of one message's own time at the
fastest the worker sends to a local SMTP server (about 700 a second: 1,430 µs each). The claim
without codes is one UPDATE for 100 rows (10-30 µs a row), so the ratio looks large where the
absolute cost is small; the row-by-row ratio is shown for comparison.
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
from report import Figure

BATCH = 100  # the engine's MAX_BATCH
ADDED_TARGET = 60.0  # µs a row


def measure(app, list_id: int, backend: str) -> list[Figure]:
    from sqlalchemy import update

    from broadside.campaigns.codes import minting
    from broadside.core.models import Broadcast, Revision
    from jobs.broadcasts import BroadcastRows
    from webapp.extensions import db

    ids = {}
    for kind in ("off", "on", "by row"):
        broadcast_id, _ = press_send(app, list_id, enqueue=False)
        write_whole_snapshot(app, broadcast_id)
        ids[kind] = broadcast_id
    with app.app_context():
        session = db.session
        # Sending, as a slice makes it; the revision mints (as frozen at Send) where codes are on.
        session.execute(update(Broadcast).values(status="sending"))
        session.execute(update(Revision).where(Revision.broadcast_id != ids["off"])
                        .values(codes_prefix="SAVE"))
        session.commit()
        sources = {kind: BroadcastRows(session, None, broadcast_id)  # type: ignore[arg-type]
                   for kind, broadcast_id in ids.items()}
        sources["on"].codes_prefix = "SAVE"
        times: dict[str, list[float]] = {kind: [] for kind in ids}
        while True:
            claimed = 0
            for kind, source in sources.items():
                started = time.perf_counter()
                rows = source.claim(BATCH)
                if kind == "by row":  # the same codes, one INSERT round trip per row
                    for row in rows:
                        minting.mint(session, minting.DELIVERY, [minting.ToMint(
                            row.id, row.subscriber_id, "SAVE", broadcast_id=ids[kind])])
                session.commit()
                if rows:
                    times[kind].append(time.perf_counter() - started)
                claimed += len(rows)
            if not claimed:
                break
        session.remove()
    per_row = {kind: statistics.median(t) / BATCH * 1e6 for kind, t in times.items()}
    ratio = per_row["on"] / per_row["off"]
    by_row = per_row["by row"] / per_row["off"]
    detail = (f"claim of {BATCH}: {per_row['off']:.1f} µs/row off, {per_row['on']:.1f} on "
              f"(row by row: {per_row['by row']:.1f}, {by_row:.2f}x), {len(times['on'])} batches")
    added = per_row["on"] - per_row["off"]
    return [Figure("codes", f"claim with codes / without, {backend}", round(ratio, 2), "x",
                   "", None, detail,
                   extra={"us_per_row": per_row, "row_by_row_ratio": round(by_row, 2)}),
            Figure("codes", f"a code's cost in the claim, {backend}", round(added, 1), "µs/row",
                   f"<= {ADDED_TARGET:.0f}", added <= ADDED_TARGET,
                   f"{per_row['on']:.1f} - {per_row['off']:.1f} µs a row, batches of {BATCH}")]


def run(bench: Bench, backend: str, people: int = 20_000) -> list[Figure]:
    url = bench.sqlite_url("codes") if backend == "sqlite" else bench.postgres_url("codes")
    app = bench.app(url)
    lists = populate(app, people, {"All": people})
    return measure(app, lists["All"], backend)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    parser.add_argument("--people", type=int, default=20_000)
    args = parser.parse_args()
    bench = Bench()
    failed = False
    try:
        for backend in args.backend or ["sqlite", "postgresql"]:
            for figure in run(bench, backend, args.people):
                failed |= figure.ok is False
                print(f"{figure.result:5} {figure.name:45} {figure.shown():>10}  {figure.detail}")
    finally:
        bench.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
