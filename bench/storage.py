"""Benchmark: bytes on disk per sent delivery (issue 19 point 4), on SQLite and PostgreSQL.

Target: under 400 bytes per delivery on PostgreSQL: the deliveries row, its events and every
index over both, for a broadcast whose every recipient was sent, before any compaction.

How: a private database gets N subscribers on one list (the harness's generator, fixed
names), `send_broadcast` snapshots them into N pending deliveries, then this process plays
the worker through the real ledger: batches of 100 claimed (`ledger.claim`, committed) then
moved `sending -> sent` (`ledger.transition`) with the values `jobs/outcomes.py` writes for an
accepted message (a Postfix-like reply, our Message-ID), committed. So the rows, the events
and the dead row versions are exactly those a real send leaves. Every update leaves a dead
version behind (the status index rules out HOT updates), which PostgreSQL's autovacuum
reclaims during a send so later versions reuse the space; on a server where autovacuum is off
(this machine's), the bench runs the plain VACUUM autovacuum would, once per AUTOVACUUM_EVERY
rows sent, and says so in the figure's detail. Then VACUUM (plain, not FULL,
on PostgreSQL: the space a real database keeps) and the sizes are read per table and per index:
PostgreSQL's pg_relation_size / pg_indexes_size, SQLite's dbstat virtual table (after its
VACUUM, which rebuilds the file). The figure is (deliveries + events, with their indexes) / N.
The two databases are measured at once, a thread each (`run`): bytes do not depend on time.

Run: .venv/bin/python bench/storage.py [--quick] [--sqlite-only] [--postgres-only]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from harness import Bench, populate, press_send  # noqa: E402
from million_snapshot import write_whole_snapshot  # noqa: E402
from report import Figure, below  # noqa: E402

TARGET_BYTES = 400
BATCH = 100  # the worker's MAX_BATCH (jobs/engine.py)
TABLES = ("deliveries", "events")
REPLY = "2.0.0 Ok: queued as 4Bq3Yl0Hxyz"  # what Postfix answers to an accepted message


# PostgreSQL's autovacuum wakes once a minute (autovacuum_naptime) and then reclaims the dead
# row versions of a table past its threshold (0013 sets 10,000 + 1% for deliveries). Where it
# is off (as on this bench machine's server), the bench does that work itself, every
# AUTOVACUUM_EVERY rows: a minute of sending at the issue's ~1,000 msg/s.
AUTOVACUUM_EVERY = 60_000


def autovacuum_off(app) -> bool:
    from webapp.extensions import db

    with app.app_context():
        if db.engine.dialect.name != "postgresql":
            return False
        with db.engine.connect() as connection:
            off = connection.exec_driver_sql("SHOW autovacuum").scalar_one() == "off"
        db.session.remove()
    return off


def send_all(app, broadcast_id: int, *, vacuum_every: int | None = None) -> float:
    """Claim and mark sent every delivery through the ledger, as the worker does; with
    `vacuum_every`, a plain VACUUM of the deliveries each time that many more were sent (what
    autovacuum does on a server where it is on). Seconds."""
    from sqlalchemy import select

    from broadside.campaigns.broadcasts import ledger
    from broadside.core.models import Delivery
    from broadside.core.timeutil import utcnow
    from broadside.mail.message_refs import delivery_message_id as message_id_for
    from webapp.extensions import db

    started = time.perf_counter()
    with app.app_context():
        session = db.session
        last = sent = vacuumed = 0
        while True:
            rows = session.execute(
                select(Delivery.id, Delivery.subscriber_id)
                .where(Delivery.broadcast_id == broadcast_id, Delivery.status == "pending",
                       Delivery.id > last)
                .order_by(Delivery.id).limit(BATCH)).all()
            if not rows:
                break
            last = rows[-1][0]
            claimed = set(ledger.claim(session, broadcast_id, [(r[0], r[1]) for r in rows]))
            session.commit()  # claim before send (invariant 4)
            changes = [
                ledger.Change(delivery_id, subscriber_id, {
                    "sent_at": utcnow(), "smtp_code": 250, "reason": REPLY,
                    "message_id": message_id_for(delivery_id, broadcast_id, "news@bench.example"),
                    "provider_message_id": None, "error_class": None,
                }, detail=f"250 {REPLY}")
                for delivery_id, subscriber_id in rows if delivery_id in claimed
            ]
            ledger.transition(session, broadcast_id, changes, source="sending", target="sent")
            session.commit()
            sent += len(changes)
            if vacuum_every and sent // vacuum_every > vacuumed:
                vacuumed = sent // vacuum_every
                with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                    c.exec_driver_sql("VACUUM deliveries")
        session.remove()
    return time.perf_counter() - started


def sizes(app) -> dict[str, dict[str, int]]:
    """{table: {"table": heap bytes, index name: bytes, ...}} for the deliveries and events."""
    from webapp.extensions import db

    with app.app_context():
        engine = db.engine
        found: dict[str, dict[str, int]] = {t: {} for t in TABLES}
        if engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                found["autovacuum"] = {"runs during the send": connection.exec_driver_sql(
                    "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'deliveries'"
                ).scalar_one()}
                connection.exec_driver_sql("VACUUM (ANALYZE) deliveries, events")
                for table in TABLES:
                    found[table]["table"] = connection.exec_driver_sql(
                        "SELECT pg_relation_size(%s) + pg_relation_size(%s, 'fsm')"
                        " + pg_relation_size(%s, 'vm') + COALESCE(pg_total_relation_size("
                        "(SELECT reltoastrelid FROM pg_class WHERE oid = %s::regclass)), 0)",
                        (table, table, table, table)).scalar_one()
                    for name, size in connection.exec_driver_sql(
                            "SELECT indexrelname, pg_relation_size(indexrelid)"
                            " FROM pg_stat_user_indexes WHERE relname = %s", (table,)):
                        found[table][name] = size
        else:
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.exec_driver_sql("VACUUM")
                for table in TABLES:
                    for name, size in connection.exec_driver_sql(
                            "SELECT d.name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_schema s"
                            " ON s.name = d.name WHERE s.tbl_name = ? GROUP BY d.name", (table,)):
                        found[table]["table" if name == table else name] = int(size)
        db.session.remove()
    return found


def live_bytes(app) -> int | None:
    """PostgreSQL: deliveries + events after VACUUM FULL (the rows alone, no dead versions'
    space): the floor an owner's database approaches when autovacuum keeps up during sends."""
    from webapp.extensions import db

    with app.app_context():
        if db.engine.dialect.name != "postgresql":
            return None
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("VACUUM FULL deliveries, events")
            size = connection.exec_driver_sql(
                "SELECT pg_total_relation_size('deliveries') + pg_total_relation_size('events')"
            ).scalar_one()
        db.session.remove()
    return int(size)


