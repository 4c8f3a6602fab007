"""Benchmark: what one /metrics scrape and one System page cost on a big installation.

The metrics are read from the database at scrape time (one GROUP BY over deliveries, one over
the events of kind bounce/complaint, small ones over broadcasts and subscribers), so their cost
grows with the tables. This fills SQLite and PostgreSQL with N deliveries over 10 broadcasts
(95% sent, 3% skipped, 1% failed, 1% unknown; two events each), one of them still sending,
and times:
  - render_metrics()      the whole scrape body: cold (nothing cached in Redis: every
                          delivery counted) and warm (settled broadcasts cached, the sending
                          one counted again through the broadcast_id index)
  - last_errors()         the System page's "last 20 errors"
  - page_checks()         the System page's doctor checks (database, Redis, lease)
Needs Redis on 127.0.0.1:6379 and PostgreSQL (user postgres, db test). Run:
    .venv/bin/python bench/metrics_scrape.py [deliveries ...]     (default: 100000 1000000)
(METRICS_BACKENDS=postgresql picks one database.)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Bench

BROADCASTS = 10

# status, error_class, reason, smtp_code, attempts: chosen from the row number (x % 100)
DELIVERY_SELECT = """
SELECT 1 + (x % {broadcasts}),
       CASE WHEN x % 100 < 95 THEN 'sent' WHEN x % 100 < 98 THEN 'skipped'
            WHEN x % 100 < 99 THEN 'failed' ELSE 'unknown' END,
       CASE WHEN x % 100 = 98 THEN 'recipient' WHEN x % 100 = 99 THEN 'ambiguous' END,
       CASE WHEN x % 100 BETWEEN 95 AND 97 THEN 'unsubscribed' END,
       CASE WHEN x % 100 < 95 THEN 250 WHEN x % 100 = 98 THEN 550 END,
       CASE WHEN x % 100 < 95 AND x % 7 = 0 THEN 2 ELSE 1 END,
       {now}
FROM {series}
"""


def fill(app, deliveries: int) -> None:
    from sqlalchemy import text

    from webapp.extensions import db

    with app.app_context():
        backend = db.engine.dialect.name
        now = "CURRENT_TIMESTAMP"
        if backend == "sqlite":
            series = (f"(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                      f"WHERE x < {deliveries}) SELECT x FROM c)")
        else:
            series = f"generate_series(1, {deliveries}) AS g(x)"
        for i in range(1, BROADCASTS + 1):
            db.session.execute(text(
                "INSERT INTO broadcasts (id, status, subject, preheader, body, created_at, updated_at, "
                "auto_resumes, total, pending_count, sending_count, sent_count, skipped_count, "
                "failed_count, unknown_count, send_rate) VALUES "
                f"({i}, '{'sending' if i == BROADCASTS else 'sent'}', 'b{i}', '', '', {now}, {now}, 0, 0, "
                f"{1 if i == BROADCASTS else 0}, 0, 0, 0, 0, 0, 0)"))
        db.session.execute(text(
            "INSERT INTO deliveries (broadcast_id, status, error_class, reason, smtp_code, attempts, "
            "updated_at) " + DELIVERY_SELECT.format(broadcasts=BROADCASTS, now=now, series=series)))
        for kind in ("claimed", "sent"):
            db.session.execute(text(
                "INSERT INTO events (kind, broadcast_id, delivery_id, detail, created_at) "
                f"SELECT '{kind}', broadcast_id, id, '', updated_at FROM deliveries"))
        db.session.execute(text(
            "INSERT INTO events (kind, detail, created_at) "
            f"SELECT 'bounce', 'hard bounce: gone', {now} FROM deliveries WHERE id % 1000 = 0"))
        # The outcome counters the ledger would have kept (a sending broadcast's figures are
        # its counters and the rows counted since the last scrape: webapp/metrics/active.py);
        # the last broadcast's one pending row (above) keeps it sending.
        counted = ", ".join(
            f"{status}_count = (SELECT count(*) FROM deliveries d WHERE d.broadcast_id = "
            f"broadcasts.id AND d.status = '{status}')"
            for status in ("sent", "skipped", "failed", "unknown"))
        db.session.execute(text(f"UPDATE broadcasts SET {counted}"))
        db.session.commit()
        if backend == "postgresql":
            db.session.execute(text("ANALYZE"))
            db.session.commit()
        db.session.remove()


def timed(fn, repeat: int = 5) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - started) * 1000)
    return statistics.median(runs), max(runs)


def measure(bench: Bench, backend: str, deliveries: int) -> None:
    from webapp.extensions import db
    from webapp.metrics.collector import render_metrics
    from webapp.system.overview import last_errors, page_checks

    url = bench.sqlite_url(f"m{deliveries}") if backend == "sqlite" else bench.postgres_url(f"m{deliveries}")
    app = bench.app(url)
    started = time.perf_counter()
    fill(app, deliveries)
    filled = time.perf_counter() - started
    with app.app_context():
        redis = app.extensions["broadside_redis"]
        body = render_metrics(db.session, redis, app.config)
        sent = float(deliveries * 95 // 100)
        # Read as a number: the exposition writes 9500000 as 9.5e+06.
        line = next(line for line in body.decode().splitlines()
                    if line.startswith('broadside_deliveries_total{outcome="sent"} '))
        assert float(line.rsplit(" ", 1)[1]) == sent, line

        def cold() -> None:
            for key in redis.scan_iter(f"{bench.namespace}:metrics:*"):
                redis.delete(key)
            render_metrics(db.session, redis, app.config)

        cold_scrape = timed(cold, repeat=3)
        render_metrics(db.session, redis, app.config)
        scrape = timed(lambda: render_metrics(db.session, redis, app.config))
        errors = timed(lambda: last_errors(db.session))
        checks = timed(lambda: page_checks(app))
        db.session.remove()
    print(f"{backend:10} {deliveries:>9,} deliveries ({2 * deliveries:,} events, filled in {filled:.1f} s): "
          f"scrape cold {cold_scrape[0]:7.1f} ms, warm {scrape[0]:6.1f} ms (max {scrape[1]:.1f}), "
          f"last 20 errors {errors[0]:6.1f} ms, "
          f"checks {checks[0]:5.1f} ms, body {len(body):,} bytes")


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100_000, 1_000_000]
    bench = Bench()
    try:
        for deliveries in sizes:
            for backend in os.environ.get("METRICS_BACKENDS", "sqlite,postgresql").split(","):
                measure(bench, backend, deliveries)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
