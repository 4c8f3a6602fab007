"""Benchmark: the live progress fragment of a 100,000-recipient broadcast, mid-send.

Target: p95 under 20 ms. A temporary database gets 100,000 subscribers on one list
and a broadcast sent to it through the real send path (send_broadcast: one INSERT ... SELECT
snapshot of 100,000 deliveries); the app runs under gunicorn as the Procfile's `web` line
(2 workers x 4 threads); an owner signs in through the login form; client threads, each on its
own keep-alive connection, GET the fragment as htmx polls it (HX-Request). Meanwhile a writer
thread plays the worker: it claims and marks sent 10 deliveries every 50 ms through the same
ledger functions the worker uses (so the broadcast row's counters change under the readers).
For comparison it also times the whole broadcast page and two deliveries-table requests.

Run: .venv/bin/python bench/progress_fragment.py [--postgres URL] [--threads N] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import subscriber_table as http_bench  # noqa: E402 - free_port, login, wait_for, Client

RECIPIENTS = 100_000
TARGET_P95_MS = 20.0
OWNER = http_bench.OWNER


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def make_app(database_url: str, workdir: Path, namespace: str):
    from webapp import create_app

    return create_app({"DATABASE_URL": database_url, "SECRET_KEY": "bench-secret-key-0123456789",
                       "INSTANCE_PATH": str(workdir / "instance"), "BROADSIDE_NAMESPACE": namespace},
                      environ={})


def populate(app) -> int:
    """100,000 subscribers on one list, and a broadcast to them queued by the real send path."""
    from flask_migrate import upgrade
    from million_snapshot import write_whole_snapshot
    from sqlalchemy import insert, select, update

    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from broadside.core.accounts import create_owner
    from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription
    from broadside.core.site_settings import update_settings
    from webapp.extensions import db

    with app.app_context():
        upgrade()
        create_owner(db.session, *OWNER)
        update_settings(db.session, sender_name="Bench", sender_email="news@bench.example",
                        postal_address="1 Bench Street", time_zone="Europe/Berlin")
        weekly = MailingList(name="Weekly")
        db.session.add(weekly)
        db.session.flush()
        for start in range(0, RECIPIENTS, 10_000):
            db.session.execute(insert(Subscriber), [
                {"email": f"reader{i:06d}@example.com", "name": f"Reader {i}", "attributes": {}}
                for i in range(start, start + 10_000)])
        ids = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
        for start in range(0, len(ids), 10_000):
            db.session.execute(insert(Subscription), [
                {"subscriber_id": sid, "list_id": weekly.id, "status": "active"}
                for sid in ids[start:start + 10_000]])
        db.session.commit()
        draft = create_draft(db.session, list_id=weekly.id, subject="Hello {{ name }}", body="News.")
        broadcast = send_broadcast(db.session, draft.id, default_from="Bench <news@bench.example>",
                                   jobs=None)
        db.session.commit()
        write_whole_snapshot(app, broadcast.id)  # the worker's part, done here
        db.session.refresh(broadcast)
        db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                           .values(status="sending", send_rate=45.0))
        db.session.commit()
        assert broadcast.total == RECIPIENTS, broadcast.total
        db.session.execute(db.text("ANALYZE"))  # as a settled database would have its statistics
        db.session.commit()
        return broadcast.id


class Writer(threading.Thread):
    """Plays the worker: claim 10 rows, mark them sent, every 50 ms, via the ledger."""

    def __init__(self, app, broadcast_id: int) -> None:
        super().__init__(daemon=True)
        self.app, self.broadcast_id = app, broadcast_id
        self.stop = threading.Event()
        self.moved = 0

    def run(self) -> None:
        from sqlalchemy import select

        from broadside.campaigns.broadcasts import ledger
        from broadside.core.models import Delivery
        from broadside.core.timeutil import utcnow
        from webapp.extensions import db

        with self.app.app_context():
            while not self.stop.wait(0.05):
                rows = db.session.execute(
                    select(Delivery.id, Delivery.subscriber_id)
                    .where(Delivery.broadcast_id == self.broadcast_id, Delivery.status == "pending")
                    .order_by(Delivery.id).limit(10)).all()
                claimed = ledger.claim(db.session, self.broadcast_id, [tuple(r) for r in rows])
                db.session.commit()
                changes = [ledger.Change(d, s, {"sent_at": utcnow(), "smtp_code": 250,
                                                "reason": "OK queued"}, detail="250 OK queued")
                           for d, s in rows if d in set(claimed)]
                self.moved += len(ledger.transition(db.session, self.broadcast_id, changes,
                                                    source="sending", target="sent"))
                db.session.commit()
            db.session.remove()


def measure(port: int, cookie: str, path: str, htmx: bool, seconds: float,
            threads: int) -> tuple[list[float], int]:
    warm = http_bench.Client(port, cookie)
    for _ in range(5):
        status, _, body = warm.get(path, htmx)
        assert status == 200, (path, status, body[:300])
    warm.conn.close()
    timings: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(_: int) -> None:
        client = http_bench.Client(port, cookie)
        mine = []
        while time.monotonic() < deadline:
            status, elapsed, _ = client.get(path, htmx)
            assert status == 200, (path, status)
            mine.append(elapsed)
        client.conn.close()
        with lock:
            timings.extend(mine)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, range(threads)))
    return timings, len(timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", metavar="URL",
                        help="server URL (e.g. postgresql://postgres@127.0.0.1:5432/test); a "
                             "private database is created there and dropped afterwards")
    parser.add_argument("--threads", type=int, default=2, help="client threads (default 2)")
    parser.add_argument("--seconds", type=float, default=10.0, help="fragment load duration")
    args = parser.parse_args()
    namespace = f"bench-progress-{uuid.uuid4().hex[:6]}"
    pg_name = None
    with tempfile.TemporaryDirectory(prefix="bench-progress-") as tmp:
        workdir = Path(tmp)
        if args.postgres:
            import psycopg

            pg_name = f"bench_progress_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{pg_name}"')
            database_url = args.postgres.rsplit("/", 1)[0] + f"/{pg_name}"
        else:
            database_url = f"sqlite:///{workdir / 'bench.db'}"
        app = make_app(database_url, workdir, namespace)
        server = writer = None
        try:
            started = time.perf_counter()
            broadcast_id = populate(app)
            print(f"{'PostgreSQL' if pg_name else 'SQLite'}: {RECIPIENTS:,} deliveries on broadcast "
                  f"{broadcast_id}, set up in {time.perf_counter() - started:.1f} s")
            port = http_bench.free_port()
            env = {**{k: v for k, v in os.environ.items() if not k.startswith("FLASK_")},
                   "DATABASE_URL": database_url, "SECRET_KEY": "bench-secret-key-0123456789",
                   "BROADSIDE_INSTANCE_PATH": str(workdir / "instance"),
                   "BROADSIDE_NAMESPACE": namespace, "PYTHONPATH": str(ROOT)}
            server = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2",
                 "--threads", "4", "webapp:create_app()"],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            http_bench.wait_for(port, server)
            cookie = http_bench.login(port)
            writer = Writer(app, broadcast_id)
            writer.start()
            rows = []
            for name, path, htmx, seconds in (
                    ("progress fragment (HTMX poll)", f"/broadcasts/{broadcast_id}/progress", True,
                     args.seconds),
                    ("broadcast page (whole)", f"/broadcasts/{broadcast_id}", False, args.seconds / 2),
                    ("deliveries, status=sent", f"/broadcasts/{broadcast_id}/deliveries?status=sent",
                     True, args.seconds / 2),
                    ("deliveries, search no match", f"/broadcasts/{broadcast_id}/deliveries?q=zzz",
                     True, args.seconds / 2)):
                timings, count = measure(port, cookie, path, htmx, seconds, args.threads)
                rows.append((name, timings, count))
        finally:
            if writer is not None:
                writer.stop.set()
                writer.join(10)
            if server is not None:
                server.terminate()
                server.wait(10)
                server.stderr.close()
            with app.app_context():
                from webapp.extensions import db

                db.engine.dispose()
            if pg_name:
                import psycopg

                with psycopg.connect(args.postgres, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
    print(f"{args.threads} client threads; the writer moved {writer.moved:,} deliveries "
          "pending -> sending -> sent meanwhile")
    print(f"{'request':<32} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, timings, count in rows:
        print(f"{name:<32} {count:>8} {statistics.median(timings):8.1f} "
              f"{percentile(timings, 95):8.1f} {max(timings):8.1f}")
    fragment = rows[0][1]
    p95 = percentile(fragment, 95)
    ok = p95 < TARGET_P95_MS
    print(f"progress fragment p95 {p95:.1f} ms (target < {TARGET_P95_MS:.0f} ms): "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