def sent_rows(app, broadcast_id: int) -> int:
    from sqlalchemy import func, select

    from broadside.core.models import Delivery
    from webapp.extensions import db

    with app.app_context():
        count = db.session.scalar(select(func.count()).select_from(Delivery).where(
            Delivery.broadcast_id == broadcast_id, Delivery.status == "sent")) or 0
        db.session.remove()
    return count


def database(bench: Bench, backend: str):
    url = bench.sqlite_url("storage") if backend == "sqlite" else bench.postgres_url("storage")
    return bench.app(url)


def measure(bench: Bench, backend: str, recipients: int, app=None) -> Figure:
    app = app or database(bench, backend)
    lists = populate(app, recipients, {"All": recipients})
    broadcast_id, _ = press_send(app, lists["All"], enqueue=False)
    # The press decides the audience; its rows are written by the worker, in chunks (here, in
    # this process, before any send).
    write_whole_snapshot(app, broadcast_id)
    emulated = autovacuum_off(app)
    seconds = send_all(app, broadcast_id, vacuum_every=AUTOVACUUM_EVERY if emulated else None)
    sent = sent_rows(app, broadcast_id)
    if sent != recipients:
        raise RuntimeError(f"{sent:,} of {recipients:,} deliveries were sent: the figure would lie")
    found = sizes(app)
    autovacuum = found.pop("autovacuum", {}).get("runs during the send")
    total = sum(sum(parts.values()) for parts in found.values())
    per = total / recipients
    breakdown = {table: {name: round(size / recipients, 1) for name, size in parts.items()}
                 for table, parts in found.items()}
    live = live_bytes(app)
    words = "; ".join(
        f"{table} " + ", ".join(f"{name} {value:.0f}" for name, value in parts.items())
        for table, parts in breakdown.items())
    if live is not None:
        words += f"; after VACUUM FULL (live rows only): {live / recipients:.0f} B"
    if emulated:
        words += (f"; autovacuum is off on this server: the bench ran VACUUM every "
                  f"{AUTOVACUUM_EVERY:,} rows sent, as autovacuum would")
    elif autovacuum is not None:
        words += f"; autovacuum ran {autovacuum} times on deliveries during the send"
    target = f"< {TARGET_BYTES} B" if backend == "postgresql" else ""
    return Figure(
        "storage", f"bytes per sent delivery ({backend}, {recipients:,})", round(per, 1), "B",
        target=target, ok=below(per, TARGET_BYTES) if backend == "postgresql" else None,
        detail=f"{total / 1e6:.1f} MB for deliveries + events; per delivery: {words}",
        extra={"bytes": found, "per_delivery": breakdown, "send_seconds": round(seconds, 1),
               "live_bytes_per_delivery": round(live / recipients, 1) if live else None,
               "vacuum_every_rows": AUTOVACUUM_EVERY if emulated else None},
    )


def run(bench: Bench, quick: bool, backends: tuple[str, ...] = ("sqlite", "postgresql")) -> list[Figure]:
    """Both databases at once, a thread each: the figure is bytes, which the other's work
    beside it does not change (SQLite's file is its own; PostgreSQL's VACUUM is held back only
    by transactions in its own database), and the run takes half the time. The databases are
    created and migrated one after the other first (Alembic's context is global)."""
    from concurrent.futures import ThreadPoolExecutor

    recipients = 100_000 if quick else 1_000_000
    apps = {backend: database(bench, backend) for backend in backends}

    def one(backend: str) -> Figure:
        try:
            return measure(bench, backend, recipients, apps[backend])
        except Exception as exc:  # one backend failing still reports the other
            return Figure("storage", f"bytes per sent delivery ({backend})", None, "B",
                          error=True, detail=repr(exc))

    with ThreadPoolExecutor(len(backends)) as pool:
        return list(pool.map(one, backends))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 deliveries (else 1,000,000)")
    parser.add_argument("--recipients", type=int, help="override the number of deliveries")
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--postgres-only", action="store_true")
    args = parser.parse_args()
    backends = ("sqlite",) if args.sqlite_only else ("postgresql",) if args.postgres_only \
        else ("sqlite", "postgresql")
    bench = Bench()
    try:
        if args.recipients:
            figures = [measure(bench, b, args.recipients) for b in backends]
        else:
            figures = run(bench, args.quick, backends)
    finally:
        bench.close()
    for figure in figures:
        print(f"{figure.name}: {figure.shown()}  {figure.target}  {figure.result}")
        print(f"    {figure.detail}")


if __name__ == "__main__":
    main()
