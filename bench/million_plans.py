"""Where each page of million_pages.py spends its time, by query cost (issue 19 point 3).

On a shared, loaded machine a page's latency under load says little; what a page costs is
its SQL. This tool builds million_pages.py's database once (bench/million.py, fixed seed) at
a path that outlives the run (`--keep DIR`, a SQLite file there or a PostgreSQL database
named after it), then asks for every page in-process (Flask's test client, the owner signed
in through the form), and lists each page's statements: time (median of `--repeat` runs)
and, for the slowest, EXPLAIN (ANALYZE) on PostgreSQL or EXPLAIN QUERY PLAN on SQLite.

    .venv/bin/python bench/million_plans.py --backend sqlite --size 100000 --keep /tmp/pages-bench
    .venv/bin/python bench/million_plans.py ... --only dashboard --plans
    .venv/bin/python bench/million_plans.py ... --drop     # remove the kept database
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import million
import million_pages
from harness import POSTGRES_URL, Bench


def _urls(backend: str, keep: Path, size: int) -> str:
    """The kept database: a SQLite file in `keep`, or a PostgreSQL database named after the
    size and `keep` (two people keeping theirs in two folders never share one, and one's
    --drop leaves the other's)."""
    name = f"million_{size}"
    if backend == "sqlite":
        return f"sqlite:///{keep / (name + '.db')}"
    folder = hashlib.sha1(str(keep.resolve()).encode()).hexdigest()[:8]
    return POSTGRES_URL.rsplit("/", 1)[0] + f"/broadside_plans_{name}_{folder}"


def _exists(backend: str, url: str) -> bool:
    if backend == "sqlite":
        return Path(url.removeprefix("sqlite:///")).exists()
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            (url.rsplit("/", 1)[1],)).fetchone() is not None


def _create_pg(url: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"')


def drop(backend: str, url: str) -> None:
    if backend == "sqlite":
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def build(bench: Bench, backend: str, url: str, size: int, history_rows: int) -> None:
    if backend == "postgresql":
        _create_pg(url)
    app = bench.app(url)
    started = time.perf_counter()
    million.owner(app)
    lists = million.population(app, size, seed=19)
    million.half_sent_broadcast(app, lists["Everyone"], size)
    million.history(app, history_rows)
    million.analyse(app)
    print(f"built {backend} {size:,} + {history_rows:,} history in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


def _ids(app) -> tuple[dict[str, int], int]:
    from sqlalchemy import select

    from broadside.core.models import Broadcast, MailingList
    from webapp.extensions import db

    with app.app_context():
        lists = dict(db.session.execute(select(MailingList.name, MailingList.id)).all())
        broadcast_id = db.session.scalar(select(Broadcast.id).where(Broadcast.status == "sending"))
        db.session.remove()
    return lists, broadcast_id


def _login(client) -> None:
    page = client.get("/login")
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page.text).group(1)
    response = client.post("/login", data={"email": million.OWNER[0], "password": million.OWNER[1],
                                           "csrf_token": token})
    assert response.status_code == 302, response.status_code


def profile(app, jobs, repeat: int, plans: bool, plan_ms: float) -> None:
    from sqlalchemy import event

    from webapp.extensions import db

    with app.app_context():
        engine = db.engine
    backend = engine.dialect.name
    seen: list[tuple[str, object, float]] = []
    starts: dict[int, float] = {}

    @event.listens_for(engine, "before_cursor_execute")
    def before(conn, cursor, statement, parameters, context, executemany):
        starts[id(cursor)] = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def after(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters, (time.perf_counter() - starts.pop(id(cursor))) * 1000))

    client = app.test_client()
    _login(client)
    for name, path, htmx, target in jobs:
        headers = {"HX-Request": "true"} if htmx else {}
        walls: list[float] = []
        per: dict[int, list[float]] = {}
        texts: dict[int, tuple[str, object]] = {}
        for round_ in range(repeat + 1):
            seen.clear()
            started = time.perf_counter()
            response = client.get(path, headers=headers)
            wall = (time.perf_counter() - started) * 1000
            assert response.status_code in (200, 286), (path, response.status_code)
            if round_ == 0:
                continue  # warm-up
            walls.append(wall)
            for i, (statement, parameters, ms) in enumerate(seen):
                per.setdefault(i, []).append(ms)
                texts[i] = (statement, parameters)
        print(f"\n== {name}  GET {path}\n   wall p50 {statistics.median(walls):.1f} ms "
              f"(target {target:.0f}), {len(per)} statements; each alone, fetched to the end:")
        total = 0.0
        for i in per:
            statement, parameters = texts[i]
            flat = " ".join(statement.split())
            if not flat.upper().startswith(("SELECT", "WITH")):
                print(f"   {statistics.median(per[i]):7.2f} ms  {flat[:200]}")
                continue
            with app.app_context():
                cursor = db.session.connection().connection.cursor()
                alone = []
                for _ in range(3):
                    began = time.perf_counter()
                    cursor.execute(statement, parameters)
                    cursor.fetchall()
                    alone.append((time.perf_counter() - began) * 1000)
                ms = statistics.median(alone)
                total += ms
                print(f"   {ms:7.2f} ms  {flat[:200]}")
                if plans and ms >= plan_ms:
                    prefix = ("EXPLAIN (ANALYZE, BUFFERS) " if backend == "postgresql"
                              else "EXPLAIN QUERY PLAN ")
                    if parameters and not isinstance(parameters, dict):
                        print(f"             params {str(parameters)[:200]}")
                    cursor.execute(prefix + statement, parameters)
                    for row in cursor.fetchall():
                        print("             | " + str(row[-1]))
                cursor.close()
                db.session.rollback()
                db.session.remove()
        print(f"   = {total:.1f} ms of SELECTs")
    event.remove(engine, "before_cursor_execute", before)
    event.remove(engine, "after_cursor_execute", after)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=million_pages.BACKENDS, default="sqlite")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--history", type=int, default=None, help="default: million_pages' size")
    parser.add_argument("--keep", type=Path, default=Path("/tmp/pages-bench"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", action="append", help="pages whose name contains this")
    parser.add_argument("--plans", action="store_true")
    parser.add_argument("--plan-ms", type=float, default=2.0)
    parser.add_argument("--drop", action="store_true")
    args = parser.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)
    url = _urls(args.backend, args.keep, args.size)
    if args.drop:
        drop(args.backend, url)
        return 0
    quick = args.size < 1_000_000
    history_rows = args.history if args.history is not None else \
        million.sizes(quick)[2]
    bench = Bench()
    bench.workdir = args.keep
    try:
        if not _exists(args.backend, url):
            build(bench, args.backend, url, args.size, history_rows)
        app = bench.app(url)  # migrates: a new migration is applied to the kept database
        lists, broadcast_id = _ids(app)
        jobs = million_pages.jobs(app, lists, broadcast_id)
        if args.only:
            jobs = [j for j in jobs if any(o.lower() in j[0].lower() for o in args.only)]
        profile(app, jobs, args.repeat, args.plans, args.plan_ms)
    finally:
        bench.workdir = Path("/nonexistent-kept")  # never remove the kept directory
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
