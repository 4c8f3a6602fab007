"""Where an import's database time goes: each statement of each batch, timed.

A fresh interpreter imports a generated CSV through `importer.process` (as the worker's job
does) into a fresh database, then the same file again (everyone known), with SQLAlchemy's
cursor events timing every statement; the COPY into the staging table (which goes past
SQLAlchemy, straight to psycopg) is timed by wrapping the staging step, and the commit by the
session's commit events. Printed per import: each statement's total and its mean per batch,
and what is left (reading, validating, the duplicate check: Python). `--explain` also prints
EXPLAIN (ANALYZE, BUFFERS) of the batch's statements on one sample batch in the middle of the
file (run inside a rolled-back savepoint, so the import's figures are the same).

Run: PYTHONPATH=<checkout> .venv/bin/python bench/import_statements.py [--rows 200000]
     [--backend postgresql|sqlite] [--explain]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
POSTGRES_URL = os.environ.get("BROADSIDE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def label(statement: str) -> str:
    """A short, stable name for a statement: its first words, parameters left out."""
    words = re.sub(r"\s+", " ", statement).strip()
    for prefix, name in (("WITH joined", "INSERT subscriptions + events (CTE)"),
                         ("WITH found", "known people: look up, refresh, count"),
                         ("WITH new", "all new: people + subscriptions + events"),
                         ("WITH people", "classify + subscriptions + events")):
        if words.startswith(prefix):
            return name
    for prefix, name in (("UPDATE subscribers", "UPDATE known people"),
                         ("INSERT INTO subscribers", "INSERT new people"),
                         ("SELECT coalesce(sum", "classify SELECT"),
                         ("INSERT INTO subscriptions", "INSERT subscriptions"),
                         ("INSERT INTO events", "INSERT events"),
                         ("INSERT INTO import_stage", "stage (executemany)"),
                         ("ANALYZE import_stage", "ANALYZE import_stage"),
                         ("ANALYZE subscribers", "refresh_statistics ANALYZE"),
                         ("UPDATE imports", "UPDATE imports (progress)"),
                         ("SELECT webhook_endpoints", "outbox: endpoints SELECT"),
                         ("INSERT INTO import_rejections", "INSERT import_rejections")):
        if words.startswith(prefix):
            return name
    return words[:60]


def run(database_url: str, csv_path: Path, workdir: Path, explain: bool) -> None:
    from flask_migrate import upgrade
    from sqlalchemy import event

    from broadside.audience.lists import create_list
    from broadside.audience.transfer import batch as import_batch
    from broadside.audience.transfer import importer
    from webapp import create_app
    from webapp.extensions import db

    app = create_app({"INSTANCE_PATH": str(workdir / "instance"), "DATABASE_URL": database_url,
                      "SECRET_KEY": "bench-secret-key-0123456789",
                      "BROADSIDE_NAMESPACE": f"bench-st-{uuid.uuid4().hex[:6]}"}, environ={})
    times: dict[str, float] = collections.defaultdict(float)
    calls: dict[str, int] = collections.defaultdict(int)

    with app.app_context():
        upgrade()
        list_id = create_list(db.session, "Statements").id
        db.session.remove()
        engine = db.engine

        @event.listens_for(engine, "before_cursor_execute")
        def before(conn, cursor, statement, parameters, context, executemany):
            conn.info["started"] = time.perf_counter()

        @event.listens_for(engine, "after_cursor_execute")
        def after(conn, cursor, statement, parameters, context, executemany):
            name = label(statement)
            times[name] += time.perf_counter() - conn.info.pop("started")
            calls[name] += 1

        stage = import_batch._stage

        def timed_stage(connection, batch):
            started = time.perf_counter()
            inner_before = sum(times.values())
            stage(connection, batch)
            # The COPY (or executemany) and the statements around it; the statements seen by
            # the cursor events are counted under their own names.
            times["stage (json, COPY, its setup)"] += (
                time.perf_counter() - started - (sum(times.values()) - inner_before))
            calls["stage (json, COPY, its setup)"] += 1

        import_batch._stage = timed_stage
        write = importer.write_batch
        batches = [0]

        def timed_write(session, *args, **kwargs):
            batches[0] += 1
            started = time.perf_counter()
            try:
                return write(session, *args, **kwargs)
            finally:
                times["(write_batch, all of it)"] += time.perf_counter() - started

        importer.write_batch = timed_write
        commit_started: list[float] = []

        def on_before_commit(session):
            commit_started.append(time.perf_counter())

        def on_after_commit(session):
            if commit_started:
                times["COMMIT (with its WAL flush)"] += time.perf_counter() - commit_started.pop()
                calls["COMMIT (with its WAL flush)"] += 1

        event.listen(db.session, "before_commit", on_before_commit)
        event.listen(db.session, "after_commit", on_after_commit)

        for key in ("first", "again"):
            times.clear()
            calls.clear()
            batches[0] = 0
            with open(csv_path, "rb") as stream:
                record = importer.receive_upload(
                    db.session, list_id, csv_path.name, stream,
                    importer.import_dir(app.instance_path), 10**10, consent="opted_in")
            path = importer.import_path(app.instance_path, record.id)
            times.clear()
            calls.clear()
            started = time.perf_counter()
            record = importer.process(db.session, record.id, path)
            total = time.perf_counter() - started
            n = max(batches[0], 1)
            print(f"\n== {key} import: {total:.2f} s, {n} batches, status {record.status}, "
                  f"imported {record.imported}, updated {record.updated}")
            inside = times.pop("(write_batch, all of it)", 0.0)
            for name, seconds in sorted(times.items(), key=lambda item: -item[1]):
                print(f"  {name:40} {seconds:7.2f} s  {seconds / n * 1000:8.1f} ms/batch  "
                      f"({calls[name]} calls)")
            print(f"  {'write_batch (all of it)':40} {inside:7.2f} s  {inside / n * 1000:8.1f} "
                  f"ms/batch")
            print(f"  {'not in SQL (Python, reading, seen)':40} "
                  f"{total - sum(times.values()):7.2f} s")
            db.session.remove()
        if explain:
            explain_batch(db, list_id, csv_path)
        db.engine.dispose()


def explain_batch(db, list_id: int, csv_path: Path) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of each statement of one batch of new people and one of
    known people (rolled back)."""
    from sqlalchemy import DateTime, bindparam, text

    from broadside.audience.transfer import batch as import_batch
    from broadside.core.timeutil import utcnow

    rows = []
    with open(csv_path, encoding="utf-8") as lines:
        next(lines)
        for i, line in enumerate(lines):
            email, name, city, plan, score = line.rstrip("\n").split(",")
            rows.append((f"x{email}" if i % 2 else email, name,
                         {"city": city, "plan": plan, "score": score}))
            if len(rows) >= 5000:
                break
    connection = db.session.connection()
    postgres = connection.dialect.name == "postgresql"
    if not postgres:
        print("(--explain is for PostgreSQL)")
        return
    transaction = connection.begin_nested()
    import_batch._stage(connection, rows)
    now = utcnow()
    values = {"list_id": list_id, "now": now, "status": "active", "detail": "imported (x)"}
    names = (("UPDATE known people", "_PG_UPDATE", {}),
             ("INSERT new people", "_INSERT_PEOPLE", {"now": now}),
             ("classify", "_CLASSIFY", {"list_id": list_id}),
             ("subscriptions + events", "_PG_JOIN_AND_EVENTS", values),
             ("known people: refresh and classify", "_PG_KNOWN", {"list_id": list_id}),
             ("classify, subscriptions and events", "_PG_CLASSIFY_JOIN_AND_EVENTS", values),
             ("new people, subscriptions and events (all new)", "_PG_ALL_NEW", values))
    for name, attribute, params in names:
        sql = getattr(import_batch, attribute, None)
        if sql is None:
            continue
        if attribute == "_PG_ALL_NEW":  # a batch of addresses nobody has
            import_batch._stage(connection, [(f"y{email}", name, attributes)
                                             for email, name, attributes in rows])
        statement = text("EXPLAIN (ANALYZE, BUFFERS) " + sql.replace("{join}", "JOIN")
                         .replace("{attributes}", "st.attributes::json"))
        if ":now" in sql:
            statement = statement.bindparams(bindparam("now", type_=DateTime()))
        plan = connection.execute(statement, params).scalars().all()
        print(f"\n-- {name}")
        print("\n".join(plan))
    transaction.rollback()
    db.session.rollback()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="postgresql")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    saved = list(sys.path)
    sys.path.insert(0, str(HERE))
    from million_import import generate

    # harness (imported by million_import) puts this checkout first on the path: the one
    # measured is the one PYTHONPATH names.
    sys.path[:] = saved

    with tempfile.TemporaryDirectory(prefix="bench-import-st-") as tmp:
        workdir = Path(tmp)
        csv_path = workdir / "st.csv"
        generate(csv_path, args.rows)
        drop = None
        if args.backend == "sqlite":
            url = f"sqlite:///{workdir / 'st.db'}"
        else:
            import psycopg

            name = f"broadside_bench_st_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"

            def drop() -> None:
                with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        try:
            run(url, csv_path, workdir, args.explain)
        finally:
            if drop:
                drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
