"""The audit log's cost on a simple change: the same POST (a list's name saved, one UPDATE)
with the audit hook armed and disarmed, alternating rounds in one run, on SQLite (a file)
or PostgreSQL; prints the ratio of medians, not absolute times.

    .venv/bin/python bench/audit_hook.py [--backend sqlite|postgresql] [--requests 200]

Disarmed means the hook's before-request functions and its session and engine listeners are
taken off the app, so nothing of the log runs; armed, each POST adds one INSERT to its
transaction (and the request's bookkeeping).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import Engine, event, func, select, text
from sqlalchemy.orm import Session

from broadside.core import accounts
from broadside.core.models import AuditEntry, MailingList
from webapp import create_app
from webapp.audit import hook
from webapp.extensions import db

LISTENERS = ((Session, "before_commit", hook._before_commit),
             (Session, "after_commit", hook._after_commit),
             (Session, "after_soft_rollback", hook._after_rollback),
             (Engine, "after_cursor_execute", hook._cursor))


def arm(app, on: bool) -> None:
    api = app.before_request_funcs.setdefault("api", [])
    mine = app.before_request_funcs.setdefault(None, [])
    for funcs, fn in ((mine, hook._outside_the_api), (api, hook._begin)):
        if on and fn not in funcs:
            funcs.append(fn)
        if not on and fn in funcs:
            funcs.remove(fn)
    for target, name, fn in LISTENERS:
        if on and not event.contains(target, name, fn):
            event.listen(target, name, fn)
        if not on and event.contains(target, name, fn):
            event.remove(target, name, fn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    if args.backend == "sqlite":
        url = f"sqlite:///{folder / 'bench.db'}"
    else:
        name = f"bench_audit_{uuid.uuid4().hex[:8]}"
        admin = create_app({"DATABASE_URL": "postgresql://postgres@127.0.0.1/postgres",
                            "SECRET_KEY": "b" * 32, "INSTANCE_PATH": str(folder)}, environ={})
        with admin.app_context(), db.engine.connect().execution_options(
                isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = f"postgresql://postgres@127.0.0.1/{name}"
    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "b" * 32, "WTF_CSRF_ENABLED": False,
                      "INSTANCE_PATH": str(folder / "instance"),
                      "BROADSIDE_NAMESPACE": f"bench-{uuid.uuid4().hex[:6]}"}, environ={})
    timings: dict[bool, list[float]] = {True: [], False: []}
    with app.app_context():
        db.create_all()
        accounts.create_owner(db.session, "bench@example.com", "a long bench password")
        weekly = MailingList(name="Weekly")
        db.session.add(weekly)
        db.session.commit()
        list_id = weekly.id
        db.session.remove()
    client = app.test_client()
    client.post("/login", data={"email": "bench@example.com", "password": "a long bench password"})
    for round_number in range(args.rounds):
        for on in ((True, False) if round_number % 2 else (False, True)):
            arm(app, on)
            started = time.perf_counter()
            for i in range(args.requests):
                answer = client.post(f"/lists/{list_id}", data={"name": f"Weekly {i}",
                                                               "description": ""})
                assert answer.status_code in (302, 303), answer.status_code
            timings[on].append((time.perf_counter() - started) / args.requests)
    arm(app, True)
    with app.app_context():
        rows = db.session.scalar(select(func.count()).select_from(AuditEntry))
        db.session.remove()
        db.engine.dispose()
    if args.backend == "postgresql":
        with admin.app_context(), db.engine.connect().execution_options(
                isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'DROP DATABASE "{name}"'))
    expected = args.requests * args.rounds
    assert rows == expected, (rows, expected)
    armed, bare = statistics.median(timings[True]), statistics.median(timings[False])
    print(f"{args.backend}: a simple POST with the audit hook takes {armed / bare:.2f}x the "
          f"time without it ({args.rounds} rounds of {args.requests}; {rows} rows written)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
