"""Benchmark: the transactional API's latency at 50 requests per second, and the time from a
request to the SMTP server at idle.

Builds a migrated database (SQLite by default, or the DATABASE_URL given), serves the app
over real HTTP (werkzeug, threaded, on loopback), starts a real worker process (`python -m
jobs`, no pace) and an aiosmtpd server, then:

1. at idle: 30 requests half a second apart, each timed from the moment the client starts
   its POST to the moment the SMTP server sees that message's MAIL FROM (p50, max);
2. under load: requests sent open-loop at 50 per second for 10 seconds, alternately with and
   without an `Idempotency-Key`, the worker sending them meanwhile; p50/p99 of each kind and
   their ratio (the key's cost: one indexed read and a UNIQUE index entry), in one run.

Needs Redis on 127.0.0.1:6379 (and PostgreSQL for `postgresql`: a database of its own is
made and dropped, as bench/harness.py does). Run:
    .venv/bin/python bench/transactional_api.py [seconds] [sqlite|postgresql]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RATE = 50


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def post(url: str, token: str, body: dict, key: str | None) -> float:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    started = time.perf_counter()
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        assert response.status == 202, response.status
    return (time.perf_counter() - started) * 1000


def main() -> None:
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    backend = sys.argv[2] if len(sys.argv) > 2 else "sqlite"
    database = None
    if backend == "postgresql":
        import psycopg
        from harness import POSTGRES_URL
        name = f"broadside_bench_tx_{int(time.time())}"
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        database = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        run(seconds, database)
    finally:
        if database:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(seconds: int, database: str | None) -> None:
    from flask_migrate import upgrade
    from werkzeug.serving import make_server

    from broadside.campaigns.transactional.templates import create_template, parse_template
    from broadside.core.accounts import create_token
    from broadside.core.models import Owner
    from tests.helpers import WorkerProcess, forget_namespace
    from tests.smtp_server import SmtpServer, free_port
    from webapp import create_app
    from webapp.extensions import db, get_redis

    with tempfile.TemporaryDirectory() as tmp:
        smtp = SmtpServer().start()
        config = {
            "INSTANCE_PATH": str(Path(tmp) / "instance"),
            "DATABASE_URL": database or f"sqlite:///{Path(tmp) / 'bench.db'}",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            "SECRET_KEY": "bench-secret-key-0123456789",
            "BROADSIDE_NAMESPACE": "bench-transactional",
            "SMTP_URL": smtp.url, "SEND_DELAY_MS": "0",
        }
        app = create_app(config, environ={})
        with app.app_context():
            upgrade()
            owner = Owner(email="owner@example.com", password_hash="x")
            db.session.add(owner)
            db.session.commit()
            _, token = create_token(db.session, owner.id, "bench")
            create_template(db.session, parse_template(db.session, {
                "name": "Code", "subject": "Your code", "essential": True,
                "body": "Hello {{ name }}, your code is **{{ data.code }}**."}),
                default_from="Bench <bench@example.com>")
            forget_namespace(get_redis(), config["BROADSIDE_NAMESPACE"])
        port = free_port()
        server = make_server("127.0.0.1", port, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{port}/api/transactional"
        worker = WorkerProcess(config).start()
        try:
            # Warm: the worker is up and the app's first request is behind us.
            post(url, token, {"template": "Code", "to": "warm@example.com"}, None)
            smtp.wait_for(1, timeout=60)
            idle: list[float] = []
            for i in range(30):
                before = len(smtp.messages)
                started = time.monotonic()
                post(url, token, {"template": "Code", "to": f"idle{i}@example.com",
                                  "data": {"code": f"{i:06d}"}}, f"idle-{i}")
                smtp.wait_for(before + 1, timeout=30)
                idle.append((smtp.messages[before].at - started) * 1000)
                time.sleep(0.5)

            keyed: list[float] = []
            plain: list[float] = []
            total = RATE * seconds
            t0 = time.perf_counter()

            def one(i: int) -> None:
                delay = t0 + i / RATE - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                body = {"template": "Code", "to": f"load{i}@example.com",
                        "data": {"code": f"{i:06d}"}}
                took = post(url, token, body, f"load-{i}" if i % 2 == 0 else None)
                (keyed if i % 2 == 0 else plain).append(took)

            with ThreadPoolExecutor(64) as pool:
                list(pool.map(one, range(total)))
            wall = time.perf_counter() - t0
            smtp.wait_for(31 + total, timeout=120)
        finally:
            worker.stop()
            server.shutdown()
            smtp.stop()
            with app.app_context():
                forget_namespace(get_redis(), config["BROADSIDE_NAMESPACE"])
                db.session.remove()
                db.engine.dispose()

    kind = "PostgreSQL" if database and database.startswith("postgres") else "SQLite"
    print(f"transactional API over HTTP, {kind}, a real worker sending meanwhile")
    print(f"  idle, request -> SMTP MAIL FROM: p50 {statistics.median(idle):6.1f} ms   "
          f"max {max(idle):6.1f} ms   ({len(idle)} requests)")
    for name, values in (("with Idempotency-Key", keyed), ("without a key", plain)):
        print(f"  {RATE}/s, {name:21s} p50 {statistics.median(values):6.1f} ms   "
              f"p99 {percentile(values, 99):6.1f} ms   ({len(values)} requests)")
    print(f"  offered {RATE}/s, achieved {total / wall:.1f}/s; p50 keyed / p50 without: "
          f"{statistics.median(keyed) / statistics.median(plain):.2f}")


if __name__ == "__main__":
    main()
